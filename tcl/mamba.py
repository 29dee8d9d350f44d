"""A pure-torch Mamba block (the selective state-space layer of Gu & Dao, 2023) for CPUs.

mamba-ssm has no CPU path (DESIGN.md section 2), so the cost model needs its own block. This one
has mamba-ssm's ``Mamba`` parameter names, shapes and initialisation, so a state dict moves
between the two in both directions; when the input is on CUDA and mamba-ssm imports, the block
calls mamba-ssm's fused kernels instead of the code below.

The expensive part on a CPU is the scan. With ``d_inner`` channels, ``d_state`` states and
``L`` steps it touches ``batch * L * d_inner * d_state`` numbers (105 M for batch 512, L 25,
d_model 256), several times forward and backward. What made it fast here:

* The recurrence runs time-major, ``(L, batch, d_state, d_inner)``, so each step is one in-place
  ``addcmul_`` on a contiguous slice, in blocks of the batch whose working set stays in cache;
  buffers are allocated once per call and reused by every block (fresh multi-MB tensors per
  op cost page faults).
* The backward is written by hand and recomputes the states of one batch block at a time
  instead of letting autograd keep every step's ``(batch, d_inner, d_state)`` tensors.
* ``exp2`` of pre-scaled exponents instead of ``exp``: on this AMD EPYC, ``torch.exp`` on float32
  is 4x slower than ``torch.exp2`` (0.80 vs 0.20 ms for 1.6 M numbers).
* Contractions are ``bmm`` with a single-row left operand (``(1, k) @ (k, n)``); the transposed
  form ``(n, k) @ (k, 1)`` is 15x slower in MKL's batched GEMM.

Measured (benchmarks/bench_mamba_speed.py, batch 512, L 25, one Mamba layer): a training step
takes 0.6-0.7x the time of the plain loop-over-time scan, with a third of its memory, but about
2x that of TLP's attention model. At d_model 256 part of that is structural: with a free scan
the model still trained 1.5x slower than attention (expand 2 gives the block 1.6x attention's
matmul work). At d_model 64 a free scan matched attention, so there the gap is the scan's ~30
passes over its 4-D numbers, which eager torch cannot fuse.

Tried and dropped:

* A chunked "segsum" form (Mamba-2's SSD): the decay ``exp(delta*A)`` depends on the state
  index here, so the ``L x L`` kernel is no matrix product; it has ``(L+1)/2`` times the
  elementwise work of the recurrence and a ``(batch, d_inner, d_state, L, L)`` intermediate.
* Keeping exp(delta*A) and the states from the forward for the backward: 2 x 420 MB at
  d_model 256, and a version that did was no faster than recomputing a block at a time.
* torch.compile of the scan alone (inductor fuses the forward recurrence into one loop): 2x
  faster inference at d_inner 128, no faster training at d_inner 512, and 30-60 s of compiling
  per shape. ``torch.compile`` of a whole model works (the scan stays one opaque op) but gained
  nothing for training here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Mamba", "RMSNorm", "selective_scan"]

_LOG2E = 1.0 / math.log(2.0)
# Numbers per (L, block, d_state, d_inner) work buffer (2 MiB of float32; the backward keeps
# four). Measured at batch 512, L 25: blocks of 2-16 sequences were within ~20% of each other at
# d_inner 128 and 512; one block of all 512 was 1.5x slower (the buffers leave the caches).
_BLOCK_NUMEL = 1 << 19


def _block_size(L: int, batch: int, d_state: int, d_inner: int) -> int:
    return max(1, min(batch, _BLOCK_NUMEL // (L * d_state * d_inner)))


def _states(u, delta, A2, B, dA, H) -> None:
    """Fill ``dA`` with exp(delta*A) and ``H`` with the states h_t of one batch block.

    u, delta: (L, n, d); A2: (N, d), A.T * log2(e); B: (L, n, N); dA, H: (L, n, N, d) buffers.
    h_t = exp(delta_t*A) * h_{t-1} + delta_t*u_t*B_t with h_{-1} = 0. Every exponent is <= 0.
    """
    torch.mul(delta.unsqueeze(2), A2, out=dA).exp2_()
    torch.mul((delta * u).unsqueeze(2), B.unsqueeze(-1), out=H)
    dAs, Hs = dA.unbind(0), H.unbind(0)  # one call for all steps' views (indexing each costs more)
    for t in range(1, len(Hs)):
        Hs[t].addcmul_(dAs[t], Hs[t - 1])


@torch.library.custom_op("tcl::selective_scan", mutates_args=())
def _scan(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """y_t = C_t . h_t for time-major u, delta (L, b, d), B, C (L, b, N) and A (d, N) < 0.

    A custom op rather than an autograd.Function so that torch.compile treats it as one opaque
    call: traced, its Python loops unroll into a graph that took 80 s to compile and ran slower.
    """
    u, delta, B, C = u.contiguous(), delta.contiguous(), B.contiguous(), C.contiguous()
    L, b, d = u.shape
    N = A.shape[1]
    A2 = A.t().mul(_LOG2E)
    bb = _block_size(L, b, N, d)
    dA = u.new_empty(L, bb, N, d)
    H = torch.empty_like(dA)
    y = u.new_empty(L, b, d)
    for i in range(0, b, bb):
        s, n = slice(i, i + bb), min(bb, b - i)
        dAb, Hb = dA[:, :n], H[:, :n]
        _states(u[:, s], delta[:, s], A2, B[:, s], dAb, Hb)
        y[:, s] = torch.bmm(C[:, s].reshape(L * n, 1, N), Hb.reshape(L * n, N, d)).view(L, n, d)
    return y


@torch.library.custom_op("tcl::selective_scan_backward", mutates_args=())
def _scan_backward(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   gy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of ``_scan`` w.r.t. (u, delta, A, B, C), recomputing the states block by block."""
    u, delta, B, C, gy = u.contiguous(), delta.contiguous(), B.contiguous(), C.contiguous(), gy.contiguous()
    L, b, d = u.shape
    N = A.shape[1]
    At = A.t()
    A2 = At.mul(_LOG2E)
    du, ddelta, dB, dC = torch.empty_like(u), torch.empty_like(delta), torch.empty_like(B), torch.empty_like(C)
    dAt = torch.zeros_like(At)
    bb = _block_size(L, b, N, d)
    dA = u.new_empty(L, bb, N, d)
    H, G, T = torch.empty_like(dA), torch.empty_like(dA), torch.empty_like(dA)
    for i in range(0, b, bb):
        s, n = slice(i, i + bb), min(bb, b - i)
        dAb, Hb, Gb, Tb = dA[:, :n], H[:, :n], G[:, :n], T[:, :n]
        ub, db, Bb, Cb, g = u[:, s], delta[:, s], B[:, s], C[:, s], gy[:, s]
        _states(ub, db, A2, Bb, dAb, Hb)
        # Adjoint states: lambda_t = C_t * gy_t + exp(delta_{t+1}*A) * lambda_{t+1}.
        torch.mul(g.unsqueeze(2), Cb.unsqueeze(-1), out=Gb)
        dAs, Gs = dAb.unbind(0), Gb.unbind(0)
        for t in range(L - 2, -1, -1):
            Gs[t].addcmul_(dAs[t + 1], Gs[t + 1])
        Hf, Gf = Hb.reshape(L * n, N, d), Gb.reshape(L * n, N, d)
        dC[:, s] = torch.bmm(g.reshape(L * n, 1, d), Hf.transpose(1, 2)).view(L, n, N)
        dB[:, s] = torch.bmm((db * ub).reshape(L * n, 1, d), Gf.transpose(1, 2)).view(L, n, N)
        lb = torch.bmm(Bb.reshape(L * n, 1, N), Gf).view(L, n, d)  # sum_n lambda * B
        torch.mul(lb, db, out=du[:, s])
        torch.mul(lb, ub, out=ddelta[:, s])
        # Gradient of the log-decay delta_t*A: lambda_t * exp(delta_t*A) * h_{t-1} (zero at t=0).
        W = Hb[:-1].mul_(Gb[1:]).mul_(dAb[1:])
        ddelta[1:, s] += torch.mul(W, At, out=Tb[:-1]).sum(2)
        dAt += torch.mul(W, db[1:].unsqueeze(2), out=Tb[:-1]).sum((0, 1))
    return du, ddelta, dAt.t().contiguous(), dB, dC


