"""TCL: cross-hardware tensor program tuning on TVM MetaSchedule.

The core defines extension points (see :mod:`tcl.api.hookspecs`) and the interfaces plugins
implement (see :mod:`tcl.api.interfaces`); it never imports a concrete plugin.
"""

__version__ = "0.1.0"
