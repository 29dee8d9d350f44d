"""Measurement: what measuring needs beyond a backend plugin (the local measuring engine, machine
load, task extraction from networks, default schedules)."""
