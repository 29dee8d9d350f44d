"""What plugins ship for users to start from: cost-model checkpoints
(``CostModelRegistration.pretrained``) and candidate pools (``NetworkRegistration.pool``).
Plugins name them in their registrations, so the core never looks for files."""

from __future__ import annotations

from pathlib import Path

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.records.pools import is_pool


def pretrained_dir(profile: str, model: str) -> Path | None:
    """The checkpoint directory cost model ``model`` ships for ``profile``, if it ships one."""
    found = discovery.registry().entries["cost_models"].get(model)
    return None if found is None else found.record.pretrained.get(profile)


def shipped_pools() -> dict[str, Path]:
    """Network name -> the candidate pool its plugin ships (networks that ship none are left out)."""
    entries = discovery.registry().entries["networks"]
    return {
        name: Path(entry.record.pool)
        for name, entry in sorted(entries.items())
        if entry.record.pool is not None and is_pool(entry.record.pool)
    }


def shipped_pool(network: str | None = None) -> Path:
    """The pool shipped with ``network``; without a network, the one pool the installed
    network plugins ship. A one-line error says what to pass instead."""
    pools = shipped_pools()
    if network is not None:
        if network not in pools:
            having = ", ".join(pools) or "none"
            raise TclError(f"network {network} ships no candidate pool (networks that do: {having}); give --pool DIR")
        return pools[network]
    distinct = sorted(set(pools.values()))
    if len(distinct) != 1:
        found = f"{len(distinct)} ({', '.join(map(str, distinct))})" if distinct else "none"
        raise TclError(f"no single shipped candidate pool: the installed networks ship {found}; give --pool DIR")
    return distinct[0]
