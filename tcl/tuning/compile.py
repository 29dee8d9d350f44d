"""Compiling a tuned network: each task's schedule chosen from the tuning records (or a default
schedule), the network built with Relax, its output checked against torch and both timed.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tcl.api.errors import TclError, one_line
from tcl.api.measure import measure_with, set_tvm_threads
from tcl.learning.training import torch_threads
from tcl.measurement.default_schedule import apply_defaults
from tcl.records.tvm_log import quiet_tvm_warnings
from tcl.tuning.build import compile_prepared, prepared_network
from tcl.tuning.contexts import tune_contexts
from tcl.tuning.curve import finite_or_none
from tcl.tuning.race import race_records
from tcl.tuning.timing import in_turns, median_call_s, network_seconds

CHOICE_POPULATION = 64
#: Alternating blocks in which the compiled network and torch eager are timed.
TIMING_BLOCKS = 5


def _leaves(obj: Any) -> list[np.ndarray]:
    """Output tensors of torch or of the Relax VM, flattened in order."""
    if isinstance(obj, (list, tuple)) or type(obj).__name__ == "Array":
        return [leaf for item in obj for leaf in _leaves(item)]
    return [obj.detach().numpy() if hasattr(obj, "detach") else obj.numpy()]


def choose_schedules(
    tasks: Sequence[Any], target: Any, cost_model: Any, *, seed: int = 0, population: int = 512
) -> dict[str, Any]:
    """``{task name: scheduled PrimFunc}``: for each task, the candidate MetaSchedule's
    evolutionary search ranks first by ``cost_model``'s predictions alone, none of them built
    or measured. The population is capped at :data:`CHOICE_POPULATION`: on a busy 2-core
    machine a 128-candidate search with the mlp checkpoint took 18 s per resnet-18 task."""
    import tvm.s_tir.meta_schedule as ms

    chosen = {}
    population = min(population, CHOICE_POPULATION)
    for task, ctx in zip(tasks, tune_contexts(tasks, target, seed, population, eps_greedy=0.0)):
        try:
            ctx.pre_tuning(
                max_trials=1,
                num_trials_per_iter=1,
                design_spaces=ctx.generate_design_space(),
                database=ms.database.MemoryDatabase(),
                cost_model=cost_model,
            )
            candidates = ctx.generate_measure_candidates()
            ctx.post_tuning()
        except (RuntimeError, ValueError):  # TVM found no valid candidate for this task: it gets a default schedule
            candidates = None
        if candidates:
            chosen[task.name] = candidates[0].sch.mod["main"]
    return chosen


def pick_fastest(
    tasks: Sequence[Any], best: Sequence[float], chosen: Mapping[str, Any], target: Any, backend: Any
) -> tuple[dict[str, str], dict[str, dict[str, float | None]]]:
    """Per task, whichever runs fastest of its best tuned record (``best``, seconds), its
    default schedule and the model's unmeasured pick (``chosen``), the latter two built and
    timed once here: ``({task name: "tuned" | "default" | "model"}, {task name: seconds of each})``.
    A few random samples of a large design space (what a small budget measures, or an
    untrained XGB picks) can be slower than the default schedule."""
    import tvm

    builder, runner = backend.builder(), backend.runner()
    picks, seconds = {}, {}
    for task, tuned in zip(tasks, best):
        candidates = {"default": apply_defaults(tvm.IRModule({"main": task.mod["main"]}), target)[0]}
        if task.name in chosen:
            candidates["model"] = tvm.IRModule({"main": chosen[task.name]})
        options = {"tuned": tuned}
        for label, result in zip(
            candidates, measure_with(builder, runner, target, task.mod, list(candidates.values()))
        ):
            options[label] = min(result.run_secs) if result.ok else math.inf
        fastest = min(options, key=options.get)
        picks[task.name] = (
            fastest if math.isfinite(options[fastest]) else ("model" if task.name in chosen else "default")
        )
        seconds[task.name] = {label: finite_or_none(value) for label, value in options.items()}
    return picks, seconds


def compile_and_check(
    definition: Any,
    target: Any,
    db_dir: Path,
    threads: int,
    *,
    repeats: int = 20,
    chosen: Mapping[str, Any] | None = None,
    use_default: set[str] | frozenset[str] = frozenset(),
    export: Path | None = None,
    race: int = 1,
) -> dict[str, Any]:
    """Compile the network with the best records of ``db_dir`` (and the schedules in ``chosen``,
    by function name, for functions without a record; default schedules for the functions
    named in ``use_default`` even where a record exists), check it against torch on the
    example inputs (raises TclError when they differ) and time both side by side (about
    ``repeats`` runs each, see :func:`_time_side_by_side`; TVM with the profile's threads, torch
    with whichever of those and one thread is faster).
    With ``race`` > 1, each task's ``race`` best records are raced inside the network
    (:mod:`tcl.tuning.race`) before the final build.
    With ``export``, the compiled library is written there once its output has matched torch."""
    import torch
    import tvm
    import tvm.s_tir.meta_schedule as ms
    from tvm import relax

    start = time.perf_counter()
    mod = prepared_network(definition, target)
    database = ms.database.JSONDatabase(work_dir=str(db_dir))
    chosen = chosen or {}
    with quiet_tvm_warnings():
        executable, functions = compile_prepared(mod, target, database, chosen, use_default)
    compile_s = time.perf_counter() - start
    with torch.no_grad():
        want = _leaves(definition.module(*definition.example_inputs))
    dev = tvm.cpu()
    tvm_threads = set_tvm_threads(int(threads))
    vm = relax.VirtualMachine(executable, dev)
    inputs = [tvm.runtime.tensor(x.numpy(), dev) for x in definition.example_inputs]
    raced = built = None
    if race > 1:
        with quiet_tvm_warnings():
            _, raced, built = race_records(
                mod, target, database, inputs, race, chosen=chosen, use_default=use_default, compiled=vm
            )
        if built is not None:
            executable, functions = built
            vm = relax.VirtualMachine(executable, dev)
    got = _leaves(vm["main"](*inputs))
    if len(got) != len(want):
        raise TclError(f"compiled network returns {len(got)} outputs, torch {len(want)}")
    worst = 0.0
    for g, w in zip(got, want):
        scale = max(1.0, float(np.abs(w).max()) if w.size else 1.0)
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-4 * scale):
            err = float(np.abs(g - w).max()) if g.shape == w.shape else math.inf
            raise TclError(
                f"the tuned network's output differs from torch (shape {g.shape} vs {w.shape}, "
                f"max abs error {err:.3g}, largest |torch| {scale:.3g})"
            )
        worst = max(worst, float(np.abs(g - w).max()) / scale if w.size else 0.0)
    if export is not None:
        with quiet_tvm_warnings():
            export_library(executable, export)
    latency, torch_times = _time_side_by_side(vm, dev, inputs, definition, threads, repeats)
    torch_threads_best = min(torch_times, key=torch_times.get)
    return {
        "latency_s": latency,
        "torch_latency_s": torch_times[torch_threads_best],
        "tvm_threads": tvm_threads,
        "torch_threads": torch_threads_best,
        "torch_latency_by_threads_s": torch_times,
        "compile_s": compile_s,
        "race": raced,
        "tuned_functions": functions["tuned"],
        "model_chosen_functions": functions["model"],
        "default_functions": functions["default"],
        "unscheduled_functions": functions["unscheduled"],
        "exported": None if export is None else str(export),
        "max_rel_error": worst,
        "output_check": "allclose(rtol=1e-3, atol=1e-4*max|torch|)",
    }


def export_library(executable: Any, path: Path) -> None:
    """The compiled network as a shared library that TVM's runtime loads (``tvm.runtime.load_module``
    then ``relax.VirtualMachine``), written whole or not at all."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    executable.export_library(str(tmp))
    tmp.replace(path)


