"""A third-party TCL plugin with one plugin of every extension point; this module only
registers them (the implementations import torch or TVM on first use, not here)."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import (
    BackendRegistration,
    CostModelRegistration,
    Deferred,
    FeaturizerRegistration,
    NetworkRegistration,
    SamplerRegistration,
    TransferRegistration,
)
from tcl_example_plugin.backend import PlainLocalBackend
from tcl_example_plugin.sampler import EveryKthSampler


@hookimpl
def tcl_register_samplers() -> list[SamplerRegistration]:
    return [
        SamplerRegistration(
            name="every-kth", factory=EveryKthSampler, description="every k-th unmeasured candidate (example plugin)"
        )
    ]


@hookimpl
def tcl_register_hardware_backends() -> list[BackendRegistration]:
    return [
        BackendRegistration(
            name="plain-local",
            factory=PlainLocalBackend,
            description="TCL's fast builder + TVM's stock LocalRunner (example plugin)",
        )
    ]


@hookimpl
def tcl_register_featurizers() -> list[FeaturizerRegistration]:
    return [
        FeaturizerRegistration(
            name="instruction-counts",
            version="1",
            factory=Deferred("tcl_example_plugin.featurizer", "InstructionCounts"),
            description="hashed counts of instruction kinds and decisions (example plugin)",
        )
    ]


@hookimpl
def tcl_register_cost_models() -> list[CostModelRegistration]:
    return [
        CostModelRegistration(
            name="ridge",
            featurizer="instruction-counts",
            factory=Deferred("tcl_example_plugin.cost_model", "RidgeCostModel"),
            description="ridge regression on instruction counts (example plugin)",
        )
    ]


@hookimpl
def tcl_register_transfer_strategies() -> list[TransferRegistration]:
    return [
        TransferRegistration(
            name="shrink-to-teacher",
            factory=Deferred("tcl_example_plugin.transfer", "ShrinkToTeacher"),
            description="ridge refit shrunk towards the teacher (example plugin)",
        )
    ]


@hookimpl
def tcl_register_networks() -> list[NetworkRegistration]:
    return [
        NetworkRegistration(
            name="tiny-convnet",
            family="cnn",
            factory=Deferred("tcl_example_plugin.network", "tiny_convnet"),
            description="two 3x3 convs and a classifier, 32x32 (example plugin)",
        )
    ]
