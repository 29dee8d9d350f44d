"""Registers its sampler under a hook name no spec defines (``sampler`` for ``samplers``)."""

from tcl.api.hookspecs import hookimpl


@hookimpl
def tcl_register_sampler():
    return []