def check_export_path(path: Path) -> Path:
    """Refuse, before any work, a library path TVM could not write: it needs a ``.so`` name in an existing folder."""
    path = Path(path)
    if path.suffix != ".so":
        raise TclError(f"--export {path}: the library's name must end in .so")
    if not path.parent.is_dir():
        raise TclError(f"--export {path}: no such folder {path.parent}")
    return path


def time_torch_compiled(definition: Any, threads: int, repeats: int = 20) -> dict[str, Any]:
    """The network under ``torch.compile`` (inductor), timed on its own (``repeats`` timings with
    the profile's threads and with one, the faster kept): the peer a torch user would deploy.
    A failure to compile (no C++ compiler, an unsupported operator) is reported in the result,
    not raised: it comes after the tuning, which must not be lost to it."""
    import torch

    start = time.perf_counter()
    try:
        compiled = torch.compile(definition.module)
        with torch.no_grad():
            compiled(*definition.example_inputs)  # the first call compiles
            compile_s = time.perf_counter() - start
            times = _time_torch_threads(compiled, definition.example_inputs, threads, repeats)
    except Exception as exc:  # torch._dynamo and inductor raise many kinds; the message says which
        return {"torch_compile_error": f"{type(exc).__name__}: {one_line(exc)}"[:300]}
    best = min(times, key=times.get)
    return {"torch_compile_latency_s": times[best], "torch_compile_threads": best, "torch_compile_s": compile_s}


def _time_side_by_side(
    vm: Any, device: Any, inputs: list[Any], definition: Any, threads: int, repeats: int
) -> tuple[float, dict[int, float]]:
    """The compiled network's and torch eager's seconds per call (torch with the profile's
    threads and with one), timed in turns (:func:`~tcl.tuning.timing.in_turns`) in
    :data:`TIMING_BLOCKS` blocks of about ``repeats / TIMING_BLOCKS`` repeats each: timing one
    after the other can put them in different phases of the machine."""
    per_block = max(3, -(-repeats // TIMING_BLOCKS))

    sides: dict[Any, Callable[[], float]] = {
        n: functools.partial(_torch_call_s, definition.module, definition.example_inputs, n, per_block)
        for n in sorted({1, int(threads)})
    }
    sides["tvm"] = lambda: network_seconds(vm, device, inputs, per_block)
    # the pause lets torch's OpenMP workers go to sleep before TVM runs (and TVM's after it)
    times = in_turns(sides, TIMING_BLOCKS, pause_s=0.2)
    return times.pop("tvm"), times


def _time_torch_threads(module: Any, inputs: Sequence[Any], threads: int, repeats: int) -> dict[int, float]:
    """Seconds per call of a torch module with the profile's threads and with one: torch at its
    best here (on a busy machine OpenMP barriers make two threads many times slower than one)."""
    return {n: _torch_call_s(module, inputs, n, repeats) for n in sorted({1, int(threads)})}


def _torch_call_s(module: Any, inputs: Sequence[Any], threads: int, repeats: int) -> float:
    """Median seconds per call of a torch module with ``threads`` threads, without autograd."""
    import torch

    with torch.no_grad(), torch_threads(threads):
        return median_call_s(module, inputs, repeats)
