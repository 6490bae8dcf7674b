"""FoPE (Hua et al. 2024; vLLM rotary_embedding/fope.py): each of the first F pairs (half
layout) gets c = sum_u cos(p w_u) fope_cos[h, u, d], s = sum_u sin(p w_u) fope_sin[h, u, d]
(w_u = base^(-2u/D), h the kv head, a query head reading its group's), x -> (x1 c - x2 s,
x2 c + x1 s); pairs past F pass through. float64; the tensors get their gradients by autograd."""
import math

import torch


def n_freq(meta, D):
    if "fope_num_freq" in meta:
        return int(meta["fope_num_freq"])
    base = float(meta.get("rope_base", 10000.0))
    if "max_position_embeddings" in meta:
        L = int(meta["max_position_embeddings"])
        return sum(base ** (-2 * u / D) > 2 * math.pi / L for u in range(D // 2))
    return D // 2


def rotate(ctx, q, k):
    D = ctx.D
    F, half = n_freq(ctx.meta, D), D // 2
    base = ctx.get("rope_base", 10000.0, float)
    w = base ** (-2 * torch.arange(F, dtype=torch.float64) / D)
    fc, fs = ctx.t["fope_cos"], ctx.t["fope_sin"]  # (Hc, F, F)

    def one(x, pos):  # x (B, h, n, D), the heads of kv head g // (h / Hkv)
        ang = pos.to(torch.float64)[..., None] * w  # (B, n, F)
        c = torch.einsum("bnu,hud->bhnd", ang.cos(), fc)  # (B, Hc, n, F)
        s = torch.einsum("bnu,hud->bhnd", ang.sin(), fs)
        B, nh, n, _ = x.shape
        c = torch.cat([c, torch.ones(B, c.shape[1], n, half - F, dtype=c.dtype)], -1)
        s = torch.cat([s, torch.zeros(B, s.shape[1], n, half - F, dtype=s.dtype)], -1)
        rep = nh // ctx.Hkv if c.shape[1] > 1 else nh
        c, s = c.repeat_interleave(rep, 1), s.repeat_interleave(rep, 1)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    return one(q, ctx.pos), one(k, ctx.kpos)


def tensors(meta, H, D, npos):
    F = n_freq(meta, D)
    Hc = int(meta.get("kv_heads", H)) if meta.get("fope_sep_head", "true") == "true" else 1
    return {"fope_cos": (Hc, F, F), "fope_sin": (Hc, F, F)}


def init(name, shape, rng):
    """the identity plus noise, as the library starts them, but far from RoPE"""
    import numpy as np
    return (np.eye(shape[-1])[None] + 0.3 * (2 * rng.random(shape) - 1)).astype("float32")


CASES = [
    dict(name="gqa", T=6, H=4, D=8, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="shared_clipped", T=6, H=2, D=16, causal=True,
         meta={"fope_sep_head": "false", "max_position_embeddings": "64", "rope_base": "500"}),
    dict(name="num_freq", T=5, H=3, D=8, meta={"fope_num_freq": "3"}),
    dict(name="million", T=4, H=2, D=8, positions="million", causal=True),
]

PROJ_CASES = [
    dict(name="proj_gqa_decode", T=1, Tk=7, H=4, D=8, kv_heads=2, causal=True, positions="offset"),
]
