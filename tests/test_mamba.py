"""The pure-torch Mamba block against a slow loop-over-time reference, and its state dict
against mamba-ssm's."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tcl_plugins.cost_models import mamba_block
from tcl_plugins.cost_models.mamba_block import Mamba, RMSNorm, selective_scan


def reference_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """selective_scan_fn's definition, one time step at a time (layouts: u (b, d, L), B (b, N, L))."""
    if delta_bias is not None:
        delta = delta + delta_bias[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    h = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[2]):
        dA = torch.exp(delta[:, :, t, None] * A)
        dBu = delta[:, :, t, None] * B[:, None, :, t] * u[:, :, t, None]
        h = dA * h + dBu
        ys.append((h * C[:, None, :, t]).sum(-1))
    y = torch.stack(ys, dim=-1)
    if D is not None:
        y = y + D[:, None] * u
    if z is not None:
        y = y * F.silu(z)
    return y


def reference_block(m: Mamba, x):
    """mamba-ssm's slow path of Mamba.forward, written with nn.Conv1d and the reference scan."""
    L = x.shape[1]
    xz = m.in_proj(x).transpose(1, 2)
    u, z = xz.chunk(2, dim=1)
    u = F.silu(m.conv1d(u)[..., :L])
    dt, B, C = m.x_proj(u.transpose(1, 2)).split([m.dt_rank, m.d_state, m.d_state], dim=-1)
    delta = F.linear(dt, m.dt_proj.weight).transpose(1, 2)
    y = reference_scan(
        u,
        delta,
        -torch.exp(m.A_log),
        B.transpose(1, 2),
        C.transpose(1, 2),
        m.D,
        z=z,
        delta_bias=m.dt_proj.bias,
        delta_softplus=True,
    )
    return m.out_proj(y.transpose(1, 2))


