"""The read-only web console over the archive (``chatscribe console``).

Starlette with server-rendered jinja2 templates; it reads the archive only through
:mod:`pipeline.archive` (read-only transactions) and renders answers with
:mod:`models.rendering`.
"""
