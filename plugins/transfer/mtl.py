"""The ``mtl`` strategy (MTL-TLP): a shared backbone with one head per platform, trained on every
platform's records.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tcl.api.errors import TclError
from tcl.api.programs import ProgramSet
from tcl.learning.training import Group, make_groups, train_ranking
from tcl_plugins.transfer.base import BuiltinStrategy


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


class MTL(BuiltinStrategy):
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
            made, _ = make_groups(records, student.featurize_set)
            groups += [Group(task=g.task, features=(h, g.features), latencies=g.latencies) for g in made]
        valid_groups = []
        if valid is not None and len(valid):
            made, _ = make_groups(valid, student.featurize_set, what="validation")
            valid_groups = [
                Group(task=g.task, features=(len(heads) - 1, g.features), latencies=g.latencies) for g in made
            ]

        def collate(parts, device):
            ids = torch.cat([torch.full((idx.size,), h, dtype=torch.int64) for (h, _f), idx in parts])
            return ids.to(device), student.collate([(f, idx) for (_h, f), idx in parts], device)

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
