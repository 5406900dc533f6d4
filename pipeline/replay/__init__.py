"""The replay server: archived conversations served back through the Chat API protocol."""
