"""The ``continual-kd-pc`` strategy: an active column learns the new platform, then the knowledge
base distils it under an elastic (diagonal Fisher) penalty.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from tcl.api.errors import TclError
from tcl.api.programs import ProgramSet
from tcl.learning.training import Group, predict_groups
from tcl_plugins.transfer.base import BuiltinStrategy, listwise_kl


def diagonal_fisher(
    model: Any, records: ProgramSet, *, programs_per_task: int = 64, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Diagonal Fisher information of ``model``'s parameters, from its own predictions on
    ``records``' programs (their timings are not read): per task, a program drawn from the
    model's softmax over that task's programs, and the squared gradient of its log-probability,
    averaged over tasks. So it can be computed on a new platform's candidates without any
    earlier platform's records."""
    module = model.module
    was_training = module.training
    module.eval()
    features = model.featurize_set(records)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    params = {n: p for n, p in module.named_parameters() if p.requires_grad}
    sums = {n: torch.zeros_like(p) for n, p in params.items()}
    tasks = 0
    for key, feats in features.items():
        n = len(records.programs[key])
        if n < 2:
            continue
        idx = np.sort(rng.choice(n, size=min(n, programs_per_task), replace=False))
        module.zero_grad()
        log_p = torch.log_softmax(module(model.collate([(feats, idx)], model.device)).reshape(-1), dim=0)
        drawn = torch.multinomial(log_p.detach().exp().cpu(), 1, generator=generator).item()
        (-log_p[drawn]).backward()
        for name, p in params.items():
            if p.grad is not None:
                sums[name] += p.grad.detach() ** 2
        tasks += 1
    module.zero_grad()
    module.train(was_training)
    return {name: (s / max(tasks, 1)).cpu() for name, s in sums.items()}


class ProgressCompress(BuiltinStrategy):
    """Continual KD as a knowledge base and an active column ("progress and compress").

    Progress: the active column, a copy of the knowledge base (the teacher), learns the new
    platform's sample (ranking loss). Compress: the knowledge base learns the sample too, while
    ``lam`` x listwise distillation pulls its rankings to the active column's and ``ewc`` x an
    elastic penalty, sum_i F_i (theta_i - theta*_i)^2 / mean_i F_i, holds the parameters that
    mattered on earlier platforms (F: the diagonal Fisher information stored with the teacher,
    or, for a teacher without one, computed from the teacher's own predictions on this
    platform's programs). The new knowledge base carries ``gamma`` x the old Fisher plus its
    own, for the next platform. Inference uses the knowledge base alone: parameters stay
    constant and no earlier platform's records are read."""

    name = "continual-kd-pc"

    def __init__(self, *, lam: float = 2.0, tau: float = 4.0, ewc: float = 1.0, gamma: float = 1.0, **options: Any):
        super().__init__(**options)
        if not (float(lam) >= 0 and float(tau) > 0 and float(ewc) >= 0 and 0 <= float(gamma) <= 1):
            raise TclError(
                f"continual-kd-pc needs lam >= 0, tau > 0, ewc >= 0 and 0 <= gamma <= 1, got lam {lam}, "
                f"tau {tau}, ewc {ewc}, gamma {gamma}"
            )
        self.lam, self.tau, self.ewc, self.gamma = float(lam), float(tau), float(ewc), float(gamma)

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        inputs = unlabelled if unlabelled is not None and len(unlabelled) else target
        active = self._student(teacher)
        active.fit(target, valid, seed=seed, warm_start=True)
        column = active.module.eval()
        for p in column.parameters():
            p.requires_grad_(False)

        base = self._student(teacher)
        anchor = {n: p.detach().clone() for n, p in base.module.named_parameters()}
        fisher = teacher.fisher if set(teacher.fisher) == set(anchor) else diagonal_fisher(teacher, inputs, seed=seed)
        scale = (sum(float(f.sum()) for f in fisher.values()) / sum(f.numel() for f in fisher.values())) or 1.0
        weights = {n: (f / scale).to(base.device) for n, f in fisher.items()}

        def make_loss(groups: Sequence[Group]):
            column_scores = [
                torch.from_numpy(predict_groups(column, base.collate, g.features, len(g), base.device)).float()
                for g in groups
            ]

            def loss(module: nn.Module, scores: torch.Tensor, batch) -> torch.Tensor:
                device = scores.device
                t = torch.cat([column_scores[gi][torch.from_numpy(idx)] for gi, idx in batch]).to(device)
                gid = torch.cat([torch.full((idx.size,), j, dtype=torch.int64) for j, (_gi, idx) in enumerate(batch)])
                penalty = sum(
                    (weights[n] * (p - anchor[n].to(device)) ** 2).sum()
                    for n, p in module.named_parameters()
                    if n in weights
                )
                return self.lam * listwise_kl(scores, t, gid.to(device), self.tau) + self.ewc * penalty

            return loss

        base.fit(target, valid, seed=seed, warm_start=True, extra_loss=make_loss)
        own = diagonal_fisher(base, inputs, seed=seed)
        base.fisher = {n: self.gamma * fisher[n] + own[n] for n in own}
        return self._finish(
            base,
            teacher,
            target,
            lam=self.lam,
            tau=self.tau,
            ewc=self.ewc,
            gamma=self.gamma,
            fisher_from=("teacher" if fisher is teacher.fisher else "teacher's predictions"),
        )
