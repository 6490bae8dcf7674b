"""PyTorch modules whose forward and backward run in libposenc (CPU, float32).

    import torch, posenc.torch as pt
    att = pt.Attention(dim=64, heads=4, method="rope", causal=True)
    y = att(x)                      # x [B, T, 64] or [T, 64]; positions=..., need_weights=...
    y.sum().backward()              # .grad of wq..wo, bq..bo and the method's tensors

Attention is one self-attention layer of the contract (doc/spec/conformance.md) that owns
its projections (PyTorch Linear layout) and its method's tensors, created under the
contract's names (att.wq, att.rel_bias, att.pos_table, ...). Encoders (SinusoidalEncoding,
LearnedEncoding, FloaterEncoding, ComplexEmbedding, and Encoding for any absolute method)
compute an absolute method's encoding alone. `attend` and `embed` are the differentiable
functional forms of posenc.attend and posenc.embed.

Attention and attention() run one library layer per call (the fast path): the fused kernels
wherever the method has them, scores and probabilities only with need_weights=True (they cost
the T x Tk path), and backward reads what that layer saved in forward (nothing is recomputed;
a module may be called any number of times before backward, each call keeping its own layer).
Contiguous float32 tensors are passed to the library as they are, without a copy; the library's
threads follow torch.get_num_threads(). attend and embed (and complex's two streams) go through
the contract's entry point, which recomputes the forward in backward. Tensors must be on the
CPU; the library computes in float32: float64 inputs are accepted and their results and
gradients returned in float64, but computed in float32 (torch.autograd.gradcheck at its default
float64 tolerances will not pass; compare with float32 tolerances, as tests/python does).

Initialisation (each method's reference, as the library describes it in pe_param_spec.init, the
one description the trainer draws from too; projections as torch.nn.Linear):
  learned   pos_table ~ N(0, 0.02)                          BERT (initializer_range)
  shaw      rel_k, rel_v ~ U(+-sqrt(3 / (2K+1)))            tensor2tensor uniform_unit_scaling
  t5        rel_bias ~ N(0, dim^-1/2)                       HF T5PreTrainedModel._init_weights
  alibi     alibi_slopes (optional) = get_slopes(heads)     ofirpress/attention_with_linear_biases
  rope      short_factor, long_factor (longrope) = 1        no rescaling until loaded
  xl        r_w_bias, r_r_bias, wr ~ N(0, 0.02)             kimiyoung/transformer-xl (init_std)
  tupe      pos_table, uq, uk, rel_bias ~ N(0, 0.02),       guolinke/TUPE (fairseq init_bert_params)
            uq_b, uk_b = 0, pos_ln_w = 1, pos_ln_b = 0
  deberta   rel_embeddings, pos_key_w, pos_query_w ~ N(0, 0.02), biases 0   HF DebertaV2
  huang1-3  rel_scale, rel_vec = 1 (starts as plain attention; the paper gives no init)
  huang4    rel_vec ~ N(0, 0.02)                            HF BERT relative_key_query
  kerple    log: r1 ~ U(0, 2), r2 ~ U(0, 1); power: r1 ~ U(0, 1), r2 ~ U(0, 2)   KERPLE (bias_p, bias_a)
  fire      MLP as torch.nn.Linear, fire_c = 0.1, fire_L = 1 (times fire_init_L)   FIRE paper
  floater   floater_b0 ~ N(0, 1), w1, w2 xavier_normal, b1, b2 = 0   xuanqing94/FLOATER
  complex   amp ~ N(0, 1), freq[v, d] = 10000^(-2 floor(d/2) / C), phase = 0   complex-order
  pope      pope_bias = 0, or U(-2 pi, 0) with pope_bias_uniform_init   lucidrains/PoPE-pytorch
  fope      fope_cos, fope_sin = the identity + N(0, 0.02) (starts as RoPE on the kept pairs)
  cope      pos_emb = 0                                     facebookresearch/RAM projects/cope (torch.zeros)
  data_alibi forget_gate_w as torch.nn.Linear, forget_gate_b = bias_init (5)   x-transformers DataDependentAlibi
  other     any tensor of a method added later and not listed: N(0, 0.02)
"""
import ctypes
import math
import os

import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable

import posenc
from posenc import _lib

__all__ = ["Attention", "from_hf", "Encoding", "SinusoidalEncoding", "LearnedEncoding", "FloaterEncoding",
           "ComplexEmbedding", "attend", "attention", "embed", "init_tensor"]

_LAYER = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")
_IDS_METHODS = {"complex"}  # the contract: token ids replace x
_NO_GRAD = ("mems",)        # the contract returns no gradient for these


# ---- the autograd bridge -----------------------------------------------------------------
def _to_numpy(name, t):
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    if t.device.type != "cpu":
        raise ValueError(f"tensor '{name}' is on {t.device}: posenc runs on the CPU "
                         "(move the module and its inputs with .cpu())")
    t = t.detach()
    if t.is_floating_point():
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"tensor '{name}': dtype {t.dtype}, expected float32 (or float64)")
        t = t.to(torch.float32)
    elif name == "attn_mask" and t.dtype in (torch.bool, torch.uint8):
        pass
    elif t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"tensor '{name}': dtype {t.dtype}, expected float32, int32 or int64")
    return t.contiguous().numpy()


def _out_dtype(names, tensors):
    for n, t in zip(names, tensors):
        if n in ("x", "q"):
            return t.dtype if t.dtype == torch.float64 else torch.float32
    return torch.float32


class _Fn(torch.autograd.Function):
    """Forward: fn(settings, arrays) without dy. Backward: the same call with dy (and
    dy_imag): gradients d<name> (dx for x) of every float input."""

    @staticmethod
    def forward(ctx, fn, settings, names, outs, *tensors):
        arrays = {n: _to_numpy(n, t) for n, t in zip(names, tensors)}
        res = fn(settings, arrays)
        dtype = _out_dtype(names, tensors)
        ctx.fn, ctx.settings, ctx.names = fn, settings, names
        ctx.diff = [o for o in outs if o in ("y", "y_imag", "o") and o in res]
        ctx.save_for_backward(*tensors)
        result = [torch.from_numpy(res[o]).to(dtype) if o in res else torch.empty(0) for o in outs]
        ctx.mark_non_differentiable(*[r for o, r in zip(outs, result) if o not in ctx.diff])
        ctx.outs = outs
        return tuple(result)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        arrays = {n: _to_numpy(n, t) for n, t in zip(ctx.names, tensors)}
        for o, g in zip(ctx.outs, grads):
            if o in ctx.diff:
                arrays["d" + o] = _to_numpy("d" + o, g)
        res = ctx.fn(ctx.settings, arrays)
        out = [None, None, None, None]
        for n, t in zip(ctx.names, tensors):
            g = None
            if t.is_floating_point() and n not in _NO_GRAD:
                g = res.get("dx" if n == "x" else "d" + n)
                g = None if g is None else torch.from_numpy(g).to(t.dtype)
            out.append(g)
        return tuple(out)


