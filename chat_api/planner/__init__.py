"""The deterministic reader of questions.

Vocabulary, reading, query specs, follow-ups, plans and answer texts.
"""
