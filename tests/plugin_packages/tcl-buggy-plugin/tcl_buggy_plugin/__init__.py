"""A sampler with a bug: its select divides by the budget it was handed before checking it."""

from tcl.api.hookspecs import hookimpl
from tcl.api.interfaces import Sampler
from tcl.api.registrations import SamplerRegistration


class HalvingSampler(Sampler):
    name = "halving"

    def select(self, task, pool, budget, *, measured=(), model=None, seed=0):
        step = len(pool) // (budget - budget)  # the bug
        return list(range(0, len(pool), step))[:budget]


@hookimpl
def tcl_register_samplers():
    return [SamplerRegistration(name="halving", factory=HalvingSampler, description="divides by zero")]
