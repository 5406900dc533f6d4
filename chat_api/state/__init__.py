"""The Chat API's own state database (SQLAlchemy): users, API keys, threads, embed sessions.
"""
