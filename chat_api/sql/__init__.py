"""Semantic SQL.

The guard, the compiler with access policies (row-level security), the DuckDB warehouse that runs
it.
"""
