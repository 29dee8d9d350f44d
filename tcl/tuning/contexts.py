"""MetaSchedule tune contexts of a network's tasks, as tuning creates them and as choosing
schedules after tuning recreates them."""

from __future__ import annotations

from typing import Any, Sequence

from tcl.measurement.candidates import ensure_tensor_intrinsics


def tune_contexts(tasks: Sequence[Any], target: Any, seed: int, population: int, eps_greedy: float = 0.05) -> list[Any]:
    import tvm.s_tir.meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import fork_seed

    ensure_tensor_intrinsics(target)

    def search() -> Any:
        return ms.search_strategy.EvolutionarySearch(
            population_size=population, eps_greedy=eps_greedy, init_min_unmeasured=min(50, population)
        )

    return [
        ms.TuneContext(
            mod=t.mod,
            target=target,
            space_generator="post-order-apply",
            search_strategy=search(),
            task_name=t.name,
            rand_state=rs,
            num_threads="physical",
        ).clone()
        for t, rs in zip(tasks, fork_seed(seed, n=len(tasks)))
    ]
