"""The ``scratch`` strategy: a fresh model trained on the new platform's sample only."""

from __future__ import annotations

from tcl.api.interfaces import CostModel
from tcl_plugins.transfer.base import BuiltinStrategy


class Scratch(BuiltinStrategy):
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