# ---- the fast path: one library layer per call, kept for its backward ----------------------
class _Spec:
    """What a call of one configuration needs, made once per module (or per settings in the
    functional form): the library's pe_config, the widths, the order of the method's tensors in
    pe_weights.param and their shapes."""

    def __init__(self, settings, C):
        self.settings = dict(settings)
        self.cfg = _lib.Config(settings)
        layer = _lib.Layer(settings, C)
        self.C, self.D = int(C), int(layer.head_dim())
        self.H = self.C // self.D
        self.Hkv = int(settings.get("kv_heads", self.H))
        self.memory = layer.has_memory()
        self.params = layer.params()  # [(name, shape, optional)]


_SPECS = {}


def _spec_of(settings, C):
    key = (tuple(sorted(settings.items())), int(C))
    spec = _SPECS.get(key)
    if spec is None:
        if len(_SPECS) >= 256:
            _SPECS.clear()
        spec = _SPECS[key] = _Spec(settings, C)
    return spec


def _f32(t):
    """t as contiguous float32 without a copy where it already is (detached: autograd is ours)."""
    t = t.detach()
    return (t if t.dtype == torch.float32 else t.float()).contiguous()


def _addr(t):
    return None if t is None else t.data_ptr()


def _weights(spec, layer, method, tensors):
    """The PeWeights of the layer's projections (layer: 8 tensors or None) and the method's
    tensors ({name: tensor}), each checked against its shape (the library reads raw memory)."""
    w = _lib.PeWeights()
    keep = []
    C, Ckv = spec.C, spec.Hkv * spec.D
    if layer is not None:
        shapes = ((C, C), (Ckv, C), (Ckv, C), (C, C), (C,), (Ckv,), (Ckv,), (C,))
        for i, (name, t, shape) in enumerate(zip(_LAYER, layer, shapes)):
            if t is None:
                continue
            if tuple(t.shape) != shape:
                raise ValueError(f"{name}: shape {list(t.shape)}, expected {list(shape)}")
            t = _f32(t)
            keep.append(t)
            w.w[i] = t.data_ptr()
    known = {n for n, _, _ in spec.params}
    for name in tensors:
        if name not in known:
            raise posenc.PosencError(f"tensor '{name}': method {method} takes "
                                     f"{', '.join(sorted(known)) or 'no tensors'}", -3)
    for i, (name, shape, optional) in enumerate(spec.params):
        t = tensors.get(name)
        if t is None:
            if not optional:
                raise posenc.PosencError(f"tensor '{name}' is required by method {method}", -3)
            continue
        want = tuple(t.shape[0] if d == -1 else d for d in shape)
        if t.dim() != len(shape) or tuple(t.shape) != want:
            raise posenc.PosencError(f"tensor '{name}': shape {list(t.shape)}, expected {list(want)}", -3)
        t = _f32(t)
        keep.append(t)
        w.param[i] = t.data_ptr()
        w.param_rows[i] = t.shape[0]
    return w, keep


def _where(call, w, positions, key_positions, mask, B, T, Tk, batched):
    """The PePositions of a call, each tensor checked against the shape the library reads."""
    at = _lib.PePositions()
    keep = []
    A = call.axes(w)
    tail = (A,) if A > 1 else ()
    for name, p, n, field in (("positions", positions, T, "pos"), ("key_positions", key_positions, Tk, "key_pos")):
        if p is None:
            continue
        p = p.detach().to(torch.int64).contiguous()
        if tuple(p.shape) == (n,) + tail:
            pass
        elif batched and tuple(p.shape) == (B, n) + tail:
            setattr(at, field + "_batched", 1)
        else:
            want = f"[{', '.join(map(str, (n,) + tail))}]" + (f" or [{B}, {', '.join(map(str, (n,) + tail))}]" if batched else "")
            raise posenc.PosencError(f"tensor '{name}': shape {list(p.shape)}, expected {want}", -3)
        keep.append(p)
        setattr(at, field, ctypes.cast(p.data_ptr(), ctypes.POINTER(ctypes.c_int64)))
    at.axes = A if A > 1 else 0
    if mask is not None:
        m = torch.as_tensor(mask).detach()
        if m.dtype not in (torch.bool, torch.uint8):
            raise TypeError(f"attn_mask: dtype {m.dtype}, expected bool or uint8 (True takes part)")
        m = m.contiguous()
        if tuple(m.shape) == (T, Tk):
            pass
        elif batched and tuple(m.shape) == (B, T, Tk):
            at.mask_batched = 1
        else:
            raise posenc.PosencError(f"tensor 'attn_mask': shape {list(m.shape)}, expected [{T}, {Tk}]"
                                     + (f" or [{B}, {T}, {Tk}]" if batched else ""), -3)
        keep.append(m)
        at.mask = m.data_ptr()  # bool is one byte 0/1: the library's uint8 mask
    return at, keep


def _grads_of(spec, layer, tensors, need):
    """Zeroed gradients (the library accumulates) for the tensors that need one; PeGrads."""
    g = _lib.PeGrads()
    out_layer, out_params = [None] * 8, {}
    for i, t in enumerate(layer or ()):
        if t is not None and need(t):
            out_layer[i] = torch.zeros(t.shape, dtype=torch.float32)
            g.d[i] = out_layer[i].data_ptr()
    for i, (name, _, _) in enumerate(spec.params):
        t = tensors.get(name)
        if t is not None and need(t):
            out_params[name] = torch.zeros(t.shape, dtype=torch.float32)
            g.dparam[i] = out_params[name].data_ptr()
    return g, out_layer, out_params


def _dropout_seed():
    """A seed from torch's default generator, so torch.manual_seed reproduces the mask."""
    return int(torch.randint(0, 2 ** 62, (1,), dtype=torch.int64).item())


