"""OpenTelemetry export: archived conversations as traces over OTLP/HTTP (protobuf).

semconv.py (every attribute name), spans.py (turns as spans, deterministic ids), export.py
(the SDK's OTLP/HTTP exporter).
"""
