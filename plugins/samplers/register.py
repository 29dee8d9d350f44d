"""Registers the built-in samplers: ``all``, ``random``, ``rdu`` and its single-criterion
ablations; each sampler's module loads on first use."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import Deferred, SamplerRegistration

#: RDU's single-criterion ablations (their weights are tcl_plugins.samplers.rdu.VARIANTS):
#: name -> (needs a model, weights)
RDU_VARIANTS = {
    "rdu-r": (False, "w_r=1, w_d=0, w_u=0"),
    "rdu-d": (False, "w_r=0, w_d=1, w_u=0"),
    "rdu-u": (True, "w_r=0, w_d=0, w_u=1"),
}


@hookimpl
def tcl_register_samplers() -> list[SamplerRegistration]:
    regs = [
        SamplerRegistration(
            name="all",
            factory=Deferred("tcl_plugins.samplers.all", "AllSampler"),
            description="measure every candidate in the pool",
        ),
        SamplerRegistration(
            name="random",
            factory=Deferred("tcl_plugins.samplers.random", "RandomSampler"),
            description="uniform random subset of the pool (baseline for RDU)",
        ),
        SamplerRegistration(
            name="rdu",
            factory=Deferred("tcl_plugins.samplers.rdu", "RDUSampler"),
            needs_model=True,
            description="TCL's RDU active learning: k-means representativeness + greedy k-center diversity + "
            "MC-dropout uncertainty (weights w_r, w_d, w_u; a 0 weight drops a criterion)",
        ),
    ]
    for name, (needs_model, weights) in RDU_VARIANTS.items():
        regs.append(
            SamplerRegistration(
                name=name,
                factory=Deferred("tcl_plugins.samplers.rdu", name.replace("-", "_")),
                needs_model=needs_model,
                description=f"RDU ablation: only the {name[-1].upper()} criterion (rdu with {weights})",
            )
        )
    return regs
