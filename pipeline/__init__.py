"""The Kafka pipeline: Chat API client, worker, sink, archive, batch runs, reports, replay, CLI.

One package per subsystem; the import rules between them are in ``docs/layout.md`` and are
checked by ``tests/unit/test_layout.py``.
"""
