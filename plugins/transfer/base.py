"""What the built-in transfer strategies share: the strategy base (teacher checks, the student's
start, training with :func:`tcl.learning.training.train_ranking`) and the listwise
distillation loss.
"""

from __future__ import annotations

from typing import Any

import torch

from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel, TransferStrategy
from tcl.api.programs import ProgramSet


def group_log_softmax(x: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    top = torch.full((n_groups,), -torch.inf, dtype=x.dtype, device=x.device)
    top = top.scatter_reduce(0, groups, x.detach(), reduce="amax")
    z = x - top[groups]
    total = torch.zeros(n_groups, dtype=x.dtype, device=x.device).index_add(0, groups, z.exp())
    return z - total.log()[groups]


def listwise_kl(student: torch.Tensor, teacher: torch.Tensor, groups: torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """Mean over groups of KL(softmax(teacher/tau) || softmax(student/tau)) within each group,
    times tau^2 (Hinton's scaling, so gradients keep their size as tau changes)."""
    n_groups = int(groups.max()) + 1
    log_s = group_log_softmax(student / tau, groups, n_groups)
    log_t = group_log_softmax(teacher.detach() / tau, groups, n_groups)
    kl = torch.zeros(n_groups, dtype=student.dtype, device=student.device)
    kl = kl.index_add(0, groups, log_t.exp() * (log_t - log_s))
    return kl.mean() * tau * tau


class BuiltinStrategy(TransferStrategy):
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
