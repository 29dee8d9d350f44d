"""Hook specifications of the ``tcl`` pluggy project.

Registration hooks (``tcl_register_*``) are called once per process, when the plugin
registry is first built; each returns a list of named records from
:mod:`tcl.api.registrations`. Event hooks (``tcl_on_*``) are called while the pipeline runs,
so a third party can observe it (log, plot, stop early); their return values are ignored.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pluggy

PROJECT = "tcl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---- registration hooks: one per extension point -------------------------------------------


@hookspec
def tcl_register_samplers() -> Sequence[Any]:
    """Return :class:`~tcl.api.registrations.SamplerRegistration` records.

    Called once when the registry is built. A sampler picks which candidates of a task's
    pool to measure under a budget (see :class:`tcl.api.interfaces.Sampler`).
    """


@hookspec
def tcl_register_cost_models() -> Sequence[Any]:
    """Return :class:`~tcl.api.registrations.CostModelRegistration` records.

    Called once when the registry is built. A cost model scores programs so that better
    programs score higher (see :class:`tcl.api.interfaces.CostModel`).
    """


@hookspec
def tcl_register_transfer_strategies() -> Sequence[Any]:
    """Return :class:`~tcl.api.registrations.TransferRegistration` records.

    Called once when the registry is built. A strategy turns a teacher model and data of a
    new platform into a model for it (see :class:`tcl.api.interfaces.TransferStrategy`).
    """


@hookspec
def tcl_register_hardware_backends() -> Sequence[Any]:
    """Return :class:`~tcl.api.registrations.BackendRegistration` records.

    Called once when the registry is built. A backend builds and times candidate programs
    for a hardware profile (see :class:`tcl.api.interfaces.HardwareBackend`).
    """


@hookspec
def tcl_register_featurizers() -> Sequence[Any]:
    """Return :class:`~tcl.api.registrations.FeaturizerRegistration` records.

    Called once when the registry is built. A featurizer turns programs into model inputs
    (see :class:`tcl.api.interfaces.Featurizer`).
    """


@hookspec
def tcl_register_networks() -> Sequence[Any]:
    """Return :class:`~tcl.api.registrations.NetworkRegistration` records (network suites).

    Called once when the registry is built. A network is a torch module plus example
    inputs, from which tuning tasks are extracted.
    """


# ---- event hooks: observe the pipeline ----------------------------------------------------


@hookspec
def tcl_on_records_measured(profile: str, task: str, records: Sequence[Any]) -> None:
    """Called after a batch of candidates of ``task`` was measured on ``profile`` and its
    records were durably written. ``records`` are :class:`tcl.api.programs.MeasureResult`."""


@hookspec
def tcl_on_samples_selected(sampler: str, task: str, indices: Sequence[int], pool_size: int) -> None:
    """Called after ``sampler`` chose ``indices`` out of a pool of ``pool_size`` for ``task``."""


@hookspec
def tcl_on_epoch_end(model: str, epoch: int, metrics: Mapping[str, float]) -> None:
    """Called by the trainer after each epoch of ``model`` with that epoch's metrics
    (e.g. ``train_loss``, ``valid_top1``)."""


@hookspec
def tcl_on_transfer_step(strategy: str, profile: str, metrics: Mapping[str, float]) -> None:
    """Called after a transfer strategy produced a model for ``profile`` with its metrics."""


@hookspec
def tcl_on_tuning_round_end(network: str, round_index: int, trials: int, best_latency_s: float) -> None:
    """Called after each tuning round of ``network`` with the trials so far and the best
    end-to-end latency estimate in seconds."""