def rel_err(a, b):
    """Largest difference relative to the largest magnitude (0 when both are exactly zero)."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


TOL = {torch.float32: 1e-5, torch.float64: 1e-11}


def scan_inputs(batch, d, N, L, dtype, big_delta, seed=0):
    g = torch.Generator().manual_seed(seed)

    def r(*s):
        return torch.randn(*s, generator=g, dtype=dtype)

    # big_delta: softplus(delta) up to ~20, A down to ~-30, so delta*A reaches about -600.
    delta = r(batch, d, L) * (4 if big_delta else 1) + (6 if big_delta else -2)
    A = -torch.exp(r(d, N) * 0.7 + (1.5 if big_delta else 0.5))
    return dict(
        u=r(batch, d, L),
        delta=delta,
        A=A,
        B=r(batch, N, L),
        C=r(batch, N, L),
        D=r(d),
        z=r(batch, d, L),
        delta_bias=r(d) * 0.5,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("big_delta", [False, True])
@pytest.mark.parametrize("options", [True, False], ids=["D-z-bias-softplus", "bare"])
def test_scan_matches_reference_with_gradients(dtype, big_delta, options, monkeypatch):
    # A small work buffer makes the batch of 8 run in blocks of 3, 3 and 2.
    monkeypatch.setattr(mamba_block, "_BLOCK_NUMEL", 3 * 13 * 16 * 24)
    inputs = scan_inputs(8, 24, 16, 13, dtype, big_delta)
    if not options:  # the op's own paths without skip, gate and softplus; delta must be > 0
        inputs = {k: inputs[k] for k in ("u", "delta", "A", "B", "C")}
        inputs["delta"] = F.softplus(inputs["delta"])
    inputs = {k: v.requires_grad_() for k, v in inputs.items()}
    ours = selective_scan(**inputs, delta_softplus=options)
    ref = reference_scan(**inputs, delta_softplus=options)
    assert torch.isfinite(ours).all()
    assert rel_err(ours, ref) < TOL[dtype]
    grad_out = torch.randn_like(ref)
    g_ours = torch.autograd.grad(ours, list(inputs.values()), grad_out)
    g_ref = torch.autograd.grad(ref, list(inputs.values()), grad_out)
    for name, a, b in zip(inputs, g_ours, g_ref):
        assert rel_err(a, b) < TOL[dtype], name


def test_scan_without_optional_arguments():
    x = scan_inputs(2, 8, 4, 5, torch.float64, False)
    args = [x[k] for k in ("u", "delta", "A", "B", "C")]
    assert rel_err(selective_scan(*args), reference_scan(*args)) < 1e-12


@pytest.mark.parametrize("gated", [False, True])
def test_scan_ops_are_well_formed_custom_ops(gated):
    """Schema, fake (meta) kernels and autograd registration, as torch.compile relies on them."""
    g = torch.Generator().manual_seed(0)
    L, b, d, N = 5, 3, 8, 4
    args = [
        torch.randn(L, b, d, generator=g),
        torch.randn(L, b, d, generator=g),
        -torch.rand(d, N, generator=g),
        torch.randn(L, b, N, generator=g),
        torch.randn(L, b, N, generator=g),
    ]
    # D, z and softplus present or absent together
    extra = [torch.randn(d, generator=g), torch.randn(L, b, d, generator=g)] if gated else [None, None]
    gy = torch.randn(L, b, d, generator=g)
    torch.library.opcheck(mamba_block._scan_backward, args + extra + [gated, gy])
    torch.library.opcheck(
        mamba_block._scan, [t.requires_grad_() if t is not None else None for t in args + extra] + [gated]
    )


@pytest.mark.slow
def test_block_under_torch_compile():
    """torch.compile sees the scan as one op (a minute of compiling, hence slow)."""
    torch.manual_seed(0)
    m = Mamba(16)
    x = torch.randn(4, 10, 16, requires_grad=True)
    eager = m(x)
    compiled = torch.compile(m)(x)
    assert rel_err(compiled, eager) < TOL[torch.float32]
    g = torch.randn_like(eager)
    wrt = [x, *m.parameters()]
    for a, b in zip(torch.autograd.grad(compiled, wrt, g), torch.autograd.grad(eager, wrt, g)):
        assert rel_err(a, b) < TOL[torch.float32]


def test_scan_rejects_what_it_does_not_implement():
    x = scan_inputs(2, 8, 4, 5, torch.float32, False)
    with pytest.raises(ValueError):
        selective_scan(x["u"], x["delta"], x["A"], x["B"][:, None], x["C"][:, None])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_matches_mamba_ssm_slow_path(dtype):
    torch.manual_seed(0)
    m = Mamba(16).to(dtype)
    with torch.no_grad():  # move A and D away from their initial values, so their gradients matter
        m.A_log.add_(torch.randn_like(m.A_log) * 0.3)
        m.D.add_(torch.randn_like(m.D) * 0.3)
    x = torch.randn(3, 9, 16, dtype=dtype, requires_grad=True)
    ours, ref = m(x), reference_block(m, x)
    assert ours.shape == x.shape
    assert rel_err(ours, ref) < TOL[dtype]
    grad_out = torch.randn_like(ref)
    wrt = [x, *m.parameters()]
    for a, b in zip(torch.autograd.grad(ours, wrt, grad_out), torch.autograd.grad(ref, wrt, grad_out)):
        assert rel_err(a, b) < TOL[dtype]


@pytest.mark.parametrize("L", [1, 2, 3])
def test_block_on_sequences_shorter_than_the_conv(L):
    torch.manual_seed(0)
    m = Mamba(8).double()
    x = torch.randn(2, L, 8, dtype=torch.float64, requires_grad=True)
    ours, ref = m(x), reference_block(m, x)
    assert rel_err(ours, ref) < TOL[torch.float64]
    grad_out = torch.randn_like(ref)
    wrt = [x, *m.parameters()]
    for a, b in zip(torch.autograd.grad(ours, wrt, grad_out), torch.autograd.grad(ref, wrt, grad_out)):
        assert rel_err(a, b) < TOL[torch.float64]


def test_block_without_autograd_runs_in_chunks_of_the_batch(monkeypatch):
    monkeypatch.setattr(mamba_block, "_PREDICT_CHUNK", 2)  # a batch of 5: chunks of 2, 2 and 1
    torch.manual_seed(0)
    m = Mamba(16)
    x = torch.randn(5, 9, 16)
    with torch.no_grad():
        ours = m(x)
    assert rel_err(ours, reference_block(m, x)) < TOL[torch.float32]


# mamba_ssm.modules.mamba_simple.Mamba(d_model).state_dict(): keys in order (nn.Module lists a
# module's own parameters, A_log and D, before its submodules'), with their shapes.
MAMBA_SSM_STATE = {
    64: [
        ("A_log", (128, 16)),
        ("D", (128,)),
        ("in_proj.weight", (256, 64)),
        ("conv1d.weight", (128, 1, 4)),
        ("conv1d.bias", (128,)),
        ("x_proj.weight", (36, 128)),
        ("dt_proj.weight", (128, 4)),
        ("dt_proj.bias", (128,)),
        ("out_proj.weight", (64, 128)),
    ],
    256: [
        ("A_log", (512, 16)),
        ("D", (512,)),
        ("in_proj.weight", (1024, 256)),
        ("conv1d.weight", (512, 1, 4)),
        ("conv1d.bias", (512,)),
        ("x_proj.weight", (48, 512)),
        ("dt_proj.weight", (512, 16)),
        ("dt_proj.bias", (512,)),
        ("out_proj.weight", (256, 512)),
    ],
}


@pytest.mark.parametrize("d_model", sorted(MAMBA_SSM_STATE))
def test_state_dict_is_mamba_ssm_s(d_model):
    m = Mamba(d_model)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == MAMBA_SSM_STATE[d_model]
    theirs = {k: torch.randn(s) for k, s in MAMBA_SSM_STATE[d_model]}
    m.load_state_dict(theirs, strict=True)
    assert torch.equal(m.A_log, theirs["A_log"])


def test_initialisation_is_mamba_ssm_s():
    torch.manual_seed(0)
    m = Mamba(64, dt_min=0.001, dt_max=0.1)
    assert m.A_log.dtype == m.D.dtype == torch.float32
    assert torch.equal(m.A_log, torch.log(torch.arange(1, 17, dtype=torch.float32)).expand(128, 16))
    assert torch.equal(m.D, torch.ones(128))
    dt = F.softplus(m.dt_proj.bias.detach())
    assert dt.min() >= 0.001 * (1 - 1e-4) and dt.max() <= 0.1 * (1 + 1e-4)
    assert dt.log().std() > 0.5 * (math.log(0.1) - math.log(0.001)) / math.sqrt(12)  # spread log-uniformly
    assert m.dt_proj.weight.abs().max() <= m.dt_rank**-0.5
    assert m.dt_rank == 4 and Mamba(65).dt_rank == 5


def test_rmsnorm():
    n = RMSNorm(6)
    assert list(n.state_dict()) == ["weight"]
    with torch.no_grad():
        n.weight.uniform_()
    x = torch.randn(3, 4, 6)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * n.weight
    assert rel_err(n(x), ref) < 1e-6


def mamba_inner_ref(
    xz,
    conv1d_weight,
    conv1d_bias,
    x_proj_weight,
    delta_proj_weight,
    out_proj_weight,
    out_proj_bias,
    A,
    B=None,
    C=None,
    D=None,
    delta_bias=None,
    delta_softplus=True,
):
    """mamba-ssm's mamba_inner_fn (its mamba_inner_ref), for xz (batch, 2*d_inner, L)."""
    L, rank, N = xz.shape[-1], delta_proj_weight.shape[1], A.shape[1]
    x, z = xz.chunk(2, dim=1)
    x = F.silu(F.conv1d(x, conv1d_weight, conv1d_bias, padding=conv1d_weight.shape[-1] - 1, groups=x.shape[1])[..., :L])
    x_dbl = F.linear(x.transpose(1, 2), x_proj_weight)  # (b, L, rank + 2N)
    delta = F.linear(x_dbl[..., :rank], delta_proj_weight).transpose(1, 2)
    B, C = x_dbl[..., rank : rank + N].transpose(1, 2), x_dbl[..., rank + N :].transpose(1, 2)
    y = reference_scan(x, delta, A, B, C, D, z=z, delta_bias=delta_bias, delta_softplus=delta_softplus)
    return F.linear(y.transpose(1, 2), out_proj_weight, out_proj_bias)


@pytest.mark.parametrize("inner", [False, True], ids=["selective_scan_fn", "mamba_inner_fn"])
def test_mamba_ssm_path_computes_the_same(inner, monkeypatch):
    """The CUDA path's calls into mamba-ssm, with mamba-ssm's functions replaced by references."""
    torch.manual_seed(0)
    m = Mamba(16)  # float32: mamba-ssm's path casts A, D and the dt bias to float32
    x = torch.randn(3, 9, 16)
    ours = m(x)
    monkeypatch.setattr(mamba_block, "_mamba_ssm_ops", lambda t: (reference_scan, mamba_inner_ref if inner else None))
    assert rel_err(m(x), ours) < TOL[torch.float32]


def test_mamba_ssm_is_not_used_on_cpu():
    assert mamba_block._mamba_ssm_ops(torch.zeros(1)) is None
