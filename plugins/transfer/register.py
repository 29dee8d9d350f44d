"""Registers the built-in transfer strategies; each strategy's module (torch) loads on first use."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import Deferred, TransferRegistration


@hookimpl
def tcl_register_transfer_strategies() -> list[TransferRegistration]:
    return [
        TransferRegistration(
            name="continual-kd",
            factory=Deferred("tcl_plugins.transfer.continual_kd", "ContinualKD"),
            description="TCL: student from the frozen teacher, LambdaRank + listwise distillation, one head",
        ),
        TransferRegistration(
            name="continual-kd-pc",
            factory=Deferred("tcl_plugins.transfer.progress_compress", "ProgressCompress"),
            description="TCL: an active column learns the new platform, the knowledge base distils "
            "it under an EWC penalty; one model",
        ),
        TransferRegistration(
            name="as-is",
            factory=Deferred("tcl_plugins.transfer.as_is", "AsIs"),
            description="the teacher unchanged: the baseline of doing nothing",
        ),
        TransferRegistration(
            name="fine-tune",
            factory=Deferred("tcl_plugins.transfer.fine_tune", "FineTune"),
            description="start from the teacher, ranking loss on the new sample only",
        ),
        TransferRegistration(
            name="mtl",
            factory=Deferred("tcl_plugins.transfer.mtl", "MTL"),
            needs_all_platforms=True,
            description="MTL-TLP: shared backbone, one head per platform, trained on all platforms",
        ),
        TransferRegistration(
            name="scratch",
            factory=Deferred("tcl_plugins.transfer.scratch", "Scratch"),
            needs_teacher=False,
            description="a fresh model trained on the new platform's sample only",
        ),
    ]
