"""Generating a task's candidate pool from MetaSchedule's design space, and the TVM helpers
that needs (tensor intrinsics per target, tune contexts). Saving and loading pools is
:mod:`tcl.records.pools`; this is the part that runs MetaSchedule's search.

Generation (:func:`generate_pool`) follows MetaSchedule's own search:

1. ``TuneContext`` with the target's default space generator (``PostOrderApply``: schedule
   rules, postprocessors and mutators "from-target") gives the design spaces.
2. *Random sampling*, as ``ReplayTrace`` does: a design-space trace (simplified, postprocessing
   removed) with its decisions dropped is replayed on a fresh schedule with a seeded random
   state, so every sampling instruction draws anew; then ``EnterPostproc`` and the target's
   postprocessors run. A candidate a postprocessor rejects (or whose replay raises) is
   skipped, exactly as MetaSchedule's search skips it.
3. When random sampling stops giving new candidates (``patience`` duplicates in a row) or
   has given ``max_random``, *mutation* takes over, as ``EvolutionarySearch`` does: a
   mutator drawn by the target's default probabilities (tile size, compute location, unroll,
   parallel) changes one decision of a parent, and the mutated trace is replayed and
   postprocessed the same way. Without a cost model the parent is any pool member (origin
   ``"mutation"``). With one (``model``), this is *evolutionary search* guided by the model as
   MetaSchedule's is (origin ``"evolutionary"``): each generation draws parents from the
   ``population`` best-predicted candidates so far, mutates twice as many children as it
   keeps, and keeps the better-predicted half; so these candidates gather where a tuner
   guided by that model would look, while the random ones cover the space.
4. Candidates are deduplicated by :func:`program_key` of their full trace with decisions
   (the JSON TVM stores in a tuning record), and come back in the order found; each one's
   origin (``"random"``, ``"mutation"`` or ``"evolutionary"``) is in ``PoolStats.origins``
   and is saved with the pool.

Everything is seeded from ``seed`` (schedule random states and mutator random states are
drawn from one ``random.Random(seed)``), so a seed gives the same pool on every run.

Cost (2-core VM, after ~5 s of ``import tvm`` and x86 intrinsics): 200 candidates of a
512x512x512 matmul in 1.5 s, of a 1x64x56x56 3x3 conv2d+ReLU in 3.3 s (llvm, core-avx2);
200 of a 512^3 matmul for CUDA sm_90 in 37 s including the CUDA intrinsics import, with 93%
of the attempts rejected by the GPU postprocessors (VerifyGPUCode and friends).

Trap (measured on the 2-core VM): ``TuneContext`` imports ``tvm.s_tir.tensor_intrin``, whose
CUDA part parses hundreds of TVMScript intrinsics: 11 s idle, 50-100 s on a busy machine.
:func:`ensure_tensor_intrinsics` registers only the intrinsics the target can use (x86 ones
for an x86 LLVM target, ~1 s) and marks the package as imported; call it (generate_pool
does) before creating a ``TuneContext``. ``TCL_FULL_TENSOR_INTRIN=1`` turns this off.
"""

from __future__ import annotations

import logging
import math
import os
import random
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable, Sequence

import attrs

from tcl.api.errors import TclError
from tcl.api.programs import Program
from tcl.measurement.interrupts import deferred_interrupt
from tcl.measurement.tasks import as_target
from tcl.records.pools import as_ir_module, make_task
from tcl.records.program_keys import program_key
from tcl.records.trace_json import plain_json, trace_to_json

log = logging.getLogger(__name__)


def _intrin_modules(target: Any) -> list[str] | None:
    """Submodules of ``tvm.s_tir.tensor_intrin`` a target can use; None = all of them."""
    kind = target.kind.name
    if kind == "llvm":
        text = " ".join(str(target.attrs.get(k, "")) for k in ("mtriple", "mcpu", "mattr")).lower()
        if any(t in text for t in ("aarch64", "arm", "neon", "sve", "cortex", "apple")):
            return ["arm_cpu"]
        if "riscv" in text:
            return ["riscv_cpu"]
        return ["x86"]
    if kind == "cuda":
        return ["cuda"]
    if kind == "rocm":
        return ["rocm"]
    if kind == "hexagon":
        return ["hexagon"]
    if kind == "c":
        return []
    return None