class _LayerFn(torch.autograd.Function):
    """The layer on x: forward into a library layer of its own (kept in ctx), backward from
    what it saved. Inputs after the fixed ones: the 8 projection tensors (None: absent), then
    the method's tensors in `names` order."""

    @staticmethod
    def forward(ctx, spec, method, names, need_weights, dropout, positions, mask, x, mems, *tensors):
        layer, params = list(tensors[:8]), dict(zip(names, tensors[8:]))
        params = {n: t for n, t in params.items() if t is not None}
        B, T = (x.shape[0], x.shape[1]) if x.dim() == 3 else (1, x.shape[0])
        M = 0 if mems is None else mems.shape[-2]
        call = _lib.Call(spec.cfg, spec.C, torch.get_num_threads())
        if dropout > 0:
            call.dropout(dropout, _dropout_seed())
        w, keep = _weights(spec, layer, method, params)
        at, keep_at = _where(call, w, positions, None, mask, B, T, T + M, x.dim() == 3)
        x32 = _f32(x)
        m32 = None if mems is None else _f32(mems)
        if m32 is not None and tuple(m32.shape) not in ((B, M, spec.C), (M, spec.C)[: 3 - x.dim()] + ((spec.C,) if x.dim() == 2 else ())):
            raise ValueError(f"mems: shape {list(mems.shape)}, expected [B, M, {spec.C}] like x")
        y = torch.empty(x32.shape, dtype=torch.float32)
        lead = (B,) if x.dim() == 3 else ()
        probs = torch.empty(lead + (spec.H, T, T + M), dtype=torch.float32) if need_weights else None
        call.forward(w, x32.data_ptr(), _addr(m32), M, B, T, at, y.data_ptr(), _addr(probs))
        ctx.call, ctx.spec, ctx.w, ctx.keep = call, spec, w, (keep, keep_at, x32, m32)  # the layer reads them again
        ctx.layer, ctx.params, ctx.named, ctx.dtype = layer, params, list(zip(names, tensors[8:])), x.dtype
        ctx.x_grad = x.requires_grad
        ctx.save_for_backward(*[t for t in tensors if t is not None])  # in-place changes are caught
        out = y if x.dtype == torch.float32 else y.to(x.dtype)
        if probs is None:
            return out, torch.empty(0)
        ctx.mark_non_differentiable(probs)
        return out, probs

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dprobs):
        ctx.saved_tensors  # raises if a tensor was changed in place since the forward
        spec = ctx.spec
        g, dlayer, dparams = _grads_of(spec, ctx.layer, ctx.params, lambda t: t.requires_grad)
        dy32 = _f32(dy)
        dx = torch.empty(dy32.shape, dtype=torch.float32) if ctx.x_grad else None
        ctx.call.backward(ctx.w, dy32.data_ptr(), _addr(dx), g)
        ctx.call = None  # the layer and its saved activations go now
        dt = ctx.dtype

        def cast(t, like):
            return None if t is None else t.to(like.dtype)
        grads = [cast(d, t) if t is not None else None for d, t in zip(dlayer, ctx.layer)]
        grads += [cast(dparams.get(n), t) if t is not None else None for n, t in ctx.named]
        return (None, None, None, None, None, None, None, None if dx is None else dx.to(dt), None, *grads)


class _QkvFn(torch.autograd.Function):
    """The projected form on q, k, v [B, T, H*D] / [B, Tk, Hkv*D] (heads concatenated), as
    _LayerFn: one library layer per call, its backward from what it saved."""

    @staticmethod
    def forward(ctx, spec, method, names, dropout, positions, key_positions, mask, q, k, v, *tensors):
        params = {n: t for n, t in zip(names, tensors) if t is not None}
        B, T, Tk = q.shape[0], q.shape[1], k.shape[1]
        call = _lib.Call(spec.cfg, spec.C, torch.get_num_threads())
        if dropout > 0:
            call.dropout(dropout, _dropout_seed())
        w, keep = _weights(spec, None, method, params)
        at, keep_at = _where(call, w, positions, key_positions, mask, B, T, Tk, True)
        q32, k32, v32 = _f32(q), _f32(k), _f32(v)
        o = torch.empty(q32.shape, dtype=torch.float32)
        call.forward_qkv(w, q32.data_ptr(), k32.data_ptr(), v32.data_ptr(), B, T, Tk, at, o.data_ptr(), None)
        ctx.call, ctx.w, ctx.keep, ctx.spec = call, w, (keep, keep_at, q32, k32, v32), spec  # read again by backward
        ctx.named, ctx.params, ctx.dtype = list(zip(names, tensors)), params, q.dtype
        ctx.need = (q.requires_grad, k.requires_grad, v.requires_grad)
        ctx.shapes = (q32.shape, k32.shape)
        ctx.save_for_backward(*params.values())
        return o if q.dtype == torch.float32 else o.to(q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        ctx.saved_tensors
        g, _, dparams = _grads_of(ctx.spec, None, ctx.params, lambda t: t.requires_grad)
        (qs, ks), (nq, nk, nv) = ctx.shapes, ctx.need
        dq = torch.empty(qs, dtype=torch.float32) if nq else None
        dk = torch.empty(ks, dtype=torch.float32) if nk else None
        dv = torch.empty(ks, dtype=torch.float32) if nv else None
        do32 = _f32(do)  # held in a name: a temporary's memory would go before the call reads it
        ctx.call.backward_qkv(ctx.w, do32.data_ptr(), _addr(dq), _addr(dk), _addr(dv), g)
        ctx.call = None
        cast = (lambda t: None if t is None else t.to(ctx.dtype))
        grads = [None if t is None or dparams.get(n) is None else dparams[n].to(t.dtype) for n, t in ctx.named]
        return (None,) * 7 + (cast(dq), cast(dk), cast(dv), *grads)


def _split(tensors):
    names, values = [], []
    for n, t in tensors.items():
        if t is None:
            continue
        if not isinstance(n, str):
            raise TypeError(f"tensor names must be str, got {n!r}")
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(t)
        names.append(n)
        values.append(t)
    return tuple(names), values


def _text_settings(settings, overrides):
    s = dict(settings or {})
    s.update(overrides)
    return {str(k): _lib.text(v, k) for k, v in s.items()}


def attend(settings, tensors, **overrides):
    """Differentiable posenc.attend: tensors {name: torch.Tensor} under the contract's names
    (x or ids, wq..wo, optional bq..bo, positions, attn_mask, mems, the method's tensors).
    Returns {"y", "scores", "probs"} (and "y_imag"); the projected form (q, k, v,
    key_positions in place of x and the projections) returns {"o", "scores", "probs"}.
    Gradients flow to every float input."""
    s = _text_settings(settings, overrides)
    names, values = _split(tensors)
    outs = ("o", "scores", "probs") if "q" in names else ("y", "y_imag", "scores", "probs")
    res = _Fn.apply(_lib.attend, s, names, outs, *values)
    return {o: r for o, r in zip(outs, res) if o != "y_imag" or r.numel()}


def attention(q, k, v, method, positions=None, key_positions=None, attn_mask=None, causal=False,
              scale=None, tensors=None, dropout_p=0.0, **keys):
    """Attention over q, k, v with a positional encoding (the contract's projected form),
    differentiable in q, k, v and the method's tensors; shapes as
    torch.nn.functional.scaled_dot_product_attention:
      q          [B, H, T, D] or [H, T, D]
      k, v       [B, Hkv, Tk, D] (Hkv divides H: grouped-query attention, kv_heads = Hkv)
      positions  [T] or [B, T] query positions (default Tk-T .. Tk-1: the last T tokens)
      key_positions  [Tk] or [B, Tk] (default 0 .. Tk-1)
      attn_mask  bool or uint8, [T, Tk], [B, T, Tk] or [B, 1, T, Tk]: True takes part (as a
                 boolean mask of scaled_dot_product_attention); combines with causal, which
                 masks key j > i + Tk - T (bottom-right aligned, as FlashAttention)
      tensors    {name: tensor}: the method's tensors (rel_bias, alibi_slopes, ...)
      dropout_p  attention dropout (as scaled_dot_product_attention's; the mask drawn from torch's
                 generator, so torch.manual_seed reproduces it; it runs the T x Tk path)
      keys       the method's keys (rope_scaling="yarn", max_rel=8, ...)
    Returns the output [B, H, T, D] (or [H, T, D]). Methods that act on the input embedding
    (sinusoidal, learned, complex) have no such form."""
    for n, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() not in (3, 4):
            raise ValueError(f"{n}: expected a tensor [B, H, T, D] or [H, T, D]")
    batched = q.dim() == 4
    if k.dim() != q.dim() or v.shape != k.shape or k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k, v: shapes {list(k.shape)}, {list(v.shape)} do not match q {list(q.shape)}")
    H, T, D = q.shape[-3:]
    Hkv, Tk = k.shape[-3], k.shape[-2]

    def heads_last(x):  # [B, H, n, D] -> [B, n, H*D]
        x = x if batched else x[None]
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)

    settings = {"method": method, "heads": H, "causal": causal, **keys}
    if Hkv != H:
        settings["kv_heads"] = Hkv
    if scale is not None:
        settings["scale"] = scale
    mask = attn_mask
    if mask is not None:
        mask = torch.as_tensor(mask)
        if mask.dim() == 4:
            if mask.shape[1] != 1:
                raise ValueError("attn_mask: a per-head mask [B, H, T, Tk] is not supported; give [B, 1, T, Tk]")
            mask = mask[:, 0]
        if mask.dtype not in (torch.bool, torch.uint8):
            raise TypeError(f"attn_mask: dtype {mask.dtype}, expected bool or uint8 (True takes part)")
        if mask.dim() == 3 and not batched:
            raise ValueError("attn_mask: [B, T, Tk] needs a batched q")
    pos, kpos = _positions(positions), _positions(key_positions)
    for n, t_ in (("q", q), ("k", k), ("v", v)):
        if t_.device.type != "cpu":
            raise ValueError(f"tensor '{n}' is on {t_.device}: posenc runs on the CPU")
        if t_.dtype not in _FLOATS:
            raise TypeError(f"tensor '{n}': dtype {t_.dtype}, expected float32 (or float64, float16, bfloat16)")
    s = _text_settings(settings, {})
    spec = _spec_of(s, H * D)
    tensors = dict(tensors or {})
    names = tuple(tensors)
    if not 0 <= float(dropout_p) < 1:
        raise ValueError(f"dropout_p: {dropout_p} is not within [0, 1)")
    o = _QkvFn.apply(spec, method, names, float(dropout_p), pos, kpos, mask, heads_last(q), heads_last(k),
                     heads_last(v), *tensors.values())
    o = o.view(-1, T, H, D).transpose(1, 2)
    return o if batched else o[0]


