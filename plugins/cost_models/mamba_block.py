"""A pure-torch Mamba block (the selective state-space layer of Gu & Dao, 2023) for CPUs.

mamba-ssm has no CPU path (its kernels are CUDA only), so the cost model needs its own block. This one
has mamba-ssm's ``Mamba`` parameter names, shapes and initialisation, so a state dict moves
between the two in both directions; when the input is on CUDA and mamba-ssm imports, the block
calls mamba-ssm's fused kernels instead of the code below.

The expensive part on a CPU is the scan. With ``d_inner`` channels, ``d_state`` states and
``L`` steps it touches ``batch * L * d_inner * d_state`` numbers, and eager torch makes one pass
over them per op: the forward needs about nine passes' worth of memory traffic (decay, its
exp2, the input term, the recurrence, C . h), the backward about 24. So the layout is chosen
to keep those passes few and cache-friendly:

* The recurrence runs time-major, ``(L, batch, d_state, d_inner)``, so each step is one in-place
  ``addcmul_`` on a contiguous slice, in blocks of the batch whose working set stays in cache;
  buffers are allocated once per call and reused by every block.
* Operands are contiguous along d_inner (``A.t()`` is not, and a broadcast product with a
  strided operand is much slower).
* The backward is written by hand and recomputes the states of one batch block at a time
  instead of letting autograd keep every step's ``(batch, d_inner, d_state)`` tensors.
* The skip term ``D*u``, the gate ``silu(z)`` and the softplus of delta are inside the op, so
  autograd keeps none of their (L, batch, d_inner) intermediates.
* Without autograd (prediction) the block runs 64 sequences at a time, so intermediates die
  per chunk.
* ``exp2`` of pre-scaled exponents instead of ``exp``, which is the slower of the two for
  float32 on x86 CPUs.
* Contractions are ``bmm`` with a single-row left operand (``(1, k) @ (k, n)``), the fast form
  of MKL's batched GEMM; sums over the state index and over (time, batch) are such products
  with a row of ones.

The measured speed and memory, and the alternatives tried and dropped (a chunked log-space
scan, which overflows float32; Mamba-2's segsum form, which is no matrix product here because
the decay depends on the state index; ``torch.pow`` for the decay; other buffer layouts;
keeping the forward's decays for the backward; torch.compile), with their figures, are in
docs/cost-models.md.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Mamba", "RMSNorm", "selective_scan"]

_LOG2E = 1.0 / math.log(2.0)
# Numbers per (L, block, d_state, d_inner) work buffer (2 MiB of float32; the backward keeps
# four). Measured at batch 512, L 25: blocks of 2-16 sequences were within ~20% of each other at
# d_inner 128 and 512; one block of all 512 was 1.5x slower (the buffers leave the caches).
_BLOCK_NUMEL = 1 << 19
# Sequences per chunk of a forward without autograd (prediction); 32-256 were within noise.
_PREDICT_CHUNK = 64


def _block_size(L: int, batch: int, d_state: int, d_inner: int) -> int:
    return max(1, min(batch, _BLOCK_NUMEL // (L * d_state * d_inner)))


def _states(x, delta, A2, B, dA, H, dAs, Hs) -> None:
    """Fill ``dA`` with exp(delta*A) and ``H`` with the states h_t of one batch block.

    x = delta*u, delta: (L, n, d); A2: (N, d) contiguous, A.T * log2(e); B: (L, n, N); dA, H:
    (L, n, N, d) buffers, dAs, Hs their per-step views (made once per buffer shape, not per block).
    h_t = exp(delta_t*A) * h_{t-1} + x_t*B_t with h_{-1} = 0. Every exponent is <= 0.
    """
    torch.mul(delta.unsqueeze(2), A2, out=dA).exp2_()
    torch.mul(x.unsqueeze(2), B.unsqueeze(-1), out=H)
    for t in range(1, len(Hs)):
        Hs[t].addcmul_(dAs[t], Hs[t - 1])


def _blocks(like: torch.Tensor, bb: int, N: int, count: int):
    """(batch slice, ``count`` contiguous (L, n, N, d) work buffers, their per-step views) for
    each block of ``bb`` sequences of the time-major ``like`` (L, b, d).

    The buffers are allocated once and reused by every block (fresh multi-MB tensors per op cost
    page faults); a shorter last block takes the front of their storage, so it stays contiguous.
    """
    L, b, d = like.shape
    flat = [like.new_empty(L * bb * N * d) for _ in range(count)]
    views = {}
    for i in range(0, b, bb):
        n = min(bb, b - i)
        if n not in views:
            bufs = [f[: L * n * N * d].view(L, n, N, d) for f in flat]
            views[n] = bufs, [buf.unbind(0) for buf in bufs]
        yield (slice(i, i + n), *views[n])


def _decay_exponents(A: torch.Tensor) -> torch.Tensor:
    """A.T * log2(e), (N, d) and contiguous: ``exp2`` of it times delta is exp(delta*A).

    Contiguous matters: ``A.t()`` is strided along d, and the broadcast product with delta that
    fills the (L, n, N, d) decay buffer then ran 3x slower than with a contiguous operand.
    """
    return A.t().mul(_LOG2E).contiguous()


def _delta(delta: torch.Tensor, softplus: bool) -> torch.Tensor:
    """delta as the scan uses it, for one block (recomputed in the backward: cheaper than keeping it)."""
    return F.softplus(delta) if softplus else delta


@torch.library.custom_op("tcl::selective_scan", mutates_args=())
def _scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: Optional[torch.Tensor],
    z: Optional[torch.Tensor],
    delta_softplus: bool,
) -> torch.Tensor:
    """``(C_t . h_t + D*u_t) * silu(z_t)`` for time-major u, delta, z (L, b, d), B, C (L, b, N),
    A (d, N) < 0 and D (d,); delta goes through softplus first if ``delta_softplus``.

    The skip term, the gate and the softplus are inside the op, computed block by block like the
    scan, so that neither autograd nor the op holds any (L, b, d) intermediate of theirs.
    A custom op rather than an autograd.Function so that torch.compile treats it as one opaque
    call: traced, its Python loops unroll into a graph that is slow to compile and to run.
    """
    B, C = B.contiguous(), C.contiguous()
    L, b, d = u.shape
    N = A.shape[1]
    A2 = _decay_exponents(A)
    y = u.new_empty(L, b, d)
    for s, (dA, H), (dAs, Hs) in _blocks(u, _block_size(L, b, N, d), N, 2):
        n = H.shape[1]
        ub, db = u[:, s], _delta(delta[:, s], delta_softplus)
        _states(db * ub, db, A2, B[:, s], dA, H, dAs, Hs)
        yb = torch.bmm(C[:, s].reshape(L * n, 1, N), H.view(L * n, N, d)).view(L, n, d)
        if D is not None:
            yb.addcmul_(ub, D)
        if z is not None:
            yb.mul_(F.silu(z[:, s]))
        y[:, s] = yb
    return y


@torch.library.custom_op("tcl::selective_scan_backward", mutates_args=())
def _scan_backward(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: Optional[torch.Tensor],
    z: Optional[torch.Tensor],
    delta_softplus: bool,
    gy: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of ``_scan`` w.r.t. (u, delta, A, B, C, D, z), recomputing the states (and the
    softplus, and the output before the gate) block by block; those of an absent D or z are empty.

    Sums over the state index and over (time, batch) are ``bmm``/``mm`` with a row of ones: 10-30%
    faster than ``Tensor.sum`` over those dimensions.
    """
    B, C = B.contiguous(), C.contiguous()
    L, b, d = u.shape
    N = A.shape[1]
    At = A.t().contiguous()
    A2 = _decay_exponents(A)
    du, ddelta, dB, dC = torch.empty_like(u), torch.empty_like(u), torch.empty_like(B), torch.empty_like(C)
    dAt = torch.zeros_like(At)
    dD = torch.zeros_like(D) if D is not None else u.new_empty(0)
    dz = torch.empty_like(u) if z is not None else u.new_empty(0)
    bb = _block_size(L, b, N, d)
    ones = u.new_ones(1, max(N, (L - 1) * bb))
    for s, (dA, H, G, T), (dAs, Hs, Gs, _) in _blocks(u, bb, N, 4):
        n = H.shape[1]
        ub, Bb, Cb, g = u[:, s], B[:, s], C[:, s], gy[:, s]
        db = _delta(delta[:, s], delta_softplus)
        xb = db * ub
        _states(xb, db, A2, Bb, dA, H, dAs, Hs)
        Hf = H.view(L * n, N, d)
        if z is not None:  # the gate's gradient needs the output before it, C . h + D*u
            zb = z[:, s]
            yb = torch.bmm(Cb.reshape(L * n, 1, N), Hf).view(L, n, d)
            if D is not None:
                yb.addcmul_(ub, D)
            dz[:, s] = torch.ops.aten.silu_backward(yb.mul_(g), zb)
            g = g * F.silu(zb)  # now the gradient of C . h + D*u
        # Adjoint states: lambda_t = C_t * g_t + exp(delta_{t+1}*A) * lambda_{t+1}.
        torch.mul(g.unsqueeze(2), Cb.unsqueeze(-1), out=G)
        for t in range(L - 2, -1, -1):
            Gs[t].addcmul_(dAs[t + 1], Gs[t + 1])
        Gf = G.view(L * n, N, d)
        dC[:, s] = torch.bmm(g.reshape(L * n, 1, d), Hf.transpose(1, 2)).view(L, n, N)
        dB[:, s] = torch.bmm(xb.reshape(L * n, 1, d), Gf.transpose(1, 2)).view(L, n, N)
        lb = torch.bmm(Bb.reshape(L * n, 1, N), Gf).view(L, n, d)  # sum_n lambda * B
        dub = lb * db
        if D is not None:
            dub.addcmul_(g, D)
            dD += (g * ub).sum((0, 1))
        du[:, s] = dub
        ddt = lb.mul_(ub)
        # Gradient of the log-decay delta_t*A: lambda_t * exp(delta_t*A) * h_{t-1} (zero at t=0),
        # built in the decay buffer, which the adjoint no longer needs.
        m = (L - 1) * n
        P = dA[1:].mul_(G[1:]).mul_(H[:-1])
        PA = torch.mul(P, At, out=T[1:]).view(m, N, d)
        ddt[1:] += torch.bmm(ones[:, :N].expand(m, 1, N), PA).view(L - 1, n, d)
        dAt += torch.mm(ones[:, :m], P.mul_(db[1:].unsqueeze(2)).view(m, N * d)).view(N, d)
        ddelta[:, s] = torch.ops.aten.softplus_backward(ddt, delta[:, s], 1.0, 20.0) if delta_softplus else ddt
    return du, ddelta, dAt.t().contiguous(), dB, dC, dD, dz


