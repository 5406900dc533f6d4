"""The ``chatscribe`` command line (typer): one module per command group, the demo, child processes.
"""
