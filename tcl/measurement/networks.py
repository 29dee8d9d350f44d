"""A network named on the command line or in a config: a registered network's name, or a
user's model file (``path/file.py:ClassName``) that needs no plugin package."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Sequence

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.api.interfaces import NetworkDefinition

INPUT_SHAPE_NEEDS_FILE = "--input-shape applies only to a network given as path/file.py:ClassName"


def file_network(spec: str) -> tuple[Path, str] | None:
    """``(path, ClassName)`` when ``spec`` names a user's network file (``path/file.py:ClassName``),
    None for a registered network's name."""
    path_text, _, cls_name = spec.rpartition(":")
    return (Path(path_text), cls_name) if path_text.endswith(".py") else None


def resolve_network(spec: str, input_shape: Sequence[int] | None = None, seed: int = 0) -> tuple[str, Any]:
    """``(name, NetworkDefinition)`` of a registered network or of ``path/file.py:ClassName``
    (built without arguments, fed ``torch.randn(input_shape)``, or without a shape what the
    module's ``example_inputs()`` returns: several inputs, integer token ids)."""
    in_file = file_network(spec)
    if in_file is None:
        if input_shape is not None:
            raise TclError(INPUT_SHAPE_NEEDS_FILE)

        return spec, discovery.registry().create("networks", spec, seed=seed)  # a factory without seed gets none
    import torch

    path, cls_name = in_file
    if not cls_name.isidentifier():
        raise TclError(f"network {spec!r}: expected path/file.py:ClassName")
    if not path.is_file():
        raise TclError(f"network {spec!r}: no such file {path}")
    module_spec = importlib.util.spec_from_file_location(f"tcl_user_network_{path.stem}", path)
    user = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(user)
        cls = getattr(user, cls_name)
    except AttributeError:
        raise TclError(f"network {spec!r}: {path} defines no {cls_name}") from None
    except Exception as exc:  # the user's file may raise anything
        raise TclError(f"network {spec!r}: importing {path} failed: {type(exc).__name__}: {exc}") from None
    if not input_shape and not callable(getattr(cls, "example_inputs", None)):
        raise TclError(
            f"network {spec!r}: a file network needs an input shape (--input-shape 1,3,32,32; in a config "
            f"input_shape = [1, 3, 32, 32]) or an example_inputs() method on {cls_name}"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            module = cls()
        except Exception as exc:
            raise TclError(f"network {spec!r}: {cls_name}() failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(module, torch.nn.Module):
            raise TclError(f"network {spec!r}: {cls_name}() is a {type(module).__name__}, not a torch.nn.Module")
        example = (torch.randn(*input_shape),) if input_shape else _example_inputs(spec, module)
    return f"{path.stem}:{cls_name}", NetworkDefinition(module=module.eval(), example_inputs=example)


def _example_inputs(spec: str, module: Any) -> tuple[Any, ...]:
    """The inputs a file network's ``example_inputs()`` returns: one tensor or a tuple of them."""
    import torch

    try:
        inputs = module.example_inputs()
    except Exception as exc:
        raise TclError(f"network {spec!r}: example_inputs() failed: {type(exc).__name__}: {exc}") from None
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else inputs
    if not isinstance(inputs, (tuple, list)) or not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TclError(f"network {spec!r}: example_inputs() must return a tensor or a tuple of tensors")
    return tuple(inputs)


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise TclError(f"--input-shape {text!r}: expected positive integers separated by commas, e.g. 1,3,32,32")
    return shape