def ensure_tensor_intrinsics(target: Any) -> None:
    """Register the tensor intrinsics ``target`` can use, without importing all of them.

    Leaves ``tvm.s_tir.tensor_intrin`` as a package stub in ``sys.modules`` so that the
    unconditional ``import tvm.s_tir.tensor_intrin`` inside ``TuneContext`` is free; later
    calls for other targets import their submodules into the same stub.
    """
    import importlib

    import tvm.s_tir

    name = "tvm.s_tir.tensor_intrin"
    target = as_target(target)
    wanted = _intrin_modules(target)
    current = sys.modules.get(name)
    if current is not None and not getattr(current, "__tcl_stub__", False):
        return  # the real package is imported: everything is registered
    if current is None and os.environ.get("TCL_FULL_TENSOR_INTRIN"):
        importlib.import_module(name)
        return
    if os.environ.get("TCL_FULL_TENSOR_INTRIN"):
        wanted = None
    if current is None:
        path = [str(Path(tvm.s_tir.__file__).parent / "tensor_intrin")]
        current = types.ModuleType(name, "tvm.s_tir.tensor_intrin, loaded per target by tcl.records.pools")
        current.__path__ = path  # type: ignore[attr-defined]
        current.__package__ = name
        current.__tcl_stub__ = True  # type: ignore[attr-defined]
        sys.modules[name] = current
        tvm.s_tir.tensor_intrin = current  # type: ignore[attr-defined]
    if wanted is None:
        wanted = ["cuda", "arm_cpu", "x86", "rocm", "hexagon", "riscv_cpu"]
    for sub in wanted:
        importlib.import_module(f"{name}.{sub}")


def tune_context(mod: Any, target: Any, *, seed: int = 0, task_name: str = "main", num_threads: int | str = 1) -> Any:
    """A ``TuneContext`` with the target's default space generator, rules, postprocs, mutators."""
    import tvm.s_tir.meta_schedule as ms

    target = as_target(target)
    ensure_tensor_intrinsics(target)
    return ms.TuneContext(
        mod=as_ir_module(mod),
        target=target,
        space_generator=ms.space_generator.PostOrderApply(),
        task_name=task_name,
        rand_state=_rand_state(seed),
        num_threads=num_threads,
    )


def _rand_state(seed: int) -> int:
    return int(seed) % (2**31 - 2) + 1  # TVM wants a positive state; -1 means "random"


# ---- generation --------------------------------------------------------------------------


@attrs.define
class PoolStats:
    """What a :func:`generate_pool` call did (returned by :func:`generate_pool_with_stats`)."""

    found_random: int = 0
    found_mutation: int = 0
    found_evolutionary: int = 0
    duplicates: int = 0
    rejected: int = 0  # postprocessor refused or replay raised
    attempts: int = 0
    seconds: float = 0.0
    exhausted: bool = False  # fewer than asked: no more new candidates within the attempt limits
    origins: list[str] = attrs.field(factory=list)  # per candidate returned: one of ORIGINS


def generate_pool(
    mod: Any,
    target: Any,
    size: int,
    seed: int = 0,
    *,
    patience: int | None = None,
    max_attempts: int | None = None,
    max_random: int | None = None,
    model: Any = None,
    population: int = 32,
) -> list[Any]:
    """Up to ``size`` distinct candidate schedules (``tvm.s_tir.Schedule``) of ``mod``.

    See the module doc for the method. ``patience`` (default ``max(64, size // 2)``) is how
    many duplicates in a row (candidates rejected by a postprocessor do not count: on GPUs
    most are) end random sampling, and then mutation; ``max_attempts`` (default ``50 * size + 1000``)
    bounds the total; ``max_random`` caps how many come from random sampling (the rest by
    mutation; default no cap). ``model`` (a :class:`tcl.api.interfaces.CostModel`) turns the
    mutation phase into evolutionary search guided by its predictions, ``population`` being
    how many best-predicted candidates parents are drawn from. Fewer than ``size`` come back
    only when the space is exhausted. Deterministic for a given ``seed`` (and model).
    """
    return generate_pool_with_stats(
        mod,
        target,
        size,
        seed,
        patience=patience,
        max_attempts=max_attempts,
        max_random=max_random,
        model=model,
        population=population,
    )[0]


