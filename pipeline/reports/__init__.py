"""Human-readable reports (rich tables, CSV, JSON, HTML) over what :mod:`pipeline.archive` returns.
"""