class _Rotate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, pos, settings, which, lo, hi, tensors):
        ctx.args = (pos, settings, which, lo, hi, tensors)
        y = _lib.rotate(x.detach().cpu().numpy(), pos, settings, which=which, lo=lo, hi=hi, tensors=tensors)
        return torch.from_numpy(y).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        pos, settings, which, lo, hi, tensors = ctx.args
        dx = _lib.rotate(dy.detach().cpu().numpy(), pos, settings, which=which, lo=lo, hi=hi, backward=True,
                         tensors=tensors)
        return torch.from_numpy(dx).to(dy.dtype), None, None, None, None, None, None


def rotate(x, positions, method="rope", *, which="k", lo=None, hi=None, tensors=None, **keys):
    """x [B, H, T, D] or [H, T, D] rotated at positions [T] (or [B, T]) as the layer of method
    (rope with every scaling, xpos) rotates its k (which="k") or q rows, in an attention over
    positions lo .. hi (default: their range); differentiable in x (the backward is the
    rotation by -theta). Computed in float32 with angles exact in double; tensors: LongRoPE's
    short_factor / long_factor (no gradient)."""
    if not isinstance(x, torch.Tensor) or x.dim() not in (3, 4):
        raise ValueError("x: expected a tensor [B, H, T, D] or [H, T, D]")
    batched = x.dim() == 4
    xb = x if batched else x[None]
    B, H, T, D = xb.shape
    pos = torch.as_tensor(positions, dtype=torch.int64)
    if pos.shape not in ((T,), (B, T)):
        raise ValueError(f"positions: shape {list(pos.shape)}, expected [{T}] or [{B}, {T}]")
    pos = pos.expand(B, T).reshape(-1).numpy().copy()
    lo = int(pos.min()) if lo is None else int(lo)
    hi = int(pos.max()) if hi is None else int(hi)
    settings = {"method": method, **keys}
    tens = {n: t.detach().cpu().numpy() for n, t in (tensors or {}).items()}
    rows = xb.transpose(1, 2).reshape(B * T, H, D).float()  # [B T, H, D]: one row per token
    y = _Rotate.apply(rows, pos, settings, which, lo, hi, tens)
    y = y.view(B, T, H, D).transpose(1, 2).to(x.dtype)
    return y if batched else y[0]


class KVCache:
    """A KV cache for one attention layer of method (any with a projected form), for
    inference: append(k, v) with k, v [B, Hkv, n, D] (HF's cache layout) at positions (default:
    continuing each row), then attend(q) with q [B, H, T, D] to everything cached returns
    [B, H, T, D]. Rotary methods rotate keys once, on append, and re-rotate them exactly when
    the frequencies change (dynamic NTK, LongRoPE) or on shift(keep, n_drop). No autograd."""

    def __init__(self, method, heads, head_dim, *, kv_heads=None, batch=1, max_tokens=4096, causal=True,
                 tensors=None, **keys):
        self.H, self.D = int(heads), int(head_dim)
        self.Hkv = int(kv_heads or heads)
        settings = {"method": method, "heads": self.H, "kv_heads": self.Hkv, "causal": causal, **keys}
        tens = {n: t.detach().cpu().numpy() for n, t in (tensors or {}).items()}
        self._c = _lib.KVCache(settings, self.H * self.D, batch=batch, max_tokens=max_tokens, tensors=tens)

    def __len__(self):
        return len(self._c)

    def append(self, k, v, positions=None):
        B, Hkv, n, D = k.shape
        flat = [t.detach().transpose(1, 2).reshape(B, n, Hkv * D).float().numpy() for t in (k, v)]
        pos = None if positions is None else torch.as_tensor(positions, dtype=torch.int64).numpy()
        self._c.append(flat[0], flat[1], pos)

    def attend(self, q, positions=None):
        B, H, T, D = q.shape
        o = self._c.attend(q.detach().transpose(1, 2).reshape(B, T, H * D).float().numpy(),
                           None if positions is None else torch.as_tensor(positions, dtype=torch.int64).numpy())
        return torch.from_numpy(o).view(B, T, H, D).transpose(1, 2).to(q.dtype)

    def shift(self, keep, n_drop, delta=None):
        self._c.shift(keep, n_drop, delta)


def embed(settings, tensors, **overrides):
    """Differentiable posenc.embed (an absolute method applied to a batch): returns {"y"}
    (and "y_imag" for complex)."""
    s = _text_settings(settings, overrides)
    names, values = _split(tensors)
    outs = ("y", "y_imag")
    res = _Fn.apply(posenc.embed, s, names, outs, *values)
    return {o: r for o, r in zip(outs, res) if o == "y" or r.numel()}


# ---- initialisation ----------------------------------------------------------------------
def _get_slopes(n):
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + _get_slopes(2 * c)[0::2][:n - c]


