"""The PostgreSQL archive (SQLAlchemy 2, psycopg 3).

Engine, writer, lines, derived rows, jobs, hash chain, redaction, runs, replay, audit, diff and
retention. The only package that imports SQLAlchemy or psycopg.
"""
