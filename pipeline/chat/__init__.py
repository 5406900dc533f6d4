"""The Chat API client: one httpx stream per job, split into NDJSON lines (spec "Chat endpoint").

The only package that imports httpx; its errors are translated into :mod:`pipeline.errors` here.
"""
