"""The ``as-is`` strategy: the teacher unchanged, the baseline of doing nothing."""

from __future__ import annotations

from tcl_plugins.transfer.base import BuiltinStrategy


class AsIs(BuiltinStrategy):
    """The teacher unchanged: the row every transfer must beat (doing nothing)."""

    name = "as-is"

    def transfer(self, teacher, target, *, valid=None, unlabelled=None, history=None, seed=0):
        return self._finish(self._student(teacher), teacher, target)
