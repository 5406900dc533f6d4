"""The sink: a batched Kafka consumer that writes lines and events into the archive.

Commits offsets after the database commit, and publishes compact answer records.
"""
