"""Finds plugins (stevedore, entry-point group ``tcl.plugins``) and collects what they register.

Each entry point names a module or object holding hook implementations; all of them go
into one pluggy manager. Built-in plugins come from our own distribution through the same
group. A plugin that fails to import or to register is recorded and skipped; two plugins
registering one name under one extension point is an error naming both.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import traceback
from typing import Any

import attrs
import pluggy
from stevedore import ExtensionManager

from tcl.api import hookspecs, registrations
from tcl.api.errors import TclError

ENTRY_POINT_GROUP = "tcl.plugins"
BUILTIN_DISTRIBUTION = "tcl"
DISABLE_EXTERNAL_ENV = "TCL_DISABLE_EXTERNAL_PLUGINS"

# extension point -> (registration hook name, record class)
EXTENSION_POINTS: dict[str, tuple[str, type]] = {
    "samplers": ("tcl_register_samplers", registrations.SamplerRegistration),
    "cost_models": ("tcl_register_cost_models", registrations.CostModelRegistration),
    "transfer_strategies": ("tcl_register_transfer_strategies", registrations.TransferRegistration),
    "hardware_backends": ("tcl_register_hardware_backends", registrations.BackendRegistration),
    "featurizers": ("tcl_register_featurizers", registrations.FeaturizerRegistration),
    "networks": ("tcl_register_networks", registrations.NetworkRegistration),
}


@attrs.frozen
class Provided:
    """A registration plus who provided it."""

    record: registrations.Registration
    plugin: str  # entry point name
    distribution: str

    @property
    def provider(self) -> str:
        return f"{self.distribution} ({self.plugin})"


@attrs.frozen
class FailedPlugin:
    plugin: str
    distribution: str
    error: str


@attrs.define
class Registry:
    """Everything the installed plugins registered, by extension point and name."""

    manager: pluggy.PluginManager
    entries: dict[str, dict[str, Provided]]
    failed: list[FailedPlugin]
    unknown_hooks: list[FailedPlugin] = attrs.Factory(list)  # hooks no spec defines (misspelt?)

    def get(self, point: str, name: str) -> registrations.Registration:
        """The record named ``name``; an unknown name raises TclError listing the choices."""
        found = self.entries[point].get(name)
        if found is None:
            choices = ", ".join(sorted(self.entries[point])) or "none installed"
            failed = (
                f"; plugins that failed to load: {', '.join(f.plugin for f in self.failed)} (see tcl plugins)"
                if self.failed
                else ""
            )
            raise TclError(f"unknown {singular(point)} '{name}'; choices: {choices}{failed}")
        return found.record

    def names(self, point: str) -> list[str]:
        return sorted(self.entries[point])

    def create(self, point: str, name: str, **options: Any) -> Any:
        """Build the plugin object named ``name`` with ``options`` (a factory rejects an unknown
        option with TypeError and a bad value with ValueError: both become one TclError line).
        Of :data:`RUNTIME_HINTS`, a factory gets only those it declares."""
        record = self.get(point, name)
        options = declared_hints(record.factory, options)
        try:
            return record.factory(**options)
        except (TypeError, ValueError) as exc:
            raise TclError(f"{singular(point)} '{name}': bad options {sorted(options)}: {exc}") from None

    @property
    def hook(self) -> Any:
        """Event hooks: ``registry.hook.tcl_on_epoch_end(model=..., epoch=..., metrics=...)``."""
        return self.manager.hook


#: Keyword arguments the core passes to plugin factories (and to a cost model's ``load``) on
#: its own, not because a user asked: how many CPU threads, whether to print progress, where
#: to keep cached features, which device, the seed of a network's weights. A factory receives
#: those it declares (or all, with ``**kwargs``); user-given options are always passed, so a
#: misspelt one is still an error.
RUNTIME_HINTS = frozenset({"threads", "verbose", "cache_dir", "device", "seed"})


def _parameters(factory: Any) -> list[inspect.Parameter] | None:
    """The parameters of ``factory`` (a deferred one resolved), or None when it has no signature."""
    target = factory.resolve() if isinstance(factory, registrations.Deferred) else factory
    try:
        return list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None


def declared_hints(factory: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the runtime hints ``factory`` does not declare."""
    parameters = _parameters(factory)
    if parameters is None or any(p.kind is p.VAR_KEYWORD for p in parameters):  # pass everything
        return options
    declared = {p.name for p in parameters}
    return {k: v for k, v in options.items() if k in declared or k not in RUNTIME_HINTS}


def names_parameter(factory: Any, name: str) -> bool:
    """Whether ``factory`` names ``name`` among its parameters (``**kwargs`` does not count): for an
    option only some plugins understand, given only to those."""
    return any(p.name == name and p.kind is not p.VAR_KEYWORD for p in _parameters(factory) or ())


