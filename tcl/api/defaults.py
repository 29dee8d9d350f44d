"""The plugins the core uses when a user names none: TCL's method (RDU sampling, the Mamba
cost model, continual knowledge distillation) and the baselines the experiment kinds compare
it with. They are names, resolved through plugin discovery like any a user gives (a missing
one is the usual one-line "unknown plugin" error), never imports; this module is the one
place the core names a plugin. Also the settings that several entry points (CLI, configs)
share."""

from __future__ import annotations

SAMPLER = "rdu"  # which programs of a pool are worth measuring
MEASURE_ALL = "all"  # the sampler taking a whole pool: tcl collect's default, the 100% row of sampling runs
COST_MODEL = "mamba"
TRANSFER_STRATEGY = "continual-kd"
TEACHER_PROFILE = "x86-avx2"  # whose shipped COST_MODEL checkpoint tcl adapt and quickstart start from
QUICKSTART_NETWORK = "bert-tiny"  # small enough to measure, distil and tune in minutes
TUNING_NETWORK = "resnet-18"  # the tuning experiment's default
RACE_RECORDS = 3  # each task's best records raced inside the compiled network (tcl.tuning.race)

SAMPLING_ABLATION = ("rdu", "random", "rdu-r", "rdu-d", "rdu-u")  # RDU, the baseline, RDU minus one term
MODEL_COMPARISON = ("mamba", "tlp", "mlp", "xgb")
TRANSFER_COMPARISON = ("continual-kd", "fine-tune", "scratch")
