"""Tuning: a trained cost model inside MetaSchedule (the bridge), tuning networks and compiling them."""
