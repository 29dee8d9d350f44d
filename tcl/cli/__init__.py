"""The ``tcl`` command: ``main`` dispatches to one module per subcommand."""
