"""Hardware profiles: TOML files naming a backend, a TVM target and measurement settings.

Built-in profiles ship in ``tcl/hardware_profiles`` (the top-level ``hardware_profiles/``
folder of the source tree); users add their own from directories named by ``--profiles-dir``
or ``TCL_PROFILES_PATH`` (os.pathsep-separated). A user profile with a built-in's name
shadows it; two user files with the same name are an error naming both. Any malformed file
is reported with its path, the key and what was expected; targets are checked by TVM's own
target parser when a profile is loaded.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import attrs

from tcl.api.errors import TclError, one_line

PROFILES_PATH_ENV = "TCL_PROFILES_PATH"
AUTO = "auto"

_TOP_KEYS = {"name", "description", "backend", "runtime_threads", "target", "measure", "backend_options"}
_MEASURE_DEFAULTS: dict[str, Any] = {
    "number": 1,  # TVM raises it until a repeat lasts min_repeat_ms
    "repeat": 3,
    "min_repeat_ms": 50,
    "build_timeout_s": 30.0,
    "run_timeout_s": 10.0,
    "enable_cpu_cache_flush": False,
}


@attrs.frozen(kw_only=True)
class MeasureSettings:
    """How a candidate is timed: TVM's evaluator settings plus per-candidate timeouts."""

    number: int
    repeat: int
    min_repeat_ms: int
    build_timeout_s: float
    run_timeout_s: float
    enable_cpu_cache_flush: bool


@attrs.frozen(kw_only=True)
class HardwareProfile:
    name: str
    description: str
    backend: str
    target: dict[str, Any]  # resolved: no "auto" left
    runtime_threads: int
    measure: MeasureSettings
    backend_options: dict[str, Any]
    source: str  # file it came from

    def tvm_target(self) -> Any:
        import tvm

        return tvm.target.Target(self.target)

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def backend_registration(self, registry: Any) -> Any:
        """The registered backend this profile names; an uninstalled one is an error naming
        the profile's file (a profile may name a plugin's backend, so loading cannot check)."""
        try:
            return registry.get("hardware_backends", self.backend)
        except TclError as exc:
            raise TclError(f"{self.source}: profile '{self.name}': {exc}") from None


def builtin_dir() -> Path:
    return Path(str(resources.files("tcl.hardware_profiles")))


