"""Built-in transfer strategies: how a cost model moves to a new platform.

``continual-kd``
    TCL's. The student starts as a copy of the teacher (the model of the previous platform),
    the teacher stays frozen. Loss = LambdaRank on the labelled sample of the new platform
    + ``lam`` x listwise distillation: within each task, KL(softmax(teacher/tau) ||
    softmax(student/tau)) x tau^2, on the labelled programs (``distill_on="labelled"``) or on
    them and as many unlabelled pool programs of random tasks (``"pool"``). One head, so the
    parameter count never grows, and no earlier platform's data is needed.
``continual-kd-pc``
    TCL's continual KD in the knowledge-base / active-column form (:class:`ProgressCompress`):
    an active column learns the new platform, then the knowledge base learns from it by
    distillation under an elastic penalty (diagonal Fisher) that holds what it knew.
``fine-tune``
    Same start, ranking loss on the new sample only.
``as-is``
    The teacher unchanged, scored on the new platform: the baseline of doing nothing.
``mtl``
    MTL-TLP: the teacher's network as a shared backbone, one output head per platform, trained
    jointly on every platform's records (``history``) plus the new sample. Needs the same
    programs measured on the earlier platforms; parameters grow by one head per platform.
``scratch``
    A fresh network of the teacher's family (or of ``model`` without a teacher) trained on
    the new sample only.

All train with :func:`tcl.learning.training.train_ranking`. Only torch cost models can be transferred:
a teacher of another family or featurizer than asked (``model``, ``featurizer`` options) is
refused with a :class:`TclError`.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel, TransferStrategy
from tcl.api.programs import ProgramSet
from tcl.learning.training import Group, make_groups, predict_groups, train_ranking

DISTILL_ON = ("labelled", "pool")


def _group_log_softmax(x: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    top = torch.full((n_groups,), -torch.inf, dtype=x.dtype, device=x.device)
    top = top.scatter_reduce(0, groups, x.detach(), reduce="amax")
    z = x - top[groups]
    total = torch.zeros(n_groups, dtype=x.dtype, device=x.device).index_add(0, groups, z.exp())
    return z - total.log()[groups]


def listwise_kl(student: torch.Tensor, teacher: torch.Tensor, groups: torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """Mean over groups of KL(softmax(teacher/tau) || softmax(student/tau)) within each group,
    times tau^2 (Hinton's scaling, so gradients keep their size as tau changes)."""
    n_groups = int(groups.max()) + 1
    log_s = _group_log_softmax(student / tau, groups, n_groups)
    log_t = _group_log_softmax(teacher.detach() / tau, groups, n_groups)
    kl = torch.zeros(n_groups, dtype=student.dtype, device=student.device)
    kl = kl.index_add(0, groups, log_t.exp() * (log_t - log_s))
    return kl.mean() * tau * tau


class _Strategy(TransferStrategy):
    """Options shared by all: ``epochs`` (default: the teacher's), ``model`` and ``featurizer``
    (the family and featurizer the teacher must have, when given)."""

    name = "transfer"

    def __init__(self, *, epochs: int | None = None, model: str | None = None, featurizer: str | None = None):
        self.epochs, self.model, self.featurizer = epochs, model, featurizer

    def check(self, teacher: CostModel | None) -> None:
        """Refuse a teacher this strategy cannot start from (called by the core before any work)."""
        if teacher is None:
            raise TclError(f"transfer strategy {self.name} needs a teacher model (--teacher)")
        if not hasattr(teacher, "clone"):
            raise TclError(
                f"transfer strategy {self.name} trains torch cost models (mlp, tlp, mamba); "
                f"the teacher is a {teacher.name} model"
            )
        if self.model and teacher.name != self.model:
            raise TclError(
                f"the teacher is a {teacher.name} model, not {self.model}; give a {self.model} teacher "
                f"or use --strategy scratch"
            )
        if self.featurizer and teacher.featurizer.name != self.featurizer:
            raise TclError(
                f"the teacher uses featurizer {teacher.featurizer.name}, not {self.featurizer}; "
                f"give a teacher trained on {self.featurizer} features or use --strategy scratch"
            )

    def _student(self, teacher: CostModel | None) -> Any:
        """A trainable copy of the teacher."""
        self.check(teacher)
        student = teacher.clone()
        student.heads = {}  # other platforms' heads would not fit the retrained backbone
        if self.epochs is not None:
            student.train_config.epochs = int(self.epochs)
        return student

    def _finish(self, student: Any, teacher: CostModel | None, target: ProgramSet, **details: Any) -> Any:
        source = teacher.info.get("profile") if teacher is not None else None
        student.info["profile"] = target.profile
        student.info["transfer"] = {"strategy": self.name, "teacher_profile": source, **details}
        return student


class FineTune(_Strategy):
    name = "fine-tune"

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        student = self._student(teacher)
        student.fit(target, valid, seed=seed, warm_start=True)
        return self._finish(student, teacher, target)


class AsIs(_Strategy):
    """The teacher unchanged: the row every transfer must beat (doing nothing)."""

    name = "as-is"

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        return self._finish(self._student(teacher), teacher, target)


class Scratch(_Strategy):
    """Options: ``model`` is also the family used when there is no teacher (default mamba)."""

    name = "scratch"

    def check(self, teacher: CostModel | None) -> None:
        if teacher is not None:
            super().check(teacher)

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        if teacher is None:
            from tcl.api.discovery import registry

            fresh = registry().create(
                "cost_models",
                self.model or "mamba",
                **({"epochs": int(self.epochs)} if self.epochs is not None else {}),
            )
        else:
            fresh = self._student(teacher)
        fresh.fit(target, valid, seed=seed)
        return self._finish(fresh, teacher, target)


class ContinualKD(_Strategy):
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
            pool = {k: f for k, f in student._featurize_set(unlabelled).items() if len(unlabelled.programs[k]) >= 2}
        rng = np.random.default_rng(seed)

        def teacher_scores(features: Any, n: int) -> torch.Tensor:
            return torch.from_numpy(predict_groups(frozen, student._collate, features, n, student.device)).float()

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
                    s.append(module(student._collate([(pool[k], idx) for k, idx in parts], student.device)))
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
    features = model._featurize_set(records)
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
        log_p = torch.log_softmax(module(model._collate([(feats, idx)], model.device)).reshape(-1), dim=0)
        drawn = torch.multinomial(log_p.detach().exp().cpu(), 1, generator=generator).item()
        (-log_p[drawn]).backward()
        for name, p in params.items():
            if p.grad is not None:
                sums[name] += p.grad.detach() ** 2
        tasks += 1
    module.zero_grad()
    module.train(was_training)
    return {name: (s / max(tasks, 1)).cpu() for name, s in sums.items()}


class ProgressCompress(_Strategy):
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
                torch.from_numpy(predict_groups(column, base._collate, g.features, len(g), base.device)).float()
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


class MultiHeadNet(nn.Module):
    """A cost model's network as shared backbone with one output layer per platform; inputs are
    ``(head index per program, the network's own inputs)``."""

    def __init__(self, backbone: nn.Module, heads: Sequence[nn.Module]):
        super().__init__()
        self.backbone = backbone
        self.heads = nn.ModuleList(heads)

    def forward(self, inputs: tuple[torch.Tensor, Any]) -> torch.Tensor:
        ids, inner = inputs
        choose = F.one_hot(ids, len(self.heads))

        def decoder(h: torch.Tensor) -> torch.Tensor:
            out = torch.cat([head(h) for head in self.heads], dim=-1)
            sel = choose.view(choose.shape[0], *([1] * (out.dim() - 2)), choose.shape[1]).to(out.dtype)
            return (out * sel).sum(-1, keepdim=True)

        return self.backbone.score_with(inner, decoder)


class MTL(_Strategy):
    name = "mtl"

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        student = self._student(teacher)
        sets = {p: r for p, r in (history or {}).items() if p != target.profile}
        if not sets:
            raise TclError(
                "transfer strategy mtl trains on every platform's records: give the earlier platforms' "
                "records (history) too"
            )
        _check_same_programs(target, sets)
        sets[str(target.profile)] = target
        own = {k: v.detach().cpu().clone() for k, v in student.module.decoder.state_dict().items()}
        known = {**teacher.heads, str(teacher.info.get("profile")): own}
        heads = []
        for platform in sets:
            head = copy.deepcopy(student.module.decoder)
            head.load_state_dict(known.get(platform, own))
            heads.append(head)
        groups = []
        for h, records in enumerate(sets.values()):
            made, _ = make_groups(records, student._featurize_set)
            groups += [Group(task=g.task, features=(h, g.features), latencies=g.latencies) for g in made]
        valid_groups = []
        if valid is not None and len(valid):
            made, _ = make_groups(valid, student._featurize_set, what="validation")
            valid_groups = [
                Group(task=g.task, features=(len(heads) - 1, g.features), latencies=g.latencies) for g in made
            ]

        def collate(parts, device):
            ids = torch.cat([torch.full((idx.size,), h, dtype=torch.int64) for (h, _f), idx in parts])
            return ids.to(device), student._collate([(f, idx) for (_h, f), idx in parts], device)

        net = MultiHeadNet(student.module, heads)
        result = train_ranking(
            net, collate, groups, valid_groups, config=student.train_config, name=self.name, seed=seed
        )
        student.module.decoder.load_state_dict(heads[-1].state_dict())
        student.heads = {
            p: {k: v.detach().cpu().clone() for k, v in head.state_dict().items()}
            for p, head in zip(list(sets)[:-1], heads)
        }
        student.info["metrics"] = dict(result.metrics)
        return self._finish(
            student, teacher, target, platforms=list(sets), trained_programs=sum(len(g) for g in groups)
        )


def _check_same_programs(target: ProgramSet, history: Mapping[str, ProgramSet]) -> None:
    from tcl.records.program_keys import program_key

    wanted = {(p.task_key, program_key(p.trace)) for _t, progs in target for p in progs}
    for platform, records in history.items():
        have = {(p.task_key, program_key(p.trace)) for _t, progs in records for p in progs}
        if not wanted & have:
            raise TclError(
                f"transfer strategy mtl needs the new platform's programs measured on every platform, "
                f"but none of the {len(wanted)} programs of {target.profile} are in the records of "
                f"{platform}"
            )
