"""A cost model: scores programs so that faster ones score higher, within a task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel
from tcl.api.programs import Program, ProgramSet, Task
from tcl_example_plugin.featurizer import InstructionCounts


def ranking_targets(records: ProgramSet, featurizer: InstructionCounts) -> tuple[np.ndarray, np.ndarray]:
    """Features and targets of every measured program: log2(best latency of its task / its
    latency), 0 for the fastest program, so tasks of any speed share one scale."""
    xs, ys = [], []
    for task, programs in records:
        ok = [p for p in programs if p.ok]
        if len(ok) < 2:
            continue
        latency = np.array([p.latency for p in ok])
        xs.append(featurizer.featurize(task, ok))
        ys.append(np.log2(latency.min() / latency))
    if not xs:
        raise TclError("ridge: no task with two or more measured programs to learn from")
    return np.concatenate(xs).astype(np.float64), np.concatenate(ys)


def ridge_fit(x: np.ndarray, y: np.ndarray, alpha: float, prior: np.ndarray | None = None) -> np.ndarray:
    """argmin ||x w - y||^2 + alpha ||w - prior||^2 (prior 0 when not given)."""
    prior = np.zeros(x.shape[1]) if prior is None else prior
    gram = x.T @ x + alpha * np.eye(x.shape[1])
    return np.linalg.solve(gram, x.T @ y + alpha * prior)


class RidgeCostModel(CostModel):
    """Ridge regression from instruction counts to relative speed."""

    name = "ridge"

    def __init__(self, alpha: float = 1.0, verbose: bool = False) -> None:
        # ``verbose`` is one of the runtime hints TCL passes when a factory declares it
        if alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha}")
        self.alpha, self.verbose = float(alpha), verbose
        self.featurizer = InstructionCounts()
        self.weights: np.ndarray | None = None
        self.profile: str | None = None

    def fit(self, train: ProgramSet, valid: ProgramSet | None = None, *, seed: int = 0) -> Mapping[str, float]:
        x, y = ranking_targets(train, self.featurizer)
        self.weights, self.profile = ridge_fit(x, y, self.alpha), train.profile
        if self.verbose:
            print(f"[ridge] fitted on {len(y)} programs")
        return {"train_mse": float(np.mean((x @ self.weights - y) ** 2))}

    def predict(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        return self.embed(task, programs).astype(np.float64) @ self._require()

    def embed(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        return self.featurizer.featurize(task, programs)

    def save(self, path: Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = {
            "model": self.name,
            "alpha": self.alpha,
            "profile": self.profile,
            "featurizer": {"name": self.featurizer.name, "version": self.featurizer.version},
            "weights": [float(w) for w in self._require()],
        }
        tmp = path / ".config.json.tmp"
        tmp.write_text(json.dumps(config) + "\n", encoding="utf-8")
        tmp.replace(path / "config.json")  # written whole or not at all

    @classmethod
    def load(cls, path: Path) -> "RidgeCostModel":
        config_path = Path(path) / "config.json"
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
            model = cls(alpha=float(config["alpha"]))
            if config["featurizer"]["version"] != model.featurizer.version:
                raise TclError(
                    f"{config_path}: features of version {config['featurizer']['version']}, "
                    f"this plugin makes version {model.featurizer.version}"
                )
            model.weights = np.asarray(config["weights"], dtype=np.float64)
            model.profile = config.get("profile")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TclError(f"{config_path}: not a ridge checkpoint ({type(exc).__name__}: {exc})") from None
        return model

    def _require(self) -> np.ndarray:
        if self.weights is None:
            raise TclError("ridge: not fitted; fit it or load a checkpoint first")
        return self.weights

    def platforms(self) -> list[str]:
        """The platform it was fitted on (transfer scores forgetting on it)."""
        return [self.profile] if self.profile else []
