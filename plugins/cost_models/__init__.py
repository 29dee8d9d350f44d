"""Built-in cost models: ``mlp`` (Tenset-MLP), ``tlp`` (TLP), ``mamba`` (TCL's) and ``xgb``
(TVM MetaSchedule's XGBoost model). Architectures: docs/cost-models.md.

The torch models train with :func:`tcl.learning.training.train_ranking` (LambdaRank within tasks).
``embed`` returns the hidden state before the decoder, pooled per program (the MLP's summed
store representation; the sequence models' mean over real steps). ``uncertainty`` is the
spread (standard deviation) of the scores over MC-dropout passes: dropout (p=0.1) sits in the
residual blocks and is switched on only for those passes, never in training or ``predict``.

Checkpoints are directories: ``config.json`` (model, hyper-parameters, featurizer name and
version, profile, dataset fingerprint, metrics, tcl version, date) and ``weights.pt`` (a state
dict, read with ``torch.load(weights_only=True)``), or ``xgb_model.json`` (the booster in
XGBoost's JSON format) for ``xgb``. A checkpoint is written into a temporary sibling directory
and renamed into place. Loading it with another featurizer name or version, or as another
model, raises :class:`TclError` naming the file and both values. :func:`load_model` reads any
of them.
"""
