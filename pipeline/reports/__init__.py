"""Human-readable reports over what :mod:`pipeline.archive` returns.

Rich tables, CSV, JSON and HTML.
"""