def _linear_default(t, fan_in):
    # torch.nn.Linear.reset_parameters: kaiming_uniform(a=sqrt(5)) == U(+-1/sqrt(fan_in))
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    return nn.init.uniform_(t, -bound, bound)


def init_tensor(method, name, t, settings, dim, heads):
    """Fills parameter t (method `method`, tensor `name`) as the method's reference does: the
    library's description of it (pe_param_spec.init, the one the trainer draws from too),
    drawn with torch's generator. Returns t."""
    s = {k: _lib.text(v, k) for k, v in settings.items()}
    s.update(method=method, heads=str(heads))
    kind, a, b = _lib.Layer(s, dim).inits()[name]
    with torch.no_grad():
        if kind == "normal":
            return nn.init.normal_(t, 0.0, a)
        if kind == "uniform":
            return nn.init.uniform_(t, a, b)
        if kind == "const":
            return nn.init.constant_(t, a)
        if kind == "xavier":
            return nn.init.xavier_normal_(t)
        if kind == "linear":  # torch.nn.Linear.reset_parameters: U(+-1/sqrt(fan_in))
            return nn.init.uniform_(t, -1 / math.sqrt(a), 1 / math.sqrt(a))
        if kind == "eye_normal":  # the identity on each [n, n] block plus N(0, a): FoPE starts as RoPE
            n = t.shape[-1]
            return t.copy_(torch.eye(n, dtype=t.dtype).expand_as(t) + a * torch.randn(t.shape, dtype=t.dtype))
        if kind == "alibi_slopes":
            return t.copy_(torch.tensor(_get_slopes(t.shape[0])))
        C = t.shape[-1]  # complex_freq: 10000^(-2 floor(d/2) / C) on every row
        d = torch.arange(C, dtype=torch.float64)
        return t.copy_((10000.0 ** (-2 * torch.div(d, 2, rounding_mode="floor") / C)).expand_as(t))


# ---- modules -----------------------------------------------------------------------------
def _parse_bool(v):
    if isinstance(v, str):
        if v not in ("true", "false"):
            raise ValueError(f"causal: expected true or false, got {v!r}")
        return v == "true"
    return bool(v)


def _positions(positions):
    if positions is None:
        return None
    if not isinstance(positions, torch.Tensor):
        positions = torch.as_tensor(np.asarray(positions))
    if positions.is_floating_point() or positions.dtype == torch.bool:
        raise TypeError(f"positions: dtype {positions.dtype}, expected an integer tensor")
    if positions.dtype not in (torch.int32, torch.int64):
        positions = positions.to(torch.int64)
    return positions


_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _combine_masks(attn_mask, key_padding_mask, T, Tk, batched):
    """One boolean mask, True takes part: attn_mask as scaled_dot_product_attention reads it,
    key_padding_mask as nn.MultiheadAttention (True: padding, ignored)."""
    if key_padding_mask is None:
        return attn_mask
    kpm = torch.as_tensor(key_padding_mask)
    if kpm.dtype != torch.bool:
        raise TypeError(f"key_padding_mask: dtype {kpm.dtype}, expected bool (True: padding)")
    if kpm.shape[-1] != Tk or kpm.dim() not in (1, 2) or (kpm.dim() == 2 and not batched):
        raise ValueError(f"key_padding_mask: shape {list(kpm.shape)}, expected [B, {Tk}] (or [{Tk}])")
    keep = ~kpm[..., None, :].expand(*kpm.shape[:-1], T, Tk)
    if attn_mask is None:
        return keep
    m = torch.as_tensor(attn_mask)
    return keep & (m.bool() if m.dtype == torch.uint8 else m)


class _MethodTensors(nn.Module):
    """Creates and initialises the method's tensors of a layer from the library's specs."""

    def _make_tensors(self, settings, dim, heads, rows, optional):
        specs = _lib.Layer(settings, dim).params()
        names_opt = [n for n, _, o in specs if o]
        optional = (names_opt if optional == "all" else
                    [optional] if isinstance(optional, str) else list(optional))
        for o in optional:
            if o not in names_opt:
                raise ValueError(f"method {settings['method']}: '{o}' is not an optional tensor "
                                 f"of this configuration (optional: {', '.join(names_opt) or 'none'})")
        self.tensor_names = []
        for name, shape, opt in specs:
            if opt and name not in optional:
                continue
            if shape[0] == -1:
                if rows is None:
                    raise ValueError(f"method {settings['method']}: tensor '{name}' has a free first "
                                     "dimension (positions or vocabulary): pass rows=N")
                shape = (int(rows),) + tuple(shape[1:])
            if hasattr(self, name) and name not in self._parameters:
                raise ValueError(f"tensor name '{name}' collides with an attribute of the module")
            p = nn.Parameter(torch.empty(shape, dtype=torch.float32))
            init_tensor(settings["method"], name, p.data, settings, dim, heads)
            self.register_parameter(name, p)
            self.tensor_names.append(name)

    def method_tensors(self):
        """{name: parameter} of the method's tensors (contract names)."""
        return {n: getattr(self, n) for n in self.tensor_names}


