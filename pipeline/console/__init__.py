"""The read-only web console over the archive (``chatscribe console``)."""
