"""Registers the built-in hardware backends; each backend's module loads on first use."""

from __future__ import annotations

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import BackendRegistration, Deferred


@hookimpl
def tcl_register_hardware_backends() -> list[BackendRegistration]:
    return [
        BackendRegistration(
            name="local",
            factory=Deferred("tcl_plugins.backends.local", "LocalBackend"),
            description="this host's CPU: persistent build worker, one timing worker with the profile's threads",
            device="cpu",
        ),
        BackendRegistration(
            name="rpc",
            factory=Deferred("tcl_plugins.backends.rpc", "RPCBackend"),
            description="a device behind a TVM RPC tracker (tracker_host, tracker_port, device_key)",
            device="rpc",
        ),
        BackendRegistration(
            name="cuda",
            factory=Deferred("tcl_plugins.backends.cuda", "CUDABackend"),
            description="an NVIDIA GPU on this host (LocalRunner on cuda:device_id)",
            device="cuda",
        ),
    ]