class Attention(_MethodTensors):
    """Multi-head self-attention with the positional encoding `method`, computed by libposenc.

    dim: model width C (= heads * head_dim). heads, kv_heads (grouped-query attention),
    causal: as the contract's keys (causal None: the method's default). bias: create bq, bk, bv, bo. rows: the first dimension
    of tensors that leave it free (learned/tupe pos_table: positions; complex amp/freq/phase:
    vocabulary). optional: names of optional tensors to create and train (e.g.
    "alibi_slopes", "phase"; "all" for every one). dropout: attention dropout on the
    probabilities in training (module.train()), its mask drawn from torch's generator so that
    torch.manual_seed reproduces it (a call with dropout runs the library's T x Tk path). Further
    keyword arguments are the method's keys (max_rel=8, rope_layout="interleaved", ...).

    forward(x, positions=None, mems=None, need_weights=False, attn_mask=None,
    key_padding_mask=None, context=None, context_positions=None): x [B, T, dim] or [T, dim]
    (for complex: ids [B, T] or [T]); positions [T] or [B, T] integers (default 0..T-1);
    mems [B, M, dim] for methods with memory (xl). Returns y like x (complex: (y, y_imag)),
    and with need_weights also probs [B, H, T, Tk] (after dropout, as nn.MultiheadAttention).
    """

    def __init__(self, dim, heads, method="none", *, kv_heads=None, causal=None, bias=True,
                 rows=None, optional=(), dropout=0.0, **settings):
        super().__init__()
        self.dim, self.heads, self.method = int(dim), int(heads), str(method)
        if not 0 <= float(dropout) < 1:
            raise ValueError(f"dropout: {dropout} is not within [0, 1)")
        self.dropout = float(dropout)  # on the attention probabilities, in training (self.training)
        self.kv_heads = self.heads if kv_heads is None else int(kv_heads)
        s = {"method": self.method, "heads": self.heads}
        if causal is not None:  # otherwise the method's default (xl: true, others: false)
            s["causal"] = _parse_bool(causal)
        if kv_heads is not None:
            s["kv_heads"] = self.kv_heads
        s.update(settings)
        self.settings = {k: _lib.text(v, k) for k, v in s.items()}
        layer = _lib.Layer(self.settings, self.dim)  # validates every key (PosencError)
        self.head_dim = layer.head_dim()
        self.has_memory = layer.has_memory()
        C, Ckv = self.dim, self.kv_heads * self.head_dim
        for name, rows_ in (("wq", C), ("wk", Ckv), ("wv", Ckv), ("wo", C)):
            w = torch.empty(rows_, C, dtype=torch.float32)
            self.register_parameter(name, nn.Parameter(_linear_default(w, C)))
        for name, rows_ in (("bq", C), ("bk", Ckv), ("bv", Ckv), ("bo", C)):
            b = torch.empty(rows_, dtype=torch.float32)
            p = nn.Parameter(_linear_default(b, C)) if bias else None
            self.register_parameter(name, p)
        self._make_tensors(self.settings, self.dim, self.heads, rows, optional)

    def extra_repr(self):
        keys = {k: v for k, v in self.settings.items() if k not in ("method", "heads")}
        return (f"dim={self.dim}, heads={self.heads}, method={self.method}"
                + "".join(f", {k}={v}" for k, v in keys.items()))

    def contract_tensors(self):
        """The layer's tensors under the contract's names (weights, biases, method's)."""
        t = {n: getattr(self, n) for n in _LAYER if getattr(self, n) is not None}
        t.update(self.method_tensors())
        return t

    def forward(self, x, positions=None, mems=None, need_weights=False, attn_mask=None, key_padding_mask=None,
                context=None, context_positions=None):
        """x [B, T, dim] or [T, dim] (complex: ids); positions [T] or [B, T]; attn_mask bool or
        uint8 [T, Tk] or [B, T, Tk], True takes part (scaled_dot_product_attention's convention);
        key_padding_mask bool [B, Tk] or [Tk], True is padding and is ignored
        (nn.MultiheadAttention's convention); context [B, Tk, dim]: cross-attention, keys and
        values projected from context (at context_positions, default 0 .. Tk-1) through the
        projected form. float16 and bfloat16 inputs (autocast) are computed in float32 and
        returned in their dtype."""
        if torch.jit.is_tracing() or torch.jit.is_scripting():
            raise RuntimeError("posenc.torch.Attention cannot be traced or scripted: its forward is a call into "
                               "libposenc through ctypes, which TorchScript cannot record or save; keep the module "
                               "in Python (torch.save of its state_dict works)")
        tok = "ids" if self.method in _IDS_METHODS else "x"
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{tok}: expected a torch.Tensor, got {type(x).__name__}")
        if tok == "x":
            if x.dim() not in (2, 3) or x.shape[-1] != self.dim:
                raise ValueError(f"x: shape {list(x.shape)}, expected [T, {self.dim}] or "
                                 f"[B, T, {self.dim}]")
            if x.dtype not in _FLOATS:
                raise TypeError(f"x: dtype {x.dtype}, expected float32 (or float64, float16, bfloat16)")
        elif x.dim() not in (1, 2) or x.is_floating_point():
            raise ValueError(f"ids: expected an integer tensor [T] or [B, T], got {x.dtype} "
                             f"{list(x.shape)}")
        if mems is not None and not self.has_memory:
            raise ValueError(f"mems: method {self.method} has no memory")
        if x.device.type != "cpu":
            raise ValueError(f"tensor '{tok}' is on {x.device}: posenc runs on the CPU "
                             "(move the module and its inputs with .cpu())")
        T = x.shape[-2] if tok == "x" else x.shape[-1]
        Tk = context.shape[-2] if context is not None else T + (0 if mems is None else mems.shape[-2])
        attn_mask = _combine_masks(attn_mask, key_padding_mask, T, Tk, x.dim() == (3 if tok == "x" else 2))
        if context is not None:
            if tok != "x" or need_weights or mems is not None:
                raise ValueError("context (cross-attention) takes x, no mems and no need_weights")
            return self._cross(x, context, positions, context_positions, attn_mask)
        if tok == "x":
            spec = _spec_of(self.settings, self.dim)
            layer = [getattr(self, n) for n in _LAYER]
            y, probs = _LayerFn.apply(spec, self.method, tuple(self.tensor_names), bool(need_weights),
                                      self.dropout if self.training else 0.0, _positions(positions), attn_mask,
                                      x, mems, *layer,
                                      *[getattr(self, n) for n in self.tensor_names])
            return (y, probs) if need_weights else y
        # complex: token ids and two streams, through the contract's entry point
        t = {tok: x, "positions": _positions(positions), "mems": mems}
        if attn_mask is not None:  # bool or uint8 [T, Tk] or [B, T, Tk]: True takes part
            t["attn_mask"] = torch.as_tensor(attn_mask)
        t.update(self.contract_tensors())
        out = attend(self.settings, t)
        y = (out["y"], out["y_imag"]) if "y_imag" in out else out["y"]
        return (y, out["probs"]) if need_weights else y

    def _project(self, x, w, b):
        return nn.functional.linear(x, w.to(x.dtype), None if b is None else b.to(x.dtype))

    def _cross(self, x, context, positions, context_positions, attn_mask):
        """Queries from x, keys and values from context: the module's projections in torch, the
        attention in the library's projected form, then wo."""
        if context.shape[-1] != self.dim or context.dim() != x.dim():
            raise ValueError(f"context: shape {list(context.shape)}, expected [.., Tk, {self.dim}] like x")
        D, H, Hkv = self.head_dim, self.heads, self.kv_heads
        q = self._project(x, self.wq, self.bq)
        k, v = self._project(context, self.wk, self.bk), self._project(context, self.wv, self.bv)
        shape = (lambda t, h: t.unflatten(-1, (h, D)).transpose(-3, -2))  # [.., n, h*D] -> [.., h, n, D]
        s = {k_: v_ for k_, v_ in self.settings.items() if k_ not in ("method", "heads", "kv_heads", "causal")}
        causal = self.settings.get("causal") == "true"
        o = attention(shape(q, H), shape(k, Hkv), shape(v, Hkv), self.method, positions=positions,
                      key_positions=context_positions, attn_mask=attn_mask, causal=causal,
                      tensors=self.method_tensors(), dropout_p=self.dropout if self.training else 0.0, **s)
        o = o.transpose(-3, -2).flatten(-2)
        return self._project(o, self.wo, self.bo)

    def kv_cache(self, batch=1, max_tokens=4096):
        """A KV cache of this layer's method, settings and tensors for decoding with step()."""
        s = {k: v for k, v in self.settings.items() if k not in ("method", "heads", "kv_heads")}
        return KVCache(self.method, self.heads, self.head_dim, kv_heads=self.kv_heads, batch=batch,
                       max_tokens=max_tokens, tensors=self.method_tensors(), **s)

    @torch.no_grad()
    def step(self, x, cache, positions=None):
        """Decoding: x [B, n, dim] the next tokens; their k, v appended to cache (kv_cache()),
        their queries attended to everything cached. Returns y [B, n, dim], what forward gives
        for these tokens over the whole sequence (causal). No autograd."""
        D = self.head_dim
        q = self._project(x.float(), self.wq, self.bq)
        k, v = self._project(x.float(), self.wk, self.bk), self._project(x.float(), self.wv, self.bv)
        heads = (lambda t, h: t.unflatten(-1, (h, D)).transpose(1, 2))
        cache.append(heads(k, self.kv_heads), heads(v, self.kv_heads), positions)
        o = cache.attend(heads(q, self.heads), positions)
        return self._project(o.transpose(1, 2).flatten(-2), self.wo, self.bo).to(x.dtype)

    # the method and its settings travel in state_dict(): a saved module rebuilds itself
    def get_extra_state(self):
        return {"posenc": 1, "dim": self.dim, "heads": self.heads, "settings": dict(self.settings),
                "tensor_names": list(self.tensor_names), "bias": self.bq is not None, "dropout": self.dropout}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or "settings" not in state:
            raise ValueError("state_dict: no posenc settings in its extra state")
        if state["settings"] != self.settings or state["dim"] != self.dim:
            raise ValueError(f"state_dict: saved from a layer with {state['settings']} (dim {state['dim']}), "
                             f"loaded into one with {self.settings} (dim {self.dim}); "
                             "Attention.from_state_dict builds the saved layer")

    @classmethod
    def from_state_dict(cls, state_dict, prefix=""):
        """The layer a state_dict was saved from (its method and settings are in its extra
        state), with its tensors loaded."""
        extra = state_dict.get(prefix + "_extra_state")
        if not isinstance(extra, dict) or "settings" not in extra:
            raise ValueError(f"state_dict has no '{prefix}_extra_state' with posenc settings "
                             "(saved by an older posenc, or not an Attention)")
        s = dict(extra["settings"])
        method, heads = s.pop("method"), int(s.pop("heads"))
        causal, kv_heads = s.pop("causal", None), s.pop("kv_heads", None)
        full = {"method": method, "heads": str(heads), **({} if kv_heads is None else {"kv_heads": kv_heads}), **s}
        specs = _lib.Layer(full, extra["dim"]).params()
        saved = set(extra["tensor_names"])
        optional = [n for n, _, opt in specs if opt and n in saved]
        rows = next((state_dict[prefix + n].shape[0] for n, shape, _ in specs
                     if shape[0] == -1 and prefix + n in state_dict), None)
        m = cls(extra["dim"], heads, method, kv_heads=None if kv_heads is None else int(kv_heads), causal=causal,
                bias=extra["bias"], rows=rows, optional=optional, dropout=extra.get("dropout", 0.0), **s)
        m.load_state_dict({k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)})
        return m

    @classmethod
    def from_tensors(cls, settings, tensors):
        """A layer holding the given contract tensors (a conformance case's inputs, say):
        settings as in the case's metadata, tensors {name: array or tensor}; inputs such as
        x, positions, mems, dy are ignored. Absent biases are zero."""
        s = dict(settings)
        method, heads = str(s.pop("method")), int(s.pop("heads"))
        causal = s.pop("causal", None)
        kv_heads = s.pop("kv_heads", None)
        t = {n: torch.as_tensor(np.asarray(v)) for n, v in tensors.items()}
        dim = t["x"].shape[-1] if "x" in t else t["amp"].shape[-1]
        full = {"method": method, "heads": heads, **({} if kv_heads is None else {"kv_heads": kv_heads}), **s}
        specs = _lib.Layer({k: _lib.text(v, k) for k, v in full.items()}, dim).params()
        optional = [n for n, _, o in specs if o and n in t]
        rows = next((t[n].shape[0] for n, shape, _ in specs if shape[0] == -1 and n in t), None)
        bias = any(b in t for b in ("bq", "bk", "bv", "bo"))
        m = cls(dim, heads, method, kv_heads=kv_heads, causal=causal, bias=bias, rows=rows,
                optional=optional, **s)
        with torch.no_grad():
            for n, p in m.contract_tensors().items():
                if n in t:
                    if tuple(t[n].shape) != tuple(p.shape):
                        raise ValueError(f"tensor '{n}': shape {list(t[n].shape)}, expected "
                                         f"{list(p.shape)}")
                    p.copy_(t[n])
                elif n in ("bq", "bk", "bv", "bo"):
                    p.zero_()
        return m


