"""The ``chatscribe`` command line (typer).

One module per command group, the demo, child processes.
"""
