"""The Chat API over HTTP (starlette): routes, request bodies, streaming, the embed page, OpenAPI.
"""
