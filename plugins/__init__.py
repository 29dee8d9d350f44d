"""TCL's built-in plugins. Each module here is registered through the ``tcl.plugins`` entry-point
group in pyproject.toml, exactly as a third-party package registers its own."""
