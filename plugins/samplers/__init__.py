"""Built-in samplers: which candidates of a pool to measure under a budget."""
