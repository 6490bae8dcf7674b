"""posenc's PyTorch reference of one attention layer, in float64 with autograd.

Independent of the C code: written from shared/spec/ and the upstream implementations each
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


class Ctx:
    """What a hook sees: the settings (cfg, parsed), sizes, positions, tensors."""

    def __init__(self, meta, t, B, T, M, H, Hkv, D, pos):
        self.meta = dict(meta)
        self.t = t          # name -> float64 tensor (requires_grad for F32 inputs)
        self.B, self.T, self.M, self.Tk = B, T, M, M + T
        self.H, self.Hkv, self.D, self.C = H, Hkv, D, H * D
        self.pos = pos      # (B, T) int64
        self.causal = BOOL[meta.get("causal", "false")]
        self.scale = float(meta["scale"]) if "scale" in meta else 1.0 / math.sqrt(D)

    def get(self, key, default, cast=str):
        v = self.meta.get(key)
        if v is None:
            return default
        if cast is bool:
            return BOOL[v]
        return cast(v)

    def rel(self):
        """(B, T, Tk) j - i from positions (no memory)."""
        return self.pos[:, None, :] - self.pos[:, :, None]


def method_module(name):
    return importlib.import_module("m_" + name)


def attend(meta, tensors):
    """meta: dict of str -> str; tensors: dict of name -> numpy array (F32/I32/I64).
    Returns dict of name -> float64 torch tensor: y, scores, probs, and with dy: dx, d<name>."""
    mod = method_module(meta["method"])
    if hasattr(mod, "attend"):
        return mod.attend(meta, tensors)
    t = {}
    for name, a in tensors.items():
        if a.dtype.kind == "f":
            t[name] = torch.tensor(a, dtype=torch.float64, requires_grad=name not in ("dy", "mems"))
        else:
            t[name] = torch.tensor(a.astype("int64"))
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
    if "positions" in t:
        pos = t["positions"]
        pos = pos.expand(B, T) if pos.dim() == 1 else pos
    else:
        pos = torch.arange(T).expand(B, T)
    ctx = Ctx(meta, t, B, T, M, H, Hkv, D, pos)
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
    if hasattr(mod, "project"):
        q, k, v = mod.project(ctx, q, k, v)
    if hasattr(mod, "rotate"):
        q, k = mod.rotate(ctx, q, k)
    rep = H // Hkv
    k = k.repeat_interleave(rep, 1)
    v = v.repeat_interleave(rep, 1)
    if hasattr(mod, "score"):
        s = mod.score(ctx, q, k)
    else:
        s = ctx.scale * q @ k.transpose(-1, -2)
    if hasattr(mod, "bias"):
        s = s + mod.bias(ctx)
    if ctx.causal:
        i = torch.arange(T)[:, None] + M
        j = torch.arange(M + T)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    p = torch.softmax(s, -1)
    o = p @ v
    if hasattr(mod, "value"):
        o = o + mod.value(ctx, p)
    o = o.transpose(1, 2).reshape(B, T, C)
    y = lin(o, "wo", "bo")
    out = {"y": y, "scores": s, "probs": p}
    if not batched:
        out = {n: a[0] for n, a in out.items()}
    if "dy" in t:
        dy = t["dy"]
        grads_of = [n for n, a in t.items() if a.dtype == torch.float64 and n not in ("dy", "mems")]
        gs = torch.autograd.grad(out["y"], [t[n] for n in grads_of], dy, allow_unused=True)
        for n, g in zip(grads_of, gs):
            out["dx" if n == "x" else "d" + n] = torch.zeros_like(t[n]) if g is None else g
    return {n: a.detach() for n, a in out.items()}
