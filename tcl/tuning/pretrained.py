"""Pretrained checkpoints that cost-model plugins ship: each plugin names them in its
registration (``CostModelRegistration.pretrained``), so the core never looks for files."""

from __future__ import annotations

from pathlib import Path

from tcl.api import discovery


def pretrained_dir(profile: str, model: str) -> Path | None:
    """The checkpoint directory cost model ``model`` ships for ``profile``, if it ships one."""
    found = discovery.registry().entries["cost_models"].get(model)
    return None if found is None else found.record.pretrained.get(profile)
