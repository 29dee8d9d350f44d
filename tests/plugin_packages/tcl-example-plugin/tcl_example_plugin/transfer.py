"""A transfer strategy: carries a cost model from earlier platforms to a new one."""

from __future__ import annotations

from tcl.api.errors import TclError
from tcl.api.interfaces import TransferStrategy
from tcl_example_plugin.cost_model import RidgeCostModel, ranking_targets, ridge_fit


class ShrinkToTeacher(TransferStrategy):
    """Fits a ridge model on the new platform's sample, shrunk towards the teacher's weights
    instead of towards zero: with few labels it stays near what the teacher knew."""

    name = "shrink-to-teacher"

    def __init__(self, alpha: float = 10.0) -> None:
        if alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha}")
        self.alpha = float(alpha)

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        if not isinstance(teacher, RidgeCostModel):
            raise TclError(f"shrink-to-teacher needs a ridge teacher, got {getattr(teacher, 'name', None)!r}")
        student = RidgeCostModel(alpha=teacher.alpha)
        x, y = ranking_targets(target, student.featurizer)
        student.weights = ridge_fit(x, y, self.alpha, prior=teacher.weights)
        student.profile = target.profile
        return student
