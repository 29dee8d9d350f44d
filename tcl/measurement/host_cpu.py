"""Can this host's CPU run code built for a target? Code for a CPU with vector extensions this
one lacks (an AVX-512 profile on an AVX2-only machine) dies with an illegal instruction, so
every candidate of a collection or tuning would become an error record; the ``local``
backend refuses such a profile before any work instead."""

from __future__ import annotations

import platform
from typing import Any

from tcl.records.manifest import cpuinfo_value

# LLVM's names of the x86 vector extensions that tensor programs are compiled to, and the
# flag Linux lists in /proc/cpuinfo for each
X86_EXTENSION_FLAGS = {
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512cd": "avx512cd",
    "avx512dq": "avx512dq",
    "avx512vl": "avx512vl",
    "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi",
    "avx512vnni": "avx512_vnni",
    "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16",
    "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile",
    "amx-int8": "amx_int8",
    "amx-bf16": "amx_bf16",
}


def host_cpu_flags() -> set[str] | None:
    """The instruction-set flags this CPU (or its hypervisor) exposes; None where the host
    does not say (no /proc/cpuinfo)."""
    flags = cpuinfo_value("flags")
    return None if flags is None else set(flags.split())


def missing_extensions(target: Any, flags: set[str] | None = None) -> list[str]:
    """The x86 vector extensions (LLVM names) that code for ``target`` may use and this CPU
    lacks; empty when it has them all or when that cannot be told here (a host that is not
    x86 Linux, a target that is not an x86 LLVM target)."""
    if flags is None:
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return []
        flags = host_cpu_flags()
    triple = str(target.attrs.get("mtriple") or "x86_64")
    if flags is None or target.kind.name != "llvm" or not triple.startswith(("x86_64", "i686", "i386")):
        return []
    from tvm.target import codegen

    features = set(codegen.llvm_get_cpu_features(target))
    return sorted(f for f in features & X86_EXTENSION_FLAGS.keys() if X86_EXTENSION_FLAGS[f] not in flags)
