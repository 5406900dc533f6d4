"""Kafka adapters: producers, consumers, topics, job output, dead letters and consumer lag.

With :mod:`pipeline.worker` the only packages that import aiokafka; errors are translated here.
"""