# ---- HuggingFace attention layers ------------------------------------------------------------
def _hf_config(config):
    """config: a config.json path, a dict of one, or an object with to_dict() (a HF config)."""
    import json
    if isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            return json.load(f)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if isinstance(config, dict):
        return dict(config)
    raise TypeError(f"config: expected a config.json path, a dict or a HF config, got {type(config).__name__}")


def _pick(state_dict, prefixes, names):
    """The prefix under which every one of names is in state_dict (the first that has them)."""
    for p in prefixes:
        if all(p + n in state_dict for n in names):
            return p
    raise KeyError(f"state_dict has none of {[p + names[0] for p in prefixes]}")


def from_hf(state_dict, config, layer=0, prefix=None):
    """A posenc Attention holding layer `layer` of a HuggingFace model: its weights from
    state_dict (the model's, or the attention module's own), its settings from config (a
    config.json path, a dict, or a HF config object) as posenc's hf_config reads them (rope
    base, scaling, GQA, the layer's type; Llama 4's NoPE layers; Gemma's scale).
      llama, mistral, qwen2, gemma*, llama4 ...  self_attn.{q,k,v,o}_proj (biases where present)
      t5      SelfAttention.{q,k,v,o} and relative_attention_bias (layer 0 of its stack holds
              it: pass that layer's state_dict entry, or the model's, for any layer); scale 1
      bert    attention.self.{query,key,value}, attention.output.dense (absolute positions:
              the layer itself is method none, not causal)
    prefix: where the layer's tensors are (default: model.layers.{layer}.self_attn. and the
    other usual places, then none). The module reproduces HF's layer on the same input: HF
    keeps q and k in the half rope layout (its checkpoints are permuted from Meta's), which is
    posenc's default, and Llama 4 the interleaved one, which hf_config sets."""
    import tempfile
    cfg = _hf_config(config)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    mt = str(text.get("model_type") or cfg.get("model_type") or "")
    sd = state_dict
    if mt.startswith("t5") or mt in ("mt5", "umt5"):
        enc = "decoder" if text.get("is_decoder") else "encoder"
        pre = [prefix] if prefix is not None else [f"{enc}.block.{layer}.layer.0.SelfAttention.", "SelfAttention.", ""]
        p = _pick(sd, pre, ["q.weight", "k.weight", "v.weight", "o.weight"])
        bias_key = next((k for k in (p + "relative_attention_bias.weight",
                                     f"{enc}.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
                         if k in sd), None)
        if bias_key is None:
            raise KeyError("t5: no relative_attention_bias.weight (layer 0 of the stack holds it)")
        H, dk, d = int(text["num_heads"]), int(text["d_kv"]), int(text["d_model"])
        if H * dk != d:
            raise ValueError(f"t5: num_heads * d_kv = {H * dk} is not d_model {d}: posenc's layer has C = H * D")
        decoder = bool(text.get("is_decoder"))
        m = Attention(d, H, "t5", causal=decoder, bias=False, bidirectional=not decoder, scale=1.0,
                      num_buckets=int(text.get("relative_attention_num_buckets", 32)),
                      max_distance=int(text.get("relative_attention_max_distance", 128)))
        names = {"wq": "q.weight", "wk": "k.weight", "wv": "v.weight", "wo": "o.weight"}
        with torch.no_grad():
            for n, k in names.items():
                getattr(m, n).copy_(sd[p + k])
            m.rel_bias.copy_(sd[bias_key])
        return m
    if mt.startswith("bert") or mt in ("roberta", "xlm-roberta", "distilbert"):
        if text.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"bert: position_embedding_type {text.get('position_embedding_type')!r}: only absolute "
                             "positions (added to the embeddings, outside the layer) are read")
        pre = [prefix] if prefix is not None else [f"bert.encoder.layer.{layer}.attention.",
                                                   f"encoder.layer.{layer}.attention.", "attention.", ""]
        p = _pick(sd, pre, ["self.query.weight", "self.key.weight", "self.value.weight", "output.dense.weight"])
        C, H = int(text["hidden_size"]), int(text["num_attention_heads"])
        m = Attention(C, H, "none", causal=False)
        names = {"q": "self.query", "k": "self.key", "v": "self.value", "o": "output.dense"}
        with torch.no_grad():
            for n, k in names.items():
                getattr(m, "w" + n).copy_(sd[p + k + ".weight"])
                getattr(m, "b" + n).copy_(sd[p + k + ".bias"])
        return m
    # decoder LMs with q_proj .. o_proj: the settings of the layer as the library reads them
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        import json
        json.dump(cfg, f)
    try:
        settings, info = _lib.hf_layer_settings(f.name, layer)
    finally:
        os.unlink(f.name)
    if info["mla"]:
        raise ValueError("MLA (DeepSeek-V2/V3): its latent projections are not a q/k/v layer; run its "
                         "attention through posenc.torch.attention with the settings of posenc hf-config")
    pre = [prefix] if prefix is not None else [f"model.layers.{layer}.self_attn.",
                                               f"model.language_model.layers.{layer}.self_attn.",
                                               f"language_model.model.layers.{layer}.self_attn.", "self_attn.", ""]
    p = _pick(sd, pre, ["q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"])
    if p + "q_norm.weight" in sd or p + "k_norm.weight" in sd:
        raise ValueError(f"{mt}: the layer normalises q and k (q_norm, k_norm) before the rotation, which is not "
                         "part of posenc's layer: project and normalise in torch, then posenc.torch.attention")
    H, D = int(settings.pop("heads")), int(info["head_dim"])
    method = settings.pop("method")
    kv = settings.pop("kv_heads", None)
    causal = settings.pop("causal", "true") == "true"
    C = sd[p + "q_proj.weight"].shape[1]
    if H * D != C or sd[p + "o_proj.weight"].shape != (C, H * D):
        raise ValueError(f"{mt}: heads {H} x head_dim {D} = {H * D} is not the hidden size {C}: posenc's layer "
                         "has C = H * D (use posenc.torch.attention on the projected q, k, v)")
    bias = p + "q_proj.bias" in sd
    m = Attention(C, H, method, kv_heads=None if kv is None else int(kv), causal=causal, bias=bias, **settings)
    with torch.no_grad():
        if settings.get("rope_scaling") == "longrope":  # the factor tables are tensors of the layer
            rs = text.get("rope_parameters") or text.get("rope_scaling")
            m.short_factor.copy_(torch.tensor(rs["short_factor"]))
            m.long_factor.copy_(torch.tensor(rs["long_factor"]))
        for n in "qkvo":
            getattr(m, "w" + n).copy_(sd[p + n + "_proj.weight"])
            b = getattr(m, "b" + n)
            if b is not None:
                src = sd.get(p + n + "_proj.bias")
                b.copy_(src) if src is not None else b.zero_()
    return m


