"""Registers the built-in cost models, with the checkpoints shipped in plugins/pretrained/;
each model's module (torch, xgboost) loads on first use."""

from __future__ import annotations

from pathlib import Path

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import CostModelRegistration, Deferred

PRETRAINED = Path(__file__).resolve().parent.parent / "pretrained"  # <profile>/<model>/


def shipped_checkpoints(model: str) -> dict[str, Path]:
    """Profile -> the shipped checkpoint of ``model`` for it."""
    if not PRETRAINED.is_dir():
        return {}
    return {d.name: d / model for d in sorted(PRETRAINED.iterdir()) if (d / model / "config.json").is_file()}


@hookimpl
def tcl_register_cost_models() -> list[CostModelRegistration]:
    return [
        CostModelRegistration(
            name="mlp",
            pretrained=shipped_checkpoints("mlp"),
            factory=Deferred("tcl_plugins.cost_models.mlp", "MLPCostModel"),
            featurizer="per-store",
            description="Tenset-MLP: per-store MLP summed over stores, LambdaRank",
        ),
        CostModelRegistration(
            name="tlp",
            pretrained=shipped_checkpoints("tlp"),
            factory=Deferred("tcl_plugins.cost_models.tlp", "TLPCostModel"),
            featurizer="trace-seq",
            description="TLP: self-attention over the schedule primitive sequence, LambdaRank",
        ),
        CostModelRegistration(
            name="mamba",
            pretrained=shipped_checkpoints("mamba"),
            factory=Deferred("tcl_plugins.cost_models.mamba", "MambaCostModel"),
            featurizer="trace-seq",
            description="TCL: Mamba blocks over the schedule primitive sequence, LambdaRank",
        ),
        CostModelRegistration(
            name="xgb",
            factory=Deferred("tcl_plugins.cost_models.xgb", "XGBCostModel"),
            featurizer="per-store",
            description="TVM MetaSchedule's XGBoost model (per-store features)",
        ),
        CostModelRegistration(
            name="ensemble",
            factory=Deferred("tcl_plugins.cost_models.ensemble", "EnsembleCostModel"),
            featurizer="its members'",
            description="several cost models (names or checkpoints) averaged; default three mamba seeds",
        ),
    ]
