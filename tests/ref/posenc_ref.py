"""posenc's PyTorch reference of one attention layer, in float64 with autograd.

Independent of the C code: written from doc/spec/ and the upstream implementations each
method names. tests/ref/make_fixtures.py runs it to write the committed fixtures that the C
tests compare against.

Each method lives in tests/ref/m_<name>.py and may define any of these hooks (they mirror
the C hook families):
    defaults(ctx)                 fill method defaults into ctx.cfg (scale, ...)
    embed(ctx, x)      -> x'      x (B, T, C)
    project(ctx, q, k, v) -> q, k, v   right after the projections, q (B, H, T, D), k v (B, Hkv, Tk, D)
    rotate(ctx, q, k)  -> q, k    q (B, H, T, D), k (B, Hkv, Tk, D)
    score(ctx, q, k)   -> s       full scores (B, H, T, Tk), scale included
    bias(ctx)          -> b       added to the scores, broadcast to (B, H, T, Tk)
    value(ctx, p)      -> o_extra added to p @ v, (B, H, T, D)
A module may instead define attend(meta, tensors), the whole layer (complex: token ids in
place of x, two outputs); attend() below then defers to it.
and a case list CASES = [(name, meta, extra)] used by make_fixtures.py, where `extra` maps
tensor names to shapes (ints or the letters of the legend: H, D, C, Ckv) of the method's
tensors.
"""
import importlib
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

torch.set_default_dtype(torch.float64)

BOOL = {"true": True, "false": False}


def visible(meta, T, Tk, causal):
    """(T, Tk) bool: the keys each query sees by token index (query i is token Tk - T + i):
    causal, and the window LEFT,RIGHT as FlashAttention's window_size (flash_attn_interface.py,
    flash_attn_func: keys i + Tk - T - left .. i + Tk - T + right, -1 no limit); attn_mask is
    applied beside it."""
    i = torch.arange(T)[:, None] + (Tk - T)
    j = torch.arange(Tk)[None, :]
    ok = torch.ones(T, Tk, dtype=torch.bool)
    if causal:
        ok = ok & (j <= i)
    if meta.get("window"):
        left, right = (int(x) for x in meta["window"].split(","))
        if left >= 0:
            ok = ok & (j >= i - left)
        if right >= 0:
            ok = ok & (j <= i + right)
    return ok


class Ctx:
    """What a hook sees: the settings (cfg, parsed), sizes, positions, tensors. The queries are
    the last T of Tk tokens: M = Tk - T (the layer's memory length)."""

    def __init__(self, meta, t, B, T, Tk, H, Hkv, D, pos, kpos):
        self.meta = dict(meta)
        self.t = t          # name -> float64 tensor (requires_grad for F32 inputs)
        self.B, self.T, self.Tk, self.M = B, T, Tk, Tk - T
        self.H, self.Hkv, self.D, self.C = H, Hkv, D, H * D
        self.pos = pos      # (B, T) int64: query positions i ((B, T, A) with A position axes)
        self.kpos = kpos    # (B, Tk) int64: key positions j ((B, Tk, A))
        self.causal = BOOL[meta.get("causal", "false")]
        self.scale = float(meta["scale"]) if "scale" in meta else 1.0 / math.sqrt(D)

    def get(self, key, default, cast=str):
        v = self.meta.get(key)
        if v is None:
            return default
        if cast is bool:
            return BOOL[v]
        return cast(v)

    def visible(self):
        return visible(self.meta, self.T, self.Tk, self.causal)

    def rel(self):
        """(B, T, Tk) j - i from the key and query positions."""
        return self.kpos[:, None, :] - self.pos[:, :, None]

    def pos_max(self):
        """max over query and key positions (dynamic NTK, LongRoPE's switch, xPos's centre)."""
        return int(max(self.pos.max(), self.kpos.max()))


def method_module(name):
    return importlib.import_module("m_" + name)


def _inputs(tensors, no_grad):
    t = {}
    for name, a in tensors.items():
        if a.dtype.kind == "f":
            t[name] = torch.tensor(a, dtype=torch.float64, requires_grad=name not in no_grad)
        elif a.dtype.kind == "b" or name == "attn_mask":
            t[name] = torch.tensor(a.astype(bool))
        else:
            t[name] = torch.tensor(a.astype("int64"))
    return t


def _index(t, name, B, n, default, A=1):
    """Positions (B, n), or with A >= 2 axes (B, n, A): a tensor [n] / [B, n] (A = 1) or [n, A] /
    [B, n, A]; absent: default on every axis."""
    if name not in t:
        d = default.expand(B, n)
        return d if A == 1 else d[..., None].expand(B, n, A)
    p = t[name]
    if A == 1:
        return p.expand(B, n) if p.dim() == 1 else p
    return p.expand(B, n, A) if p.dim() == 2 else p


def axes(mod, meta, t):
    """Position axes the method reads per token (rope_sections, rope_mixed): 1 for the others."""
    return mod.axes(meta, t) if hasattr(mod, "axes") else 1