class Encoding(_MethodTensors):
    """An absolute method's encoding alone (posenc.embed), with its tensors as parameters.

    forward(x, positions=None): sinusoidal, learned, none: x [.., T, dim] -> x + P[positions
    + shift]. complex: ids [.., T] -> (y, y_imag) [.., T, dim]. floater: positions [.., T]
    (or x for its shape) -> B(t) [.., T, 3, dim], the q, k, v biases of the layer.
    """

    def __init__(self, method, dim, *, rows=None, optional=(), **settings):
        super().__init__()
        self.method, self.dim = str(method), int(dim)
        fam = posenc.method_family(self.method)
        if fam != "absolute":
            raise ValueError(f"Encoding: method '{self.method}' is {fam}, not absolute "
                             "(use Attention)")
        s = {"method": self.method, "heads": 1}
        s.update(settings)
        self.settings = {k: _lib.text(v, k) for k, v in s.items()}
        self._make_tensors(self.settings, self.dim, 1, rows, optional)

    def extra_repr(self):
        return f"method={self.method}, dim={self.dim}" + "".join(
            f", {k}={v}" for k, v in self.settings.items() if k not in ("method", "heads"))

    def forward(self, x=None, positions=None):
        t = {"positions": _positions(positions)}
        if x is not None:
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
            if self.method in _IDS_METHODS:
                t["ids"] = x
            else:
                if x.shape[-1:] != (self.dim,):
                    raise ValueError(f"x: shape {list(x.shape)}, expected [.., T, {self.dim}]")
                t["x"] = x
        elif positions is None:
            raise ValueError("forward needs x (or ids) or positions")
        t.update(self.method_tensors())
        out = embed(self.settings, t)
        return (out["y"], out["y_imag"]) if "y_imag" in out else out["y"]


class SinusoidalEncoding(Encoding):
    """x + P[positions + shift], P as the contract's `sinusoidal` (layout interleaved, concat
    or t2t; base)."""

    def __init__(self, dim, layout="interleaved", base=10000.0, shift=0):
        super().__init__("sinusoidal", dim, sin_layout=layout, sin_base=float(base), shift=int(shift))


class LearnedEncoding(Encoding):
    """x + pos_table[positions + shift]; pos_table [num_positions, dim] ~ N(0, 0.02)."""

    def __init__(self, dim, num_positions, shift=0):
        super().__init__("learned", dim, rows=num_positions, shift=int(shift))


class FloaterEncoding(Encoding):
    """FLOATER's position biases: forward(positions) -> B(positions * dt) [.., T, 3, dim]
    (rows: q, k, v), the neural ODE solved by classic RK4 on the grid of `step`."""

    def __init__(self, dim, dt=0.01, step=0.002):
        super().__init__("floater", dim, floater_dt=float(dt), floater_step=float(step))


class ComplexEmbedding(Encoding):
    """Complex word embeddings (Wang et al. 2020): forward(ids, positions) -> (r cos(w p +
    theta), r sin(w p + theta)); phase theta is created only with phase=True (the
    reference model has none)."""

    def __init__(self, vocab_size, dim, phase=False):
        super().__init__("complex", dim, rows=vocab_size, optional=("phase",) if phase else ())
