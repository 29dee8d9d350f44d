"""TCL's built-in plugins, one subpackage per extension point (samplers, cost_models,
featurizers, backends, transfer, networks) and one module per plugin. Each subpackage's
``register`` module holds its registration hooks and is named in the ``tcl.plugins``
entry-point group in pyproject.toml, exactly as a third-party package registers its own."""
