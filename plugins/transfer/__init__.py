"""Built-in transfer strategies: how a cost model moves to a new platform.

``continual-kd``
    TCL's. The student starts as a copy of the teacher (the model of the previous platform),
    the teacher stays frozen. Loss = LambdaRank on the labelled sample of the new platform
    + ``lam`` x listwise distillation: within each task, KL(softmax(teacher/tau) ||
    softmax(student/tau)) x tau^2, on the labelled programs (``distill_on="labelled"``) or on
    them and as many unlabelled pool programs of random tasks (``"pool"``). One head, so the
    parameter count never grows, and no earlier platform's data is needed.
``continual-kd-pc``
    TCL's continual KD in the knowledge-base / active-column form (:class:`ProgressCompress`):
    an active column learns the new platform, then the knowledge base learns from it by
    distillation under an elastic penalty (diagonal Fisher) that holds what it knew.
``fine-tune``
    Same start, ranking loss on the new sample only.
``as-is``
    The teacher unchanged, scored on the new platform: the baseline of doing nothing.
``mtl``
    MTL-TLP: the teacher's network as a shared backbone, one output head per platform, trained
    jointly on every platform's records (``history``) plus the new sample. Needs the same
    programs measured on the earlier platforms; parameters grow by one head per platform.
``scratch``
    A fresh network of the teacher's family (or of ``model`` without a teacher) trained on
    the new sample only.

All train with :func:`tcl.learning.training.train_ranking`. Only torch cost models can be transferred:
a teacher of another family or featurizer than asked (``model``, ``featurizer`` options) is
refused with a :class:`TclError`.
"""
