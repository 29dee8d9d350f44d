"""What each kind of plugin implements. Small on purpose: the pipeline only calls these.

Factories in registration records build these objects; options from a config file are
passed to the factory as keyword arguments.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import attrs
import numpy as np

from tcl.api.errors import TclError
from tcl.api.programs import MeasureResult, Program, ProgramSet, Task

if TYPE_CHECKING:  # imported for annotations only: tvm is slow to import
    from tcl.api.profiles import HardwareProfile


class Featurizer(abc.ABC):
    """Turns programs of one task into model inputs.

    ``version`` changes whenever the features change, so checkpoints trained on older
    features are refused instead of silently mispredicting.
    """

    name: str
    version: str
    #: Anything besides ``version`` that changes the features (e.g. a sequence length option):
    #: part of the feature-cache key, so features of other settings are never reused.
    cache_token: str = ""

    @abc.abstractmethod
    def featurize(self, task: Task, programs: Sequence[Program]) -> Any:
        """Features of ``programs`` (all of ``task``), in their order."""


class CostModel(abc.ABC):
    """Scores programs so that a faster program scores higher (scores rank within a task)."""

    name: str
    featurizer: Featurizer

    @abc.abstractmethod
    def fit(self, train: ProgramSet, valid: ProgramSet | None = None, *, seed: int = 0) -> Mapping[str, float]:
        """Train on measured programs; return final metrics (e.g. best validation Top-1)."""

    @abc.abstractmethod
    def predict(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """One float score per program."""

    @abc.abstractmethod
    def embed(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """A (len(programs), d) representation, used by samplers to judge similarity."""

    def uncertainty(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """One non-negative spread per program; models without one raise NotImplementedError."""
        raise NotImplementedError(f"cost model {self.name} gives no uncertainty")

    # Optional capabilities the core uses; the defaults describe a model without them.

    def platforms(self) -> list[str]:
        """Platforms (profile names) this model was trained for; empty when unknown."""
        return []

    def for_platform(self, profile: str) -> "CostModel":
        """This model as it scores ``profile`` (a multi-platform model's own head for it)."""
        return self

    def parameter_count(self) -> int | None:
        """Number of learned parameters, reported beside transfer results; None when not counted."""
        return None

    @abc.abstractmethod
    def save(self, path: Path) -> None:
        """Write the model to directory ``path`` (config JSON + weights), atomically."""

    @classmethod
    @abc.abstractmethod
    def load(cls, path: Path) -> "CostModel":
        """Read a model written by :meth:`save`; mismatches raise :class:`tcl.api.errors.TclError`."""


class OnlineUpdatable(abc.ABC):
    """A cost model that can learn during tuning (``tcl tune --online``): implement this beside
    :class:`CostModel` and the MetaSchedule bridge fine-tunes it on each task's newest
    measurements."""

    @abc.abstractmethod
    def update_online(self, records: ProgramSet, *, epochs: int, seed: int) -> None:
        """Train ``epochs`` more epochs on ``records`` (one task's latest measured programs),
        otherwise with the model's own training settings, printing nothing."""


class Sampler(abc.ABC):
    """Chooses which candidates of a task's pool to measure."""

    name: str

    @abc.abstractmethod
    def select(
        self,
        task: Task,
        pool: Sequence[Program],
        budget: int,
        *,
        measured: Sequence[int] = (),
        model: CostModel | None = None,
        seed: int = 0,
    ) -> list[int]:
        """Return up to ``budget`` distinct indices into ``pool``, none of them in ``measured``."""


def checked_selection(
    name: str, chosen: Any, *, pool_size: int, budget: int, measured: Sequence[int] = ()
) -> list[int]:
    """A sampler's answer as a list of indices, or a one-line error naming sampler ``name`` when
    it breaks :meth:`Sampler.select`'s contract (a wrong type, an index out of range, measured
    already or repeated, more than the budget): such a sample must never be used silently."""

    def fail(problem: str) -> TclError:
        return TclError(f"sampler '{name}' broke its contract: {problem}")

    try:
        indices = list(chosen)
    except TypeError:
        raise fail(f"returned {type(chosen).__name__}, expected a list of indices") from None
    for i in indices:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise fail(f"returned {i!r} ({type(i).__name__}), expected integer indices")
    bad = [int(i) for i in indices if not 0 <= i < pool_size]
    if bad:
        raise fail(f"index {bad[0]} is outside the pool of {pool_size}")
    if len(set(indices)) != len(indices):
        raise fail("returned an index more than once")
    again = sorted(set(map(int, indices)) & set(map(int, measured)))
    if again:
        raise fail(f"index {again[0]} was measured already")
    if len(indices) > budget:
        raise fail(f"returned {len(indices)} indices for a budget of {budget}")
    return [int(i) for i in indices]


class TransferStrategy(abc.ABC):
    """Carries a cost model from earlier platforms to a new one."""

    name: str

    @abc.abstractmethod
    def transfer(
        self,
        teacher: CostModel | None,
        target: ProgramSet,
        *,
        valid: ProgramSet | None = None,
        unlabelled: ProgramSet | None = None,
        history: Mapping[str, ProgramSet] | None = None,
        seed: int = 0,
    ) -> CostModel:
        """Return a model for ``target``'s platform. ``history`` holds earlier platforms' data,
        for strategies that need it (multi-task learning); others ignore it."""

    def check(self, teacher: CostModel | None) -> None:  # noqa: B027 - optional: the default accepts any teacher
        """Refuse a teacher this strategy cannot start from (a TclError), before any work."""


class HardwareBackend(abc.ABC):
    """Builds and times candidate programs on the hardware a profile describes.

    It is created before any work, so its constructor is where a profile the hardware cannot
    run is refused (a TclError); workers and connections start at first use."""

    name: str
    #: Whether programs run on this machine, so that other processes here can slow them
    #: (collection then watches this machine's load; an RPC backend times elsewhere).
    times_on_this_host: bool = True

    def __init__(self, profile: "HardwareProfile") -> None:
        self.profile = profile

    def target(self) -> Any:
        """The ``tvm.target.Target`` programs are compiled for."""
        return self.profile.tvm_target()

    @abc.abstractmethod
    def builder(self) -> Any:
        """A MetaSchedule ``Builder`` (also used by MetaSchedule's own tuning)."""

    @abc.abstractmethod
    def runner(self) -> Any:
        """A MetaSchedule ``Runner``."""

    def measure(self, mod: Any, schedules: Sequence[Any]) -> list[MeasureResult]:
        """Build and run ``schedules`` of workload ``mod``; failures become error results.
        The builder and runner are asked for once and kept (with their worker processes)
        until :meth:`close`."""
        from tcl.api.measure import measure_with  # imports tvm: only a measuring backend pays for it

        kept = self.__dict__.get("_measure_tools")
        if kept is None:
            kept = self.__dict__["_measure_tools"] = (self.builder(), self.runner())
        return measure_with(kept[0], kept[1], self.target(), mod, schedules)

    def close(self) -> None:
        """Release workers, sessions or connections: by default the builder's and runner's
        that :meth:`measure` kept."""
        for tool in self.__dict__.pop("_measure_tools", ()):
            if callable(getattr(tool, "close", None)):
                tool.close()
            elif getattr(tool, "pool", None) is not None:
                tool.pool.shutdown()


@attrs.frozen(kw_only=True)
class NetworkDefinition:
    """What a network factory returns: a torch module in eval mode and example inputs.

    ``layout`` is the conv2d data layout the compiled network uses: ``"NCHW"`` as torch
    writes it, or ``"NHWC"`` (weights HWIO) as TensorFlow and TFLite models arrive in TVM.
    """

    module: Any
    example_inputs: tuple[Any, ...]
    layout: str = attrs.field(default="NCHW", validator=attrs.validators.in_(("NCHW", "NHWC")))
