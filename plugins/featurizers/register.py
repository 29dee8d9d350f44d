"""Registers the built-in featurizers. Their names and versions are read from the classes,
whose modules need only numpy to import (TVM loads when ``per-store`` first featurizes)."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import FeaturizerRegistration
from tcl_plugins.featurizers.per_store import PerStoreFeaturizer
from tcl_plugins.featurizers.trace_seq import TraceSeqFeaturizer
from tcl_plugins.featurizers.trace_seq_layout import WIDTH


@hookimpl
def tcl_register_featurizers() -> list[FeaturizerRegistration]:
    return [
        FeaturizerRegistration(
            name=PerStoreFeaturizer.name,
            factory=PerStoreFeaturizer,
            version=PerStoreFeaturizer.version,
            description="TVM PerStoreFeature: (n_stores, 164) float32 per program (Tenset-MLP input); needs TVM",
        ),
        FeaturizerRegistration(
            name=TraceSeqFeaturizer.name,
            factory=TraceSeqFeaturizer,
            version=TraceSeqFeaturizer.version,
            description=f"TLP-style primitive sequence: (n, L=48, F={WIDTH}) float32; MetaSchedule traces and TenSet steps",
        ),
    ]
