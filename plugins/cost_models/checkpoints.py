"""Cost-model checkpoint directories: how ``config.json`` and the weights are written (into a
temporary sibling, renamed into place), read and checked against the model loading them.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from tcl.api import validation
from tcl.api.errors import TclError, one_line
from tcl.api.interfaces import Featurizer
from tcl_plugins.cost_models.features import resolve_featurizer

CHECKPOINT_FORMAT = "tcl-cost-model"
CHECKPOINT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.pt"
HEADS_FILE = "heads.pt"
FISHER_FILE = "fisher.pt"
XGB_FILE = "xgb_model.json"


def write_checkpoint(path: Path, config: Mapping[str, Any], write_payload) -> None:
    """Write ``config.json`` plus the payload into a temporary sibling, then rename it into
    place (an existing checkpoint at ``path`` is replaced; any other non-empty directory is
    refused)."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise TclError(f"{path}: exists and is not a checkpoint directory")
        if any(path.iterdir()) and not (path / CONFIG_FILE).exists():
            raise TclError(f"{path}: is a non-empty directory that is not a cost-model checkpoint; not overwriting")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    try:
        write_payload(tmp)
        text = json.dumps(config, indent=1, sort_keys=True, default=_json_default) + "\n"
        with open(tmp / CONFIG_FILE, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        for child in tmp.rglob("*"):  # member checkpoints of an ensemble are directories
            if child.is_file():
                with open(child, "rb") as f:
                    os.fsync(f.fileno())
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
            os.rename(path, old / "ckpt")
        os.rename(tmp, path)
        tmp = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_checkpoint_config(path: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """``(config file, config)`` of the checkpoint directory ``path``."""
    cfg_path = Path(path) / CONFIG_FILE
    if not cfg_path.is_file():
        raise TclError(f"{path}: not a cost-model checkpoint (no {CONFIG_FILE})")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise TclError(f"{cfg_path}: unreadable checkpoint config: {exc}") from None
    if not isinstance(cfg, dict) or cfg.get("format") != CHECKPOINT_FORMAT:
        raise TclError(f"{cfg_path}: not a {CHECKPOINT_FORMAT} config")
    version = cfg.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise TclError(f"{cfg_path}: format_version must be a whole number, got {version!r}")
    if not isinstance(cfg.get("hyper_parameters", {}), dict):
        raise TclError(f"{cfg_path}: hyper_parameters must be an object, got {cfg.get('hyper_parameters')!r}")
    if version > CHECKPOINT_VERSION:
        raise TclError(
            f"{cfg_path}: checkpoint format version {cfg.get('format_version')} is newer than this tcl "
            f"reads ({CHECKPOINT_VERSION}); upgrade tcl"
        )
    return cfg_path, cfg


def check_checkpoint(
    cls_name: str, cfg_path: Path, cfg: Mapping[str, Any], featurizer: str | Featurizer | None, default_featurizer: str
) -> Featurizer:
    """Refuse a checkpoint of another model or featurizer; return the featurizer to use."""
    if cfg.get("model") != cls_name:
        raise TclError(f"{cfg_path}: checkpoint is of cost model '{cfg.get('model')}', not '{cls_name}'")
    saved = cfg.get("featurizer") or {}
    saved_name, saved_version = str(saved.get("name")), str(saved.get("version"))
    try:
        fz = resolve_featurizer(featurizer if featurizer is not None else (saved.get("name") or default_featurizer))
    except TclError as exc:
        raise TclError(f"{cfg_path}: featurizer: {exc}") from None
    if fz.name != saved_name:
        raise TclError(f"{cfg_path}: model was trained with featurizer '{saved_name}', not '{fz.name}'")
    if str(fz.version) != saved_version:
        raise TclError(
            f"{cfg_path}: model was trained with featurizer {saved_name} version {saved_version}, "
            f"but the installed {fz.name} is version {fz.version}; retrain the model"
        )
    return fz


def featurizer_width_error(
    config_file: Path | None, trained: int | None, featurizer: Featurizer, gives: str
) -> TclError:
    """The error for a featurizer whose output changed width without a version bump (so
    :func:`check_checkpoint` let it through), blaming the checkpoint it was loaded from."""
    where = f"{config_file}: " if config_file else ""
    return TclError(
        f"{where}the model was trained on features of width {trained}, but featurizer {featurizer.name} "
        f"version {featurizer.version} gives {gives}; retrain the model, or bump the featurizer's version "
        "when its output changes"
    )


def load_weights(path: Path) -> Any:
    """A state dict saved with ``torch.save``, read without running any pickled code."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise TclError(f"{path}: missing; the checkpoint is incomplete") from None
    except Exception as exc:  # noqa: BLE001 - damaged bytes can make the unpickler raise anything
        raise TclError(f"{path}: not a readable torch weights file ({type(exc).__name__}: {one_line(exc)})") from None


def check_like_default(what: str, value: Any, default: Any) -> None:
    """An architecture option must be of its default's kind: a whole number >= 1 where the
    default is one, a non-negative number where it is a float."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise TclError(f"{what} must be true or false, got {value!r}")
    elif isinstance(default, int):
        validation.whole(value, what)
    elif isinstance(default, float):
        validation.number(value, what, inclusive=True)
    elif isinstance(default, str) and not isinstance(value, str):
        raise TclError(f"{what} must be text, got {value!r}")


def timestamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