@_scan.register_fake
def _(u, delta, A, B, C, D, z, delta_softplus):
    return u.new_empty(u.shape)


@_scan_backward.register_fake
def _(u, delta, A, B, C, D, z, delta_softplus, gy):
    def like(t):
        return t.new_empty(t.shape) if t is not None else u.new_empty(0)

    return like(u), like(u), like(A), like(B), like(C), like(D), like(z)


def _scan_setup_context(ctx, inputs, output):
    *tensors, ctx.delta_softplus = inputs
    ctx.save_for_backward(*tensors)


def _scan_autograd(ctx, gy):
    u, delta, A, B, C, D, z = ctx.saved_tensors
    grads = _scan_backward(u, delta, A, B, C, D, z, ctx.delta_softplus, gy)
    return *grads[:5], grads[5] if D is not None else None, grads[6] if z is not None else None, None


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
    tm = lambda t: t.permute(2, 0, 1) if t is not None else None  # noqa: E731  (time-major view)
    return _scan(tm(u), tm(delta), A, tm(B), tm(C), D, tm(z), delta_softplus).permute(1, 2, 0)


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
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 16,
        d_conv: int = 4,
        expand: int = 2,
        dt_rank="auto",
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_init: str = "random",
        dt_scale: float = 1.0,
        dt_init_floor: float = 1e-4,
        conv_bias: bool = True,
        bias: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=bias, **kw)
        self.conv1d = nn.Conv1d(
            self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1, bias=conv_bias, **kw
        )
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
        std = self.dt_rank**-0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, std)
        elif dt_init == "random":
            nn.init.uniform_(self.dt_proj.weight, -std, std)
        else:
            raise ValueError(f"dt_init must be 'random' or 'constant', not {dt_init!r}")
        w = self.dt_proj.bias
        dt = torch.exp(
            torch.rand(self.d_inner, device=w.device) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        ).clamp(min=dt_init_floor)
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse of softplus
        self.A_log.copy_(
            torch.log(torch.arange(1, self.d_state + 1, dtype=torch.float32, device=w.device)).repeat(self.d_inner, 1)
        )
        self.D.fill_(1.0)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        ops = _mamba_ssm_ops(hidden_states)
        if ops is not None:
            return self._forward_mamba_ssm(hidden_states, *ops)
        if not torch.is_grad_enabled() and hidden_states.shape[0] > _PREDICT_CHUNK:
            # Sequences are independent; without autograd, a chunk's intermediates die before the
            # next chunk starts: less than half the peak memory at batch 512, and no slower.
            return torch.cat([self(part) for part in hidden_states.split(_PREDICT_CHUNK)])
        xz = self.in_proj(hidden_states.transpose(0, 1))  # time-major (L, batch, 2*d_inner)
        x, z = xz.chunk(2, dim=-1)
        x = F.silu(self._causal_conv(x))
        dt, B, C = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        y = _scan(x, self.dt_proj(dt), -torch.exp(self.A_log.to(x.dtype)), B, C, self.D.to(x.dtype), z, True)
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
            out[shift:].addcmul_(x[: L - shift], w[:, K - 1 - shift])
        return out

    def _forward_mamba_ssm(self, hidden_states, selective_scan_fn, mamba_inner_fn):
        """mamba-ssm's own forward (use_fast_path=True when causal-conv1d is there)."""
        L = hidden_states.shape[1]
        xz = self.in_proj(hidden_states).transpose(1, 2)  # (batch, 2*d_inner, L)
        A = -torch.exp(self.A_log.float())
        if mamba_inner_fn is not None:
            return mamba_inner_fn(
                xz,
                self.conv1d.weight,
                self.conv1d.bias,
                self.x_proj.weight,
                self.dt_proj.weight,
                self.out_proj.weight,
                self.out_proj.bias,
                A,
                None,
                None,
                self.D.float(),
                delta_bias=self.dt_proj.bias.float(),
                delta_softplus=True,
            )
        x, z = xz.chunk(2, dim=1)
        x = F.silu(self.conv1d(x)[..., :L])
        dt, B, C = self.x_proj(x.transpose(1, 2)).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.linear(dt, self.dt_proj.weight).transpose(1, 2)
        y = selective_scan_fn(
            x,
            delta,
            A,
            B.transpose(1, 2).contiguous(),
            C.transpose(1, 2).contiguous(),
            self.D.float(),
            z=z,
            delta_bias=self.dt_proj.bias.float(),
            delta_softplus=True,
        )
        return self.out_proj(y.transpose(1, 2))
