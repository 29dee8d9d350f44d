"""Learning: training cost models on records, their metrics and evaluation, and the active-learning
loops (offline sampling, online collection, transfer to a new platform)."""
