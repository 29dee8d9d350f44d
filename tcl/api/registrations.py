"""Named records that registration hooks return, one class per extension point.

A record carries what is needed to list a plugin (name, description) and to build it
(factory), plus what it needs from the rest of the pipeline.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs


class Deferred:
    """A factory named by module and attribute, imported on first use, so that listing a
    plugin's registrations does not import what only building it needs (torch takes seconds).
    Calls and attribute look-ups (e.g. a class's ``load``) go to the real object."""

    def __init__(self, module: str, attribute: str) -> None:
        self.module, self.attribute = module, attribute

    def resolve(self) -> Any:
        return getattr(importlib.import_module(self.module), self.attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"Deferred({self.module}:{self.attribute})"


def _nonempty(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty string")


@attrs.frozen(kw_only=True)
class Registration:
    """Common fields: ``factory(**options)`` builds the plugin object."""

    name: str = attrs.field(validator=_nonempty)
    factory: Callable[..., Any]
    description: str = attrs.field(validator=_nonempty)

    def requirements(self) -> dict[str, str]:
        """What this plugin needs from the pipeline, for listings."""
        return {}


@attrs.frozen(kw_only=True)
class SamplerRegistration(Registration):
    """A sampler; ``needs_model`` says whether it uses a cost model (e.g. for uncertainty)."""

    needs_model: bool = False

    def requirements(self) -> dict[str, str]:
        return {"model": "yes"} if self.needs_model else {}


@attrs.frozen(kw_only=True)
class CostModelRegistration(Registration):
    """A cost model and the featurizer whose output it consumes; ``pretrained`` maps profile
    names to checkpoint directories the plugin ships (``tcl tune --cost-model NAME``, the
    default teacher of ``tcl adapt`` and ``tcl quickstart``)."""

    featurizer: str = attrs.field(validator=_nonempty)
    pretrained: Mapping[str, Path] = attrs.field(factory=dict)

    def requirements(self) -> dict[str, str]:
        return {"featurizer": self.featurizer}


@attrs.frozen(kw_only=True)
class TransferRegistration(Registration):
    """A transfer strategy; ``needs_teacher`` is False for strategies that start from scratch,
    ``needs_all_platforms`` is True for those needing the same programs labelled everywhere."""

    needs_teacher: bool = True
    needs_all_platforms: bool = False

    def requirements(self) -> dict[str, str]:
        req = {"teacher": "yes" if self.needs_teacher else "no"}
        if self.needs_all_platforms:
            req["data"] = "same programs on every platform"
        return req


@attrs.frozen(kw_only=True)
class BackendRegistration(Registration):
    """A hardware backend; ``device`` names what it measures on (cpu, cuda, rpc...)."""

    device: str = "cpu"

    def requirements(self) -> dict[str, str]:
        return {"device": self.device}


@attrs.frozen(kw_only=True)
class FeaturizerRegistration(Registration):
    """A featurizer; ``version`` is stored in checkpoints so stale features are refused."""

    version: str = attrs.field(validator=_nonempty)

    def requirements(self) -> dict[str, str]:
        return {"version": self.version}


@attrs.frozen(kw_only=True)
class NetworkRegistration(Registration):
    """A network: ``factory()`` returns a :class:`tcl.api.interfaces.NetworkDefinition`;
    ``pool`` is a candidate-pool directory the plugin ships with this network's tasks (what
    ``tcl quickstart`` and ``tcl adapt`` measure when given no ``--pool``)."""

    family: str = "other"
    pool: Path | None = None

    def requirements(self) -> dict[str, str]:
        return {"family": self.family, **({"pool": "shipped"} if self.pool is not None else {})}
