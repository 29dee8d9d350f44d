"""The ``continual-kd`` strategy (TCL's): the student learns the new platform's sample while
listwise distillation from the frozen teacher holds what it knew.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from tcl.api.errors import TclError
from tcl.learning.training import Group, predict_groups
from tcl_plugins.transfer.base import BuiltinStrategy, listwise_kl

DISTILL_ON = ("labelled", "pool")


class ContinualKD(BuiltinStrategy):
    """Options: ``lam`` (weight of the distillation term), ``tau`` (temperature),
    ``distill_on`` (``labelled`` or ``pool``). Defaults measured on the bundled records
    (docs/transfer.md)."""

    name = "continual-kd"

    def __init__(self, *, lam: float = 2.0, tau: float = 4.0, distill_on: str = "labelled", **options: Any):
        super().__init__(**options)
        if distill_on not in DISTILL_ON:
            raise TclError(f"distill_on must be one of {', '.join(DISTILL_ON)}, got {distill_on!r}")
        if not (float(lam) >= 0 and float(tau) > 0):
            raise TclError(f"continual-kd needs lam >= 0 and tau > 0, got lam {lam}, tau {tau}")
        self.lam, self.tau, self.distill_on = float(lam), float(tau), distill_on

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        student = self._student(teacher)
        frozen = teacher.clone().module.to(student.device).eval()
        for p in frozen.parameters():
            p.requires_grad_(False)
        pool = {}
        if self.distill_on == "pool" and unlabelled is not None:
            pool = {k: f for k, f in student.featurize_set(unlabelled).items() if len(unlabelled.programs[k]) >= 2}
        rng = np.random.default_rng(seed)

        def teacher_scores(features: Any, n: int) -> torch.Tensor:
            return torch.from_numpy(predict_groups(frozen, student.collate, features, n, student.device)).float()

        def make_loss(groups: Sequence[Group]):
            labelled = [teacher_scores(g.features, len(g)) for g in groups]
            pool_keys = sorted(pool)
            pool_scores = {k: teacher_scores(pool[k], len(unlabelled.programs[k])) for k in pool_keys}

            def loss(module: nn.Module, scores: torch.Tensor, batch) -> torch.Tensor:
                t = [labelled[gi][torch.from_numpy(idx)] for gi, idx in batch]
                gid = [torch.full((idx.size,), j, dtype=torch.int64) for j, (_gi, idx) in enumerate(batch)]
                s = [scores]
                if pool_keys:
                    parts = []
                    for _gi, idx in batch:
                        key = pool_keys[int(rng.integers(len(pool_keys)))]
                        n = len(unlabelled.programs[key])
                        parts.append((key, np.sort(rng.choice(n, size=min(n, idx.size), replace=False))))
                    s.append(module(student.collate([(pool[k], idx) for k, idx in parts], student.device)))
                    t += [pool_scores[k][torch.from_numpy(idx)] for k, idx in parts]
                    gid += [
                        torch.full((idx.size,), len(batch) + j, dtype=torch.int64) for j, (_k, idx) in enumerate(parts)
                    ]
                device = scores.device
                return self.lam * listwise_kl(
                    torch.cat(s), torch.cat(t).to(device), torch.cat(gid).to(device), self.tau
                )

            return loss

        student.fit(target, valid, seed=seed, warm_start=True, extra_loss=make_loss)
        return self._finish(
            student,
            teacher,
            target,
            lam=self.lam,
            tau=self.tau,
            distill_on=self.distill_on,
            distilled_pool_tasks=len(pool),
        )
