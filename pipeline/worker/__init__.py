"""The worker: a faust app that takes chat jobs from ``chat.requests`` and drives their streams.

Group membership, ordered acks, cancellations, attempt history and the job runner.
"""
