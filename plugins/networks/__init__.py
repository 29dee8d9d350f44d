"""Built-in network suite: 23 inference networks and operator families, pure torch (docs/networks.md).

torchvision and transformers are not dependencies (and torchvision does not load here), so
each network is written out in this package at the widths of its well-known reference configuration.
That matters more than the weights: tuning tasks are defined by operator shapes, so
ResNet-18 written here yields the same convolution workloads as anyone's ResNet-18. The
weights are random (fixed seed) because task extraction and tuning never look at them.

Every factory returns a :class:`tcl.api.interfaces.NetworkDefinition` holding a module in eval
mode and its example inputs (batch 1 unless asked otherwise; the ``-b8`` networks default to 8). Factories accept ``seed`` and
``batch_size`` keyword options, which a suite config may set.
"""