def singular(point: str) -> str:
    return {
        "samplers": "sampler",
        "cost_models": "cost model",
        "transfer_strategies": "transfer strategy",
        "hardware_backends": "hardware backend",
        "featurizers": "featurizer",
        "networks": "network",
    }[point]


def _entry_point_distributions() -> dict[tuple[str, str], str]:
    """(entry point name, value) -> distribution name. stevedore's cached entry points carry
    no distribution, so ask importlib.metadata, which does."""
    found = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found[(ep.name, ep.value)] = ep.dist.name if ep.dist is not None else "unknown"
    return found


def external_plugins_disabled() -> bool:
    return os.environ.get(DISABLE_EXTERNAL_ENV, "").strip().lower() not in ("", "0", "false", "no")


def load_registry() -> Registry:
    """Discover plugins and collect their registrations (fresh each call)."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    failed: list[FailedPlugin] = []
    distributions: dict[str, str] = {}
    skip_external = external_plugins_disabled()
    dist_of = _entry_point_distributions()

    def distribution_of(entry_point: Any) -> str:
        return dist_of.get((entry_point.name, entry_point.value), "unknown")

    def on_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
        if skip_external and distribution_of(entry_point) != BUILTIN_DISTRIBUTION:
            return
        failed.append(FailedPlugin(entry_point.name, distribution_of(entry_point), f"{type(exc).__name__}: {exc}"))

    # stevedore keeps a process-wide list of each group's entry points; drop it so that
    # plugins installed since the last call are seen ("fresh each call")
    ExtensionManager.ENTRY_POINT_CACHE.pop(ENTRY_POINT_GROUP, None)
    extensions = ExtensionManager(ENTRY_POINT_GROUP, invoke_on_load=False, on_load_failure_callback=on_failure)
    for ext in extensions:
        dist = distribution_of(ext.entry_point)
        if skip_external and dist != BUILTIN_DISTRIBUTION:
            continue
        try:
            manager.register(ext.plugin, name=ext.name)
        except Exception as exc:  # a bad hook signature, or a second plugin with this name
            failed.append(FailedPlugin(ext.name, dist, f"{type(exc).__name__}: {exc}"))
            continue
        distributions[ext.name] = dist

    unknown_hooks = [
        FailedPlugin(
            name,
            distributions.get(name, "unknown"),
            f"implements {caller.name}, which no tcl hook spec defines (misspelt?); it is never called",
        )
        for name, plugin in manager.list_name_plugin()
        if plugin is not None
        for caller in manager.get_hookcallers(plugin) or ()
        if not caller.has_spec()
    ]
    entries: dict[str, dict[str, Provided]] = {point: {} for point in EXTENSION_POINTS}
    for point, (hook_name, record_type) in EXTENSION_POINTS.items():
        for impl in getattr(manager.hook, hook_name).get_hookimpls():
            dist = distributions.get(impl.plugin_name, "unknown")
            try:
                records = list(impl.function() or ())
                for record in records:
                    if not isinstance(record, record_type):
                        raise TypeError(
                            f"{hook_name} returned {type(record).__name__}, expected {record_type.__name__}"
                        )
            except Exception as exc:
                failed.append(FailedPlugin(impl.plugin_name, dist, f"{hook_name}: {type(exc).__name__}: {exc}"))
                continue
            for record in records:
                previous = entries[point].get(record.name)
                here = Provided(record, impl.plugin_name, dist)
                if previous is not None:
                    raise TclError(
                        f"{singular(point)} '{record.name}' is registered twice: by {previous.provider} "
                        f"and by {here.provider}; uninstall one or set {DISABLE_EXTERNAL_ENV}=1"
                    )
                entries[point][record.name] = here
    return Registry(manager, entries, failed, unknown_hooks)


@functools.cache
def registry() -> Registry:
    """The process-wide registry, built on first use."""
    return load_registry()


def create(point: str, name: str, **options: Any) -> Any:
    return registry().create(point, name, **options)


def crash_origin(exc: BaseException) -> str:
    """Where an unexpected exception came from, for a one-line report: the innermost frame
    of a third-party plugin distribution's code when one is on the stack (so its bug is
    blamed on its package, not on tcl), else the innermost frame."""
    frames = [
        (frame.f_globals.get("__name__", ""), frame.f_code.co_filename, line)
        for frame, line in traceback.walk_tb(exc.__traceback__)
    ]
    if not frames:
        return "unknown location"
    owners = importlib.metadata.packages_distributions()
    plugin_dists = set(_entry_point_distributions().values()) - {BUILTIN_DISTRIBUTION}
    for module, filename, line in reversed(frames):
        dists = [d for d in owners.get(module.partition(".")[0], ()) if d in plugin_dists]
        if dists:
            return f"{filename}:{line}, in plugin package {dists[0]}"
    _, filename, line = frames[-1]
    return f"{filename}:{line}"
