"""Config-driven experiments: ``tcl run CONFIG.toml``.

A config is TOML with ``[experiment] kind = "..."``; the module ``tcl.experiments.<kind>``
supplies ``SCHEMA`` (tables -> keys -> (type, default); defaults are filled in, unknown keys
rejected, ``"path"`` values resolved against the config file's folder), ``validate(cfg,
registry)`` (checks plugin names before any work) and ``run(cfg, out_dir, *, registry,
progress) -> {"rows": [...], "metric": ..., "label": [...]}``; it may also supply
``plot(results, path)``. The runner writes ``config.resolved.json`` before the work and
``results.json`` and ``results.png`` after it, so a finished folder says exactly what ran.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import json
import math
import pkgutil
import tomllib
from pathlib import Path
from typing import Any, Callable, Mapping

from tcl.api import validation
from tcl.api.errors import TclError

REQUIRED = object()
_TYPES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "count": lambda v: _passes(validation.whole, v),  # a whole number >= 1, as CLI options check it
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "bool": lambda v: isinstance(v, bool),
    "table": lambda v: isinstance(v, dict),
    "path": lambda v: isinstance(v, str),
    "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "list[int]": lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
}


def _passes(rule: Callable[[Any], Any], value: Any) -> bool:
    try:
        rule(value)
    except TclError:
        return False
    return True


def kinds() -> list[str]:
    """Experiment kinds: the modules of this package that define ``run``."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_config(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise TclError(f"{path}: no such config file") from None
    except OSError as exc:
        raise TclError(f"{path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise TclError(f"{path}: malformed TOML: {exc}") from None


def apply_schema(cfg: dict[str, Any], schema: Mapping[str, Mapping[str, tuple[str, Any]]], base: Path) -> None:
    """Fill defaults, check types and reject unknown tables/keys, in place."""
    for table in cfg:
        if table not in schema:
            raise TclError(f"unknown table [{table}]; tables: {', '.join(f'[{t}]' for t in schema)}")
    for table, keys in schema.items():
        section = cfg.setdefault(table, {})
        if not isinstance(section, dict):
            raise TclError(f"'{table}' must be a table [{table}]")
        for key in section:
            if key not in keys:
                raise TclError(f"[{table}] unknown key '{key}'; keys: {', '.join(keys)}")
        for key, (kind, default) in keys.items():
            if key not in section:
                if default is REQUIRED:
                    raise TclError(f"[{table}] {key} is missing")
                section[key] = copy.deepcopy(default)
                continue
            value = section[key]
            if not _TYPES[kind](value):
                described = "a whole number >= 1" if kind == "count" else kind
                raise TclError(f"[{table}] {key} must be {described}, got {value!r}")
            if kind == "path":
                section[key] = str((base / value).resolve())


def plugin(registry: Any, cfg: dict[str, Any], point: str, name: str) -> None:
    """Check that plugin ``name`` exists (TclError lists the choices) and note its provider
    under ``cfg["plugins"]`` for config.resolved.json."""
    registry.get(point, name)
    provided = registry.entries[point][name]
    cfg.setdefault("plugins", {}).setdefault(point, {})[name] = provided.distribution


def prepare(config_path: Path, registry: Any) -> tuple[Any, dict[str, Any]]:
    """(kind module, validated config with defaults) or a TclError naming the file."""
    cfg = load_config(config_path)
    try:
        if "experiment" not in cfg:
            near = [t for t in cfg if difflib.get_close_matches(t, ["experiment"], n=1, cutoff=0.7)]
            hint = f"; did you mean [experiment] instead of [{near[0]}]?" if near else ""
            raise TclError(f"no [experiment] table{hint}")
        kind = (cfg.get("experiment") or {}).get("kind")
        if not isinstance(kind, str):
            raise TclError(f"[experiment] kind is missing; kinds: {', '.join(kinds())}")
        if kind not in kinds():
            raise TclError(f"[experiment] unknown kind '{kind}'; kinds: {', '.join(kinds())}")
        module = importlib.import_module(f"{__name__}.{kind}")
        apply_schema(cfg, module.SCHEMA, config_path.resolve().parent)
        cfg["experiment"]["config_file"] = str(config_path.resolve())
        module.validate(cfg, registry)
    except TclError as exc:
        raise TclError(f"{config_path}: {exc}") from None
    return module, cfg


def run_config(
    config_path: Path, out_dir: Path, *, registry: Any, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Validate, run and write config.resolved.json, results.json and results.png."""
    from tcl.records.stored_files import write_atomic

    module, cfg = prepare(config_path, registry)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "config.resolved.json", json.dumps(cfg, indent=2) + "\n")
    results = module.run(cfg, out_dir, registry=registry, progress=progress)
    results.setdefault("kind", cfg["experiment"]["kind"])
    write_atomic(out_dir / "results.json", json.dumps(results, indent=2, default=str) + "\n")
    getattr(module, "plot", plot)(results, out_dir / "results.png")
    return results


def plot(results: Mapping[str, Any], path: Path) -> None:
    """Bar chart of ``results["metric"]`` per row: error bars from ``<metric>_low``/``_high``
    (an interval) or else ``<metric>_std``; ``chance_<metric>`` drawn as a red tick."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric, rows = results["metric"], results["rows"]
    labels = [" / ".join(str(r[k]) for k in results.get("label", ())) for r in rows]
    values = [r.get(metric, math.nan) for r in rows]
    if all(f"{metric}_low" in r for r in rows):  # a 95% interval: asymmetric bars
        errors: Any = [
            [max(0.0, v - r[f"{metric}_low"]) for v, r in zip(values, rows)],
            [max(0.0, r[f"{metric}_high"] - v) for v, r in zip(values, rows)],
        ]
    else:
        errors = [r.get(f"{metric}_std", 0.0) for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(rows) + 1.5), 4.0))
    ax.bar(range(len(rows)), values, yerr=errors if np.any(errors) else None, capsize=3, color="#4c72b0")
    chance = [r.get(f"chance_{metric}") for r in rows]
    if all(c is not None for c in chance):
        ax.scatter(range(len(rows)), chance, marker="_", s=300, color="#c44e52", zorder=3, label="random pick")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1.05 if all(0 <= v <= 1 for v in values if not math.isnan(v)) else None)
    ax.set_title(results.get("title", results.get("kind", "")))
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
