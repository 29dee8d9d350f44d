"""Registers the built-in cost models; each model's module (torch, xgboost) loads on first use."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import CostModelRegistration, Deferred


@hookimpl
def tcl_register_cost_models() -> list[CostModelRegistration]:
    return [
        CostModelRegistration(
            name="mlp",
            factory=Deferred("tcl_plugins.cost_models.mlp", "MLPCostModel"),
            featurizer="per-store",
            description="Tenset-MLP: per-store MLP summed over stores, LambdaRank",
        ),
        CostModelRegistration(
            name="tlp",
            factory=Deferred("tcl_plugins.cost_models.tlp", "TLPCostModel"),
            featurizer="trace-seq",
            description="TLP: self-attention over the schedule primitive sequence, LambdaRank",
        ),
        CostModelRegistration(
            name="mamba",
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
    ]
