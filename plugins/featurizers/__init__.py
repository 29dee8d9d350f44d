"""Built-in featurizers: ``per-store`` (TVM's PerStoreFeature) and ``trace-seq`` (TLP style).

``per-store``
    TVM MetaSchedule's ``PerStoreFeature``: one 164-float vector per buffer store of the
    scheduled program (Tenset-MLP sums them over stores). Output: ``list[np.ndarray]``, one
    float32 ``(n_stores, 164)`` array per program. A program's live ``schedule`` is used when
    the tuning bridge passes one; otherwise its trace is replayed on the task's workload (the
    parsed workload is cached per task). Needs TVM and a TVM workload (not for TenSet imports).
    Only the target's ``gpu`` key changes the features, so the target enters the cache token
    as ``cpu`` / ``gpu`` only.

``trace-seq``
    One vector per schedule primitive, as TLP does for auto_scheduler steps: the one-hot of
    the instruction kind, plus its numbers, log-scaled (``sign(x) * log1p(|x|)``). Output: one
    float32 ``(n_programs, L, F)`` array; traces longer than ``L`` lose their tail, shorter
    ones are zero-padded. Pure Python + numpy, no TVM. Layout of a row (``F = 81``):

    ======== ===================================================================
    0..55    kind one-hot: the 52 instruction kinds TVM 0.27 registers (``KINDS``),
             3 auto_scheduler-only steps (``FollowSplit``, ``FollowFusedSplit``,
             ``ComputeRoot``) and ``other`` (unknown kinds)
    56..69   annotation key one-hot, for Annotate / Unannotate / auto_scheduler pragmas
             (``ANNOTATION_KEYS``; unknown keys go to ``other``)
    70       1 from ``EnterPostproc`` on (postprocessor instructions)
    71       1 for auto_scheduler (TenSet) steps
    72       number of block / loop references among the inputs (e.g. loops fused)
    73       number of outputs (e.g. loops a Split makes)
    74..80   up to 7 values, in order: inputs (sampled variables resolved to their
             sampled values), numeric attributes, then the decision; strings that are
             storage scopes or thread axes become small codes (``STRING_CODES``)
    ======== ===================================================================

    One-hot and flag columns are 0/1; columns 72.. are log-scaled.

    Names of blocks, loops and variables are dropped ("abstracted"): what remains is the
    count of references, and for variables produced by sampling instructions, the sampled
    value. MetaSchedule keeps decisions apart from instructions (``[[inst_idx, decision]]``);
    they are merged into their instruction's row, and flow into the instructions that use the
    sampled variables: ``SamplePerfectTile`` carries ``[n, max_innermost, *factors]`` and the
    ``Split`` that uses its outputs carries the same factors; ``SampleCategorical`` carries
    ``[chosen value, chosen index, n candidates]`` and the ``Annotate`` using it the chosen
    value (e.g. the unroll depth); ``SampleComputeLocation`` carries its decision (the loop
    index, -1 root, -2 inline) and so does the ``ComputeAt`` that uses it.

    Structural look-ups (``GetSBlock``, ``GetLoops``, ``GetChildBlocks``, ``GetProducers``,
    ``GetConsumers``, ``GetOutputBlocks``) are dropped by default (``DROPPED``): they only
    name blocks and loops for later instructions, they are a third of a MetaSchedule trace,
    and dropping them lets ``L = 48`` hold the whole of 99 % of the traces of our data
    (docs: measured on data/bundled, 2800 candidates of 14 tasks: whole traces are 30-80
    instructions, median 40, p99 72; without the look-ups 19-55, median 29, p99 48).

    auto_scheduler steps (``Program.source == "tenset"``) use the same layout: SP, FU, RE,
    CA, CI, CHR, CHW, RF, SA map to the equivalent MetaSchedule kinds, AN to
    Unroll/Vectorize/Parallel/Bind/Tensorize by its annotation, PR to Annotate with its
    pragma key; FSP, FFSP and CR get their own slots; stage/iterator ids are kept as values
    (they are positions, not names). FSP carries the lengths of the split it follows.

Bump ``version`` of a featurizer whenever its output changes.
"""