def search_dirs(extra: Iterable[str | Path] = ()) -> list[Path]:
    """Built-in directory first, then TCL_PROFILES_PATH, then ``extra`` (later ones win)."""
    dirs = [builtin_dir()]
    env = os.environ.get(PROFILES_PATH_ENV, "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path(p) for p in extra]
    return dirs


def load_profiles(extra_dirs: Iterable[str | Path] = ()) -> dict[str, HardwareProfile]:
    """Every profile found; all files are validated before any "auto" value is detected,
    so a bad file is reported without first paying for TVM's import."""
    raw_profiles: dict[str, tuple[dict[str, Any], str]] = {}
    builtin, *user_dirs = search_dirs(extra_dirs)
    seen: set[Path] = set()
    for directory in [builtin, *user_dirs]:
        if not directory.is_dir():
            raise TclError(f"{directory}: profiles directory does not exist")
        if directory.resolve() in seen:  # named twice (TCL_PROFILES_PATH and --profiles-dir)
            continue
        seen.add(directory.resolve())
        for path in sorted(directory.glob("*.toml")):
            raw = _read_toml(path)
            validate_profile(raw, str(path))
            earlier = raw_profiles.get(raw["name"])
            if earlier is not None and not Path(earlier[1]).is_relative_to(builtin):
                raise TclError(
                    f"{path}: profile name '{raw['name']}' is also the name in {earlier[1]}; "
                    "give each profile its own name"
                )
            raw_profiles[raw["name"]] = (raw, str(path))
    return {name: build_profile(raw, source) for name, (raw, source) in raw_profiles.items()}


def get_profile(name: str, extra_dirs: Iterable[str | Path] = ()) -> HardwareProfile:
    profiles = load_profiles(extra_dirs)
    if name not in profiles:
        raise TclError(f"unknown profile '{name}'; choices: {', '.join(sorted(profiles))}")
    return profiles[name]


def load_profile_file(path: Path) -> HardwareProfile:
    raw = _read_toml(path)
    validate_profile(raw, str(path))
    return build_profile(raw, str(path))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TclError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TclError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise TclError(f"{path}: cannot read: {exc.strerror}") from None


def validate_profile(raw: dict[str, Any], source: str) -> None:
    """Raise TclError naming ``source``, the key and what was expected, for the first problem."""

    def fail(key: str, expected: str) -> TclError:
        got = _lookup(raw, key)
        shown = "nothing" if got is _MISSING else repr(got)
        return TclError(f"{source}: key '{key}': expected {expected}, got {shown}")

    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise TclError(f"{source}: key '{unknown[0]}': unknown; expected one of {', '.join(sorted(_TOP_KEYS))}")
    for key in ("name", "description", "backend"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise fail(key, "a non-empty string")
    target = raw.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("kind"), str):
        raise fail("target.kind" if isinstance(target, dict) else "target", "a table with a string 'kind'")
    if target["kind"] == "llvm" and "num-cores" not in target:  # MetaSchedule's CPU rules read it
        raise fail("target.num-cores", f'a positive integer or "{AUTO}" (the cores a CPU program may use)')
    threads = raw.get("runtime_threads", AUTO)
    if not (threads == AUTO or (isinstance(threads, int) and not isinstance(threads, bool) and threads > 0)):
        raise fail("runtime_threads", f'a positive integer or "{AUTO}"')
    measure = raw.get("measure", {})
    if not isinstance(measure, dict):
        raise fail("measure", "a table")
    for key in sorted(set(measure) - set(_MEASURE_DEFAULTS)):
        raise TclError(f"{source}: key 'measure.{key}': unknown; expected one of {', '.join(_MEASURE_DEFAULTS)}")
    settings = dict(_MEASURE_DEFAULTS, **measure)
    for key, default in _MEASURE_DEFAULTS.items():
        value = settings[key]
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise fail(f"measure.{key}", "true or false")
        elif (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value <= 0
            or (isinstance(default, int) and not isinstance(value, int))
        ):
            raise fail(f"measure.{key}", "a positive " + ("integer" if isinstance(default, int) else "number"))
    if not isinstance(raw.get("backend_options", {}), dict):
        raise fail("backend_options", "a table")


def build_profile(raw: dict[str, Any], source: str) -> HardwareProfile:
    """A validated profile with "auto" values detected on this host."""
    target = _resolve_target(raw["target"])
    _check_target(target, source)
    threads = raw.get("runtime_threads", AUTO)
    if threads == AUTO:
        threads = int(target.get("num-cores", physical_cores()))
    return HardwareProfile(
        name=raw["name"],
        description=raw["description"],
        backend=raw["backend"],
        target=target,
        runtime_threads=threads,
        measure=MeasureSettings(**dict(_MEASURE_DEFAULTS, **raw.get("measure", {}))),
        backend_options=dict(raw.get("backend_options", {})),
        source=source,
    )


def _check_target(target: dict[str, Any], source: str) -> None:
    """The target as TVM's own parser reads it: an unknown kind or key is an error here,
    when the profile is loaded, not a traceback deep inside a collection."""
    import tvm

    cores = target.get("num-cores")
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise TclError(f"{source}: key 'target.num-cores': expected a positive integer or \"{AUTO}\", got {cores!r}")
    try:
        tvm.target.Target(target)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise TclError(f"{source}: [target]: TVM does not accept it: {one_line(exc)}") from None


def _resolve_target(target: dict[str, Any]) -> dict[str, Any]:
    """Replace ``"auto"`` values by what this host has (LLVM's CPU name, core count)."""
    out = {}
    for key, value in target.items():
        if isinstance(value, dict):
            value = _resolve_target(value)
        elif value == AUTO and key == "mcpu":
            value = host_cpu_name()
        elif value == AUTO and key == "num-cores":
            value = physical_cores()
        out[key] = value
    return out


def host_cpu_name() -> str:
    import tvm

    return str(tvm.get_global_func("target.llvm_get_system_cpu")())


def physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


_MISSING = object()


def _lookup(raw: dict[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node
