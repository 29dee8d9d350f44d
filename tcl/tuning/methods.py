"""The cost model a tuning run searches with: TVM's own (``xgb``, ``random``) or one of our
checkpoints inside MetaSchedule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.learning.evaluation import load_checkpoint
from tcl.tuning.bridge import BridgeCostModel, TimedCostModel
from tcl.tuning.pretrained import pretrained_dir

TVM_MODELS = ("xgb", "random")


@attrs.frozen
class Method:
    """A cost model to tune with: TVM's own (``xgb``/``random``) or one of our checkpoints."""

    label: str
    tvm_name: str | None = None
    checkpoint: Path | None = None
    online: bool = False


def resolve_method(spec: str, profile: str, online: bool = False) -> Method:
    """``xgb``/``random`` (TVM's), a checkpoint directory, or a model name with a pretrained checkpoint."""
    suffix = "+online" if online else ""
    if spec in TVM_MODELS:
        return Method(label=spec, tvm_name=spec)
    path = Path(spec)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise TclError(f"cost model {spec!r}: {path} is not a checkpoint (no config.json)")
        return Method(label=path.name + suffix, checkpoint=path, online=online)

    if spec in discovery.registry().names("cost_models"):
        shipped = pretrained_dir(profile, spec)
        if shipped is not None and (shipped / "config.json").is_file():
            return Method(label=spec + suffix, checkpoint=shipped, online=online)
        raise TclError(
            f"cost model {spec!r}: no pretrained checkpoint for profile {profile}; "
            f"train one with tcl train --model {spec} and pass its directory"
        )
    raise TclError(
        f"cost model {spec!r}: expected xgb, random, a checkpoint directory or a cost model "
        f"with a pretrained checkpoint ({', '.join(discovery.registry().names('cost_models'))})"
    )


def ms_cost_model(method: Method, seed: int) -> Any:
    """The method as a MetaSchedule cost model, timed (``.stats``) whichever it is."""
    import tvm.s_tir.meta_schedule as ms

    if method.tvm_name is not None:
        return TimedCostModel(ms.cost_model.CostModel.create(method.tvm_name, num_tuning_cores=1))

    return TimedCostModel(
        BridgeCostModel(load_checkpoint(method.checkpoint, verbose=False, threads=1), online=method.online, seed=seed)
    )