def _core(mod, ctx, q, k, v):
    """q (B, H, T, D), k v (B, Hkv, Tk, D) as projected -> scores, probs, o (B, H, T, D)."""
    if hasattr(mod, "project"):
        q, k, v = mod.project(ctx, q, k, v)
    if hasattr(mod, "rotate"):
        q, k = mod.rotate(ctx, q, k)
    rope_values = ctx.get("rope_values", False, bool)
    if rope_values:  # the values rotated as the keys, the output rotated back (m_rope.output)
        v = mod.rotate_values(ctx, v)
    rep = ctx.H // ctx.Hkv
    k = k.repeat_interleave(rep, 1)
    v = v.repeat_interleave(rep, 1)
    if hasattr(mod, "score"):
        s = mod.score(ctx, q, k)
    else:
        s = ctx.scale * q @ k.transpose(-1, -2)
    if hasattr(mod, "bias"):
        s = s + mod.bias(ctx)
    s = s.masked_fill(~ctx.visible(), float("-inf"))
    if "attn_mask" in ctx.t:
        m = ctx.t["attn_mask"]
        m = m[None] if m.dim() == 2 else m
        s = s.masked_fill(~m[:, None], float("-inf"))
    if ctx.get("attention_sinks", False, bool):
        # HF gpt_oss eager_attention_forward: a learned logit per head as one more column of
        # every row, in the softmax, then dropped (it has no value)
        sinks = ctx.t["sinks"].reshape(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)
        combined = torch.cat([s, sinks], -1)
        p = torch.softmax(combined - combined.max(-1, keepdim=True).values, -1)[..., :-1]
    else:
        p = torch.softmax(s, -1)
    o = p @ v
    if hasattr(mod, "value"):
        o = o + mod.value(ctx, p)
    if rope_values:
        o = mod.output(ctx, o)
    return s, p, o


def _grads(out, t, y, dy, skip):
    grads_of = [n for n, a in t.items() if a.dtype == torch.float64 and n not in skip]
    gs = torch.autograd.grad(out[y], [t[n] for n in grads_of], dy, allow_unused=True)
    for n, g in zip(grads_of, gs):
        out["dx" if n == "x" else "d" + n] = torch.zeros_like(t[n]) if g is None else g


def layer_positions(mod, pos, B, T, M):
    """The layer's query and key positions: its positions for both, or for a method that reads
    none (Transformer-XL) queries at M + t and keys (memory first) at 0 .. M+T-1."""
    if getattr(mod, "READS_POSITIONS", True):
        return pos, pos
    return torch.arange(M, M + T).expand(B, T), torch.arange(M + T).expand(B, M + T)


def attend_qkv(meta, tensors):
    """The projected form: q, k, v (and positions, key_positions, attn_mask, do) -> o, scores,
    probs, and with do: dq, dk, dv, d<name>."""
    mod = method_module(meta["method"])
    t = _inputs(tensors, ("do",))
    q, k, v = t["q"], t["k"], t["v"]
    batched = q.dim() == 3
    if not batched:
        q, k, v = q[None], k[None], v[None]
    B, T, C = q.shape
    Tk = k.shape[1]
    H = int(meta["heads"])
    D = C // H
    Hkv = int(meta.get("kv_heads", H))
    A = axes(mod, meta, t)
    pos = _index(t, "positions", B, T, torch.arange(Tk - T, Tk), A)
    kpos = _index(t, "key_positions", B, Tk, torch.arange(Tk), A)
    ctx = Ctx(meta, t, B, T, Tk, H, Hkv, D, pos, kpos)
    if hasattr(mod, "defaults"):
        mod.defaults(ctx)
    s, p, o = _core(mod, ctx, q.view(B, T, H, D).transpose(1, 2), k.view(B, Tk, Hkv, D).transpose(1, 2),
                    v.view(B, Tk, Hkv, D).transpose(1, 2))
    out = {"o": o.transpose(1, 2).reshape(B, T, C), "scores": s, "probs": p}
    if not batched:
        out = {n: a[0] for n, a in out.items()}
    if "do" in t:
        _grads(out, t, "o", t["do"], ("do",))
    return {n: a.detach() for n, a in out.items()}


def attend(meta, tensors):
    """meta: dict of str -> str; tensors: dict of name -> numpy array (F32/I32/I64/BOOL/U8).
    Returns dict of name -> float64 torch tensor: y, scores, probs, and with dy: dx, d<name>
    (the projected form, with q in place of x: see attend_qkv)."""
    if "q" in tensors:
        return attend_qkv(meta, tensors)
    mod = method_module(meta["method"])
    if hasattr(mod, "attend"):
        return mod.attend(meta, tensors)
    t = _inputs(tensors, ("dy", "mems"))
    x = t["x"]
    batched = x.dim() == 3
    if not batched:
        x = x[None]
    B, T, C = x.shape
    H = int(meta["heads"])
    D = C // H
    Hkv = int(meta.get("kv_heads", H))
    mems = t.get("mems")
    if mems is not None and not batched:
        mems = mems[None]
    M = 0 if mems is None else mems.shape[1]
    pos, kpos = layer_positions(mod, _index(t, "positions", B, T, torch.arange(T), axes(mod, meta, t)), B, T, M)
    ctx = Ctx(meta, t, B, T, M + T, H, Hkv, D, pos, kpos)
    if hasattr(mod, "defaults"):
        mod.defaults(ctx)

    def lin(inp, w, b):
        y = inp @ t[w].T
        return y + t[b] if b in t else y

    xe = mod.embed(ctx, x) if hasattr(mod, "embed") else x
    kvin = torch.cat([mems, xe], 1) if M else xe
    q = lin(xe, "wq", "bq").view(B, T, H, D).transpose(1, 2)
    k = lin(kvin, "wk", "bk").view(B, M + T, Hkv, D).transpose(1, 2)
    v = lin(kvin, "wv", "bv").view(B, M + T, Hkv, D).transpose(1, 2)
    s, p, o = _core(mod, ctx, q, k, v)
    o = o.transpose(1, 2).reshape(B, T, C)
    y = lin(o, "wo", "bo")
    out = {"y": y, "scores": s, "probs": p}
    if not batched:
        out = {n: a[0] for n, a in out.items()}
    if "dy" in t:
        _grads(out, t, "y", t["dy"], ("dy", "mems"))
    return {n: a.detach() for n, a in out.items()}