@_scan.register_fake
def _(u, delta, A, B, C):
    return u.new_empty(u.shape)


@_scan_backward.register_fake
def _(u, delta, A, B, C, gy):
    return u.new_empty(u.shape), u.new_empty(u.shape), A.new_empty(A.shape), B.new_empty(B.shape), C.new_empty(C.shape)


def _scan_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _scan_autograd(ctx, gy):
    return _scan_backward(*ctx.saved_tensors, gy)


_scan.register_autograd(_scan_autograd, setup_context=_scan_setup_context)


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """The selective scan with mamba-ssm's ``selective_scan_fn`` arguments and layout.

    u, delta, z: (batch, d, L); A: (d, N), real; B, C: (batch, N, L); D, delta_bias: (d,).
    Returns (batch, d, L): ``(C . h + D*u) * silu(z)`` where ``h_t = exp(delta_t*A) h_{t-1} +
    delta_t B_t u_t`` and ``delta = softplus(delta + delta_bias)`` if asked. Grouped or constant
    B/C and complex A (which mamba-ssm also accepts) are not supported. On CUDA with mamba-ssm
    installed it calls mamba-ssm's kernel.
    """
    if B.dim() != 3 or C.dim() != 3 or A.is_complex():
        raise ValueError("selective_scan supports real A (d, N) and input-dependent B, C (batch, N, L) only")
    ops = _mamba_ssm_ops(u)
    if ops is not None:
        return ops[0](u, delta, A, B, C, D, z=z, delta_bias=delta_bias, delta_softplus=delta_softplus)
    if delta_bias is not None:
        delta = delta + delta_bias.unsqueeze(-1)
    if delta_softplus:
        delta = F.softplus(delta)
    y = _scan(u.permute(2, 0, 1), delta.permute(2, 0, 1), A, B.permute(2, 0, 1), C.permute(2, 0, 1))
    y = y.permute(1, 2, 0)
    if D is not None:
        y = y + u * D.unsqueeze(-1)
    if z is not None:
        y = y * F.silu(z)
    return y


