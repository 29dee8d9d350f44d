"""Loading any built-in cost-model checkpoint, the class chosen from its ``config.json``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel
from tcl_plugins.cost_models.checkpoints import read_checkpoint_config
from tcl_plugins.cost_models.ensemble import EnsembleCostModel
from tcl_plugins.cost_models.mamba import MambaCostModel
from tcl_plugins.cost_models.mlp import MLPCostModel
from tcl_plugins.cost_models.tlp import TLPCostModel
from tcl_plugins.cost_models.xgb import XGBCostModel

MODELS: dict[str, type[CostModel]] = {
    "mlp": MLPCostModel,
    "tlp": TLPCostModel,
    "mamba": MambaCostModel,
    "xgb": XGBCostModel,
    "ensemble": EnsembleCostModel,
}


def load_model(path: str | os.PathLike, **options: Any) -> CostModel:
    """Load any built-in checkpoint, choosing the class from its ``config.json``."""
    cfg_path, cfg = read_checkpoint_config(path)
    cls = MODELS.get(str(cfg.get("model")))
    if cls is None:
        raise TclError(
            f"{cfg_path}: cost model '{cfg.get('model')}' is not a built-in one ({', '.join(sorted(MODELS))})"
        )
    return cls.load(Path(path), **options)