def generate_pool_with_stats(
    mod: Any,
    target: Any,
    size: int,
    seed: int = 0,
    *,
    patience: int | None = None,
    max_attempts: int | None = None,
    max_random: int | None = None,
    model: Any = None,
    population: int = 32,
) -> tuple[list[Any], PoolStats]:
    """:func:`generate_pool` and what it took; Ctrl-C stops it between two candidates."""
    import tvm
    from tvm.s_tir.meta_schedule import _ffi_api as ms_ffi
    from tvm.s_tir.schedule import Trace

    if size < 0:
        raise TclError(f"pool size must be >= 0, got {size}")
    if population < 1:
        raise TclError(f"population must be >= 1, got {population}")
    with deferred_interrupt() as interrupted:  # offer() checks it
        start = time.perf_counter()
        stats = PoolStats()
        rng = random.Random(seed)
        ctx = tune_context(mod, target, seed=seed)
        space_gen = ctx.space_generator
        mod = ctx.mod
        postprocs = list(space_gen.postprocs)
        # a TVM Map iterates in pointer-hash order: sort so the roulette is the same in every process
        mutators = sorted(
            ((m, float(plain_json(p))) for m, p in dict(space_gen.mutator_probs).items()),
            key=lambda mp: type(mp[0]).__name__,
        )
        spaces = [Trace(s.trace.simplified(remove_postproc=True).insts, {}) for s in ctx.generate_design_space()]
        if not spaces:
            raise TclError("MetaSchedule generated no design space for this workload")
        patience = max(64, size // 2) if patience is None else patience
        max_attempts = 50 * size + 1000 if max_attempts is None else max_attempts

        found: list[Any] = []
        seen: set[str] = set()

        def replay(trace: Any) -> Any | None:
            sch = tvm.s_tir.Schedule(
                mod, seed=_rand_state(rng.randrange(2**31)), debug_mask=0, error_render_level="none"
            )
            try:
                trace.apply_to_schedule(sch, remove_postproc=True)
                sch.enter_postproc()
                for postproc in postprocs:
                    if not postproc.apply(sch):
                        return None
            except (RuntimeError, ValueError, TypeError, IndexError):  # TVM 0.27 raises builtin error types
                return None
            return sch

        def offer(sch: Any | None, origin: str, keep: bool = True) -> int:
            """1: new; 0: rejected (says nothing about exhaustion); -1: a duplicate."""
            if interrupted.is_set():
                raise KeyboardInterrupt
            stats.attempts += 1
            if sch is None:
                stats.rejected += 1
                return 0
            key = program_key(sch.trace)
            if key in seen:
                stats.duplicates += 1
                return -1
            seen.add(key)
            if keep:
                found.append(sch)
                stats.origins.append(origin)
            return 1

        def mutate(parent: Any) -> Any | None:
            x, mutator = rng.random() * total_p, mutators[-1][0]
            for m, p in mutators:
                if x < p:
                    mutator = m
                    break
                x -= p
            new_trace = ms_ffi.MutatorApply(mutator, parent.trace, _rand_state(rng.randrange(2**31)))
            return replay(new_trace) if new_trace is not None else None

        def draw(target: int, candidate: Callable[[], Any], origin: str) -> int:
            """Offer candidates until the pool has ``target``, ``patience`` misses in a row or
            the attempt cap; how many were new."""
            new = misses = 0
            while len(found) < target and misses < patience and stats.attempts < max_attempts:
                outcome = offer(candidate(), origin)
                if outcome > 0:
                    new, misses = new + 1, 0
                elif outcome < 0:
                    misses += 1
            return new

        # phase 1: random sampling from the design spaces
        random_size = size if max_random is None else min(size, max_random)
        stats.found_random += draw(random_size, lambda: replay(spaces[rng.randrange(len(spaces))]), "random")
        # phase 2: mutation of pool members, or evolutionary search guided by a model
        total_p = sum(p for _, p in mutators)
        if found and mutators and total_p > 0:
            if model is not None:
                scorer = schedule_scorer(model, mod)
                _evolve(found, stats, size, patience, max_attempts, population, rng, mutate, offer, scorer)
            else:
                stats.found_mutation += draw(size, lambda: mutate(found[rng.randrange(len(found))]), "mutation")
    if interrupted.is_set():  # Ctrl-C after the last candidate
        raise KeyboardInterrupt
    stats.exhausted = len(found) < size
    stats.seconds = time.perf_counter() - start
    if stats.exhausted:
        log.warning("pool: only %d of %d distinct candidates after %d attempts", len(found), size, stats.attempts)
    return found, stats


def schedule_scorer(model: Any, mod: Any) -> Any:
    """A function giving the scores of live schedules of ``mod`` by a :class:`tcl.api.interfaces.CostModel`
    (higher = predicted faster; non-finite scores as -inf), which evolutionary search ranks by."""
    import numpy as np

    task = make_task(mod)

    def predict(schedules: Sequence[Any]) -> list[float]:
        import torch

        programs = [Program(task_key=task.key, trace=trace_to_json(s), schedule=s) for s in schedules]
        with torch.no_grad():
            scores = np.asarray(model.predict(task, programs), dtype=np.float64).reshape(len(programs))
        return [float(x) if math.isfinite(x) else -math.inf for x in scores]

    return predict


def _evolve(
    found: list[Any],
    stats: PoolStats,
    size: int,
    patience: int,
    max_attempts: int,
    population: int,
    rng: random.Random,
    mutate: Any,
    offer: Any,
    predict: Any,
) -> None:
    """Evolutionary search (module doc, step 3): generations of mutated children of the
    best-predicted candidates, the better-predicted half of each generation kept."""
    scores = predict(found)
    misses = 0
    while len(found) < size and misses < patience and stats.attempts < max_attempts:
        elite = sorted(range(len(found)), key=lambda i: -scores[i])[:population]
        want = min(population, size - len(found))
        children: list[Any] = []
        tries = 0
        while len(children) < 2 * want and tries < 8 * want and stats.attempts < max_attempts:
            tries += 1
            child = mutate(found[elite[rng.randrange(len(elite))]])
            if offer(child, "evolutionary", keep=False) > 0:
                children.append(child)
        if not children:
            misses += tries
            continue
        child_scores = predict(children)
        best = sorted(range(len(children)), key=lambda i: -child_scores[i])[:want]
        for i in sorted(best):  # in the order they were found
            found.append(children[i])
            stats.origins.append("evolutionary")
            scores.append(child_scores[i])
        stats.found_evolutionary += len(best)
        misses = 0
