"""Built-in hardware backends: ``local`` (this host's CPU), ``rpc`` (a device behind a TVM
RPC tracker) and ``cuda`` (a GPU on this host).

``local.measure()`` (what ``tcl collect``, sampling and transfer use) goes through
:class:`tcl.measurement.local_engine.LocalEngine`: candidates are compiled several to a library on one
worker per core, then timed one by one in a single timing process. MetaSchedule's own tuning
(``tcl tune``) and the other backends use :meth:`builder` and :meth:`runner`:
:class:`tcl.api.measure.FastLocalBuilder` (a persistent worker pool, no ``tvm.s_tir.tensor_intrin``
import per build) and MetaSchedule's runner. Workers are created on first use and kept across
calls; :meth:`close` stops them.

``backend_options`` a profile may set:

* every backend: ``build_workers`` (workers of the builder; default 1 for MetaSchedule's
  builder on CPU hosts, where one worker beat two on 2 cores; the ``local`` engine defaults to
  one per core; for ``cuda`` the host's physical cores, up to 8), ``builds_per_worker``.
* ``local``: ``group_size`` (candidates compiled into one library by the engine, default 4),
  ``retime_spread`` (time a candidate a second time when its repeats spread by more than this
  fraction of the fastest; 0 = never).
* ``rpc``: ``tracker_host``, ``tracker_port``, ``device_key`` (required), ``session_timeout_s``
  (default: the profile's ``run_timeout_s``), ``session_priority`` (1), ``max_sessions`` (1).
* ``cuda``: ``device_id`` (0).
"""
