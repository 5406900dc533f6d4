"""Semantic SQL: the guard, the compiler with access policies (row-level security), the DuckDB
warehouse that runs it.
"""
