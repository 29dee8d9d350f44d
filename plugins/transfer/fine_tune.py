"""The ``fine-tune`` strategy: start from the teacher, ranking loss on the new sample only."""

from __future__ import annotations

from tcl_plugins.transfer.base import BuiltinStrategy


class FineTune(BuiltinStrategy):
    name = "fine-tune"

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        student = self._student(teacher)
        student.fit(target, valid, seed=seed, warm_start=True)
        return self._finish(student, teacher, target)
