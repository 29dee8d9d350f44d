"""What the built-in backends share: option checking, the persistent builder and runner kept
across calls, and closing their workers.
"""

from __future__ import annotations

from typing import Any

from tcl.api.errors import TclError
from tcl.api.interfaces import HardwareBackend

_COMMON_OPTIONS = {"build_workers", "builds_per_worker"}


class BuiltinBackend(HardwareBackend):
    """Shared parts: option checking, the builder, lazily created and cached runner."""

    name = "?"
    options: frozenset[str] = frozenset()
    target_kinds: tuple[str, ...] = ()

    def __init__(self, profile: Any) -> None:
        super().__init__(profile)
        self._builder: Any = None
        self._runner: Any = None
        unknown = sorted(set(profile.backend_options) - _COMMON_OPTIONS - set(self.options))
        if unknown:
            expected = ", ".join(sorted(_COMMON_OPTIONS | set(self.options)))
            raise TclError(
                f"{profile.source}: key 'backend_options.{unknown[0]}': unknown for backend "
                f"{self.name}; expected one of {expected}"
            )
        kind = profile.target.get("kind")
        if self.target_kinds and kind not in self.target_kinds:
            raise TclError(
                f"{profile.source}: backend {self.name} needs a target of kind "
                f"{' or '.join(self.target_kinds)}, got '{kind}'"
            )

    # -- options ----------------------------------------------------------------------------

    def option(self, key: str, default: Any = None, *, kind: type | tuple[type, ...] = object) -> Any:
        value = self.profile.backend_options.get(key, default)
        if value is None or (isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)):
            return value
        raise TclError(
            f"{self.profile.source}: key 'backend_options.{key}': expected {_kind_name(kind)}, got {value!r}"
        )

    def _positive_int(self, key: str, default: int) -> int:
        value = self.option(key, default, kind=int)
        if value <= 0:
            raise TclError(
                f"{self.profile.source}: key 'backend_options.{key}': expected a positive integer, got {value!r}"
            )
        return value

    def _number(self, key: str, default: float, low: float, high: float | None = None) -> float:
        """A number in [low, high) (no upper bound when ``high`` is None)."""
        value = self.option(key, default, kind=(int, float))
        if value < low or (high is not None and value >= high):
            wanted = f"a number >= {low:g}" if high is None else f"a number in [{low:g}, {high:g})"
            raise TclError(f"{self.profile.source}: key 'backend_options.{key}': expected {wanted}, got {value!r}")
        return float(value)

    def default_build_workers(self) -> int:
        return 1

    # -- builder / runner -------------------------------------------------------------------

    def builder(self) -> Any:
        if self._builder is None:
            from tcl.api.measure import FastLocalBuilder

            self._builder = FastLocalBuilder(
                max_workers=self._positive_int("build_workers", self.default_build_workers()),
                timeout_sec=float(self.profile.measure.build_timeout_s),
                builds_per_worker=self._positive_int("builds_per_worker", 256),
            )
            # its workers start importing tvm while the runner starts (which blocks)
            self._builder.warm_up()
        return self._builder

    def runner(self) -> Any:
        if self._runner is None:
            self._runner = self._make_runner()
        return self._runner

    def _make_runner(self) -> Any:
        raise NotImplementedError

    def measure(self, mod: Any, schedules: Any) -> Any:
        """MetaSchedule's path with this backend's own kept builder and runner (see :meth:`close`)."""
        from tcl.api.measure import measure_with

        return measure_with(self.builder(), self.runner(), self.target(), mod, schedules)

    def evaluator_config(self) -> Any:
        from tcl.api.measure import evaluator_config

        return evaluator_config(self.profile.measure)

    def close(self) -> None:
        if self._builder is not None:
            self._builder.close()
            self._builder = None
        if self._runner is not None:
            pool = getattr(self._runner, "pool", None)
            if pool is not None:
                pool.shutdown()
            self._runner = None

    def __enter__(self) -> "BuiltinBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", object: "a value"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)
