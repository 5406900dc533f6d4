"""The deterministic reader of questions: vocabulary, reading, query specs, follow-ups, plans and
answer texts.
"""