_MAMBA_SSM = None


def _mamba_ssm_ops(x: torch.Tensor):
    """mamba-ssm's (selective_scan_fn, mamba_inner_fn or None) for a CUDA tensor, else None.

    Imported on first use: importing mamba-ssm is slow and fails without its CUDA extension.
    ``mamba_inner_fn`` also needs causal-conv1d.
    """
    global _MAMBA_SSM
    if not x.is_cuda:
        return None
    if _MAMBA_SSM is None:
        try:
            from mamba_ssm.ops.selective_scan_interface import mamba_inner_fn, selective_scan_fn
        except Exception:  # ImportError, or OSError/RuntimeError from the compiled extension
            _MAMBA_SSM = False
        else:
            try:
                import causal_conv1d  # noqa: F401  (mamba_inner_fn needs it)
            except Exception:
                mamba_inner_fn = None
            _MAMBA_SSM = (selective_scan_fn, mamba_inner_fn)
    return _MAMBA_SSM or None


class RMSNorm(nn.Module):
    """RMS normalisation with a learned scale ``weight`` (mamba-ssm's RMSNorm, eps 1e-5)."""

    def __init__(self, d: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


class Mamba(nn.Module):
    """Mamba block: (batch, L, d_model) -> (batch, L, d_model), mamba-ssm's parameters.

    in_proj -> (x, z); x -> causal depthwise conv1d -> silu -> x_proj -> (dt, B, C);
    delta = softplus(dt_proj(dt)); y = scan(x, delta, A=-exp(A_log), B, C) + D*x; y *= silu(z);
    out_proj(y). The constructor arguments and defaults are mamba-ssm's, less ``use_fast_path``
    and ``layer_idx``: there is no step-by-step decoding cache.

    ``scan`` is the time-major scan ``(u, delta, A, B, C) -> y``; a subclass may swap it (the
    speed benchmark does, to time the plain loop).
    """

    scan = staticmethod(_scan)

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: int = 2, dt_rank="auto",
                 dt_min: float = 0.001, dt_max: float = 0.1, dt_init: str = "random", dt_scale: float = 1.0,
                 dt_init_floor: float = 1e-4, conv_bias: bool = True, bias: bool = False, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=bias, **kw)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1,
                                bias=conv_bias, **kw)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False, **kw)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True, **kw)
        self.A_log = nn.Parameter(torch.empty(self.d_inner, d_state, device=device, dtype=torch.float32))
        self.D = nn.Parameter(torch.empty(self.d_inner, device=device, dtype=torch.float32))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **kw)
        self.A_log._no_weight_decay = True
        self.D._no_weight_decay = True
        self.dt_proj.bias._no_reinit = True
        self._init_ssm(dt_min, dt_max, dt_init, dt_scale, dt_init_floor)

    @torch.no_grad()
    def _init_ssm(self, dt_min, dt_max, dt_init, dt_scale, dt_init_floor) -> None:
        """mamba-ssm's scheme: dt_proj keeps the variance; softplus(dt bias) ~ log-uniform in
        [dt_min, dt_max]; A = -(1..d_state) on every channel (S4D-real); D = 1."""
        std = self.dt_rank ** -0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, std)
        elif dt_init == "random":
            nn.init.uniform_(self.dt_proj.weight, -std, std)
        else:
            raise ValueError(f"dt_init must be 'random' or 'constant', not {dt_init!r}")
        w = self.dt_proj.bias
        dt = torch.exp(torch.rand(self.d_inner, device=w.device) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min)).clamp(min=dt_init_floor)
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse of softplus
        self.A_log.copy_(torch.log(torch.arange(1, self.d_state + 1, dtype=torch.float32, device=w.device))
                         .repeat(self.d_inner, 1))
        self.D.fill_(1.0)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        ops = _mamba_ssm_ops(hidden_states)
        if ops is not None:
            return self._forward_mamba_ssm(hidden_states, *ops)
        xz = self.in_proj(hidden_states.transpose(0, 1))  # time-major (L, batch, 2*d_inner)
        x, z = xz.chunk(2, dim=-1)
        x = F.silu(self._causal_conv(x))
        dt, B, C = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))
        y = self.scan(x, delta, -torch.exp(self.A_log.to(x.dtype)), B, C)
        y = (y + x * self.D.to(x.dtype)) * F.silu(z)
        return self.out_proj(y).transpose(0, 1).contiguous()

    def _causal_conv(self, x: torch.Tensor) -> torch.Tensor:
        """conv1d(x)[:L] on time-major x (L, batch, d_inner): out_t = bias + sum_k w_k x_{t-K+1+k}.

        Same numbers as ``self.conv1d`` (padding d_conv-1, first L outputs) without moving the
        channels next to time as nn.Conv1d needs; in-place shifted ``addcmul_`` beat both
        nn.Conv1d on a transposed copy and out-of-place shifted sums.
        """
        L, K = x.shape[0], self.d_conv
        w = self.conv1d.weight[:, 0, :]  # (d_inner, K)
        bias = self.conv1d.bias if self.conv1d.bias is not None else x.new_zeros(())
        out = torch.addcmul(bias, x, w[:, K - 1])
        for shift in range(1, min(K, L)):
            out[shift:].addcmul_(x[:L - shift], w[:, K - 1 - shift])
        return out

    def _forward_mamba_ssm(self, hidden_states, selective_scan_fn, mamba_inner_fn):
        """mamba-ssm's own forward (use_fast_path=True when causal-conv1d is there)."""
        L = hidden_states.shape[1]
        xz = self.in_proj(hidden_states).transpose(1, 2)  # (batch, 2*d_inner, L)
        A = -torch.exp(self.A_log.float())
        if mamba_inner_fn is not None:
            return mamba_inner_fn(xz, self.conv1d.weight, self.conv1d.bias, self.x_proj.weight,
                                  self.dt_proj.weight, self.out_proj.weight, self.out_proj.bias, A, None, None,
                                  self.D.float(), delta_bias=self.dt_proj.bias.float(), delta_softplus=True)
        x, z = xz.chunk(2, dim=1)
        x = F.silu(self.conv1d(x)[..., :L])
        dt, B, C = self.x_proj(x.transpose(1, 2)).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.linear(dt, self.dt_proj.weight).transpose(1, 2)
        y = selective_scan_fn(x, delta, A, B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous(),
                              self.D.float(), z=z, delta_bias=self.dt_proj.bias.float(), delta_softplus=True)
        return self.out_proj(y.transpose(1, 2))
