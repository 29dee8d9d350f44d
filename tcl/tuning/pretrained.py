"""Where the pretrained checkpoints shipped with the built-in plugins are found."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def pretrained_dir(profile: str, model: str) -> Path | None:
    """Where a shipped pretrained checkpoint of ``model`` for ``profile`` lives, if installed."""
    spec = importlib.util.find_spec("tcl_plugins")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "pretrained" / profile / model
