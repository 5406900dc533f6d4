"""Shapes shared by every part, with no I/O.

The Chat API wire format (:mod:`models.chat`, :mod:`models.wire`), Kafka records
(:mod:`models.records`), tool payloads (:mod:`models.tools`) and the archive's value rules
(:mod:`models.archive`).
"""
