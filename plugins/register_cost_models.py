"""Registers the built-in cost models; the torch code in tcl_plugins.cost_models loads on first use."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import CostModelRegistration, Deferred

IMPL = "tcl_plugins.cost_models"


@hookimpl
def tcl_register_cost_models() -> list[CostModelRegistration]:
    return [
        CostModelRegistration(
            name="mlp",
            factory=Deferred(IMPL, "MLPCostModel"),
            featurizer="per-store",
            description="Tenset-MLP: per-store MLP summed over stores, LambdaRank",
        ),
        CostModelRegistration(
            name="tlp",
            factory=Deferred(IMPL, "TLPCostModel"),
            featurizer="trace-seq",
            description="TLP: self-attention over the schedule primitive sequence, LambdaRank",
        ),
        CostModelRegistration(
            name="mamba",
            factory=Deferred(IMPL, "MambaCostModel"),
            featurizer="trace-seq",
            description="TCL: Mamba blocks over the schedule primitive sequence, LambdaRank",
        ),
        CostModelRegistration(
            name="xgb",
            factory=Deferred(IMPL, "XGBCostModel"),
            featurizer="per-store",
            description="TVM MetaSchedule's XGBoost model (per-store features)",
        ),
    ]
