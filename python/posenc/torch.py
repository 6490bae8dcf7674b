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
threads follow torch.get_num_threads() (on more than one, start Python with
OMP_WAIT_POLICY=passive: libgomp's spinning threads otherwise slow OpenBLAS's, on both sides). attend and embed (and complex's two streams) go through
the contract's entry point, which recomputes the forward in backward. Tensors must be on the
CPU; the library computes in float32: float64 inputs are accepted and their results and
gradients returned in float64, but computed in float32 (torch.autograd.gradcheck at its default
float64 tolerances will not pass; compare with float32 tolerances, as tests/python does).
Attention (on x) and attention() are the operators torch.ops.posenc.layer and .attention
(torch.library): torch.jit.trace records each call as one node, which recomputes on new inputs
with its gradients; scripting is refused.

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
import math

import numpy as np
import torch
from torch import nn

import posenc
from posenc import _cache, _lib
from posenc._torch_init import _get_slopes, _linear_default, init_tensor  # noqa: F401
from posenc._torch_fn import (_LAYER, _NO_GRAD, _Fn, _LayerFn, _QkvFn, _Spec, _addr, _dropout_seed, _f32, _grads_of, _out_dtype, _spec_of, _split, _text_settings, _to_numpy, _traceable, _weights, _where, layer, qkv_attention)  # noqa: F401

__all__ = ["Attention", "from_hf", "Encoding", "SinusoidalEncoding", "LearnedEncoding", "FloaterEncoding",
           "ComplexEmbedding", "attend", "attention", "embed", "init_tensor"]


def _reads_ids(method):
    """Whether the method reads token ids in place of x (the library's word: complex-order)."""
    return bool(_lib.method_info(method)["token_ids"])


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
    H, D, Hkv = int(q.shape[-3]), int(q.shape[-1]), int(k.shape[-3])  # int: a trace's sizes are tensors
    for n, have in (("heads", H), ("kv_heads", Hkv)):  # the shapes say them: a key may repeat, not contradict
        if n in keys and str(keys[n]) != str(have):
            raise ValueError(f"{n}={keys[n]} does not match the tensors' {have} ({'q' if n == 'heads' else 'k, v'} "
                             f"{list((q if n == 'heads' else k).shape)})")
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
    _spec_of(s, H * D)  # the settings' errors here, before the operator
    tensors = dict(tensors or {})
    if not 0 <= float(dropout_p) < 1:
        raise ValueError(f"dropout_p: {dropout_p} is not within [0, 1)")
    return qkv_attention(q, k, v, s, pos, kpos, mask, dropout_p, tensors.keys(), tensors.values())


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
        self._c = _cache.KVCache(settings, self.H * self.D, batch=batch, max_tokens=max_tokens, tensors=tens)

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
        tok = "ids" if _reads_ids(self.method) else "x"
        if torch.jit.is_scripting() or (torch.jit.is_tracing() and (tok == "ids" or not _traceable())):
            raise RuntimeError("posenc.torch.Attention cannot be scripted, nor traced here: its forward is a call into "
                               "libposenc, which TorchScript records only as the operator torch.ops.posenc.layer "
                               "(torch.jit.trace, PyTorch 1.13 or later, not the token ids of complex); keep the "
                               "module in Python (torch.save of its state_dict works)")
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
        if (x.shape[-2] if tok == "x" else x.shape[-1]) == 0:
            raise ValueError(f"{tok}: shape {list(x.shape)} has no tokens (T = 0)")
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
            tensors = {n: getattr(self, n) for n in (*_LAYER, *self.tensor_names)}
            mask = None if attn_mask is None else torch.as_tensor(attn_mask)
            y, probs = layer(x, self.settings, _positions(positions), mems, mask, need_weights,
                             self.dropout if self.training else 0.0, tensors)
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
            if _reads_ids(self.method):
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


from posenc._torch_hf import from_hf  # noqa: E402 (it builds an Attention, defined above)
import sys as _sys  # noqa: E402
from posenc import _torch_hf as hf  # noqa: E402  posenc.torch.hf.patch: posenc in a transformers model
_sys.modules[__name__ + ".hf"] = hf
