"""PoPE (Gopalakrishnan et al. 2025, arXiv 2509.10534), with the conventions of
lucidrains/PoPE-pytorch (PoPE_pytorch/pope.py, attention.py): the first R dims of a head
(rotary_dim, default D) are R frequencies w_d = rope_base^(-d/R); q and k become magnitudes
softplus(x_d) with phases p w_d (queries) and p w_d + clamp(pope_bias[h, d], -2 pi, 0) (keys,
h the query head: the keys are repeated to the query heads first), laid out as (mag cos, mag sin)
per d, interleaved, then the D - R dims left as they are; the score is the plain dot product of
those 2R + (D - R) wide vectors times scale. Written from the description, in float64; the bias
gets its gradient by autograd (clamp's: kept at the ends of [-2 pi, 0])."""
import math

import torch
import torch.nn.functional as F


def _polar(x, ang, R):
    """x (..., D), ang (..., R) -> (..., 2R + D - R)"""
    m = F.softplus(x[..., :R])
    y = torch.stack([m * ang.cos(), m * ang.sin()], -1).flatten(-2)  # (d two)
    return torch.cat([y, x[..., R:]], -1)


def score(ctx, q, k):  # q (B, H, T, D), k (B, H, Tk, D)
    D = ctx.D
    R = ctx.get("rotary_dim", D, int)
    base = ctx.get("rope_base", 10000.0, float)
    w = base ** (-torch.arange(R, dtype=torch.float64) / R)
    bias = ctx.t["pope_bias"].clamp(-2 * math.pi, 0.0)  # (H, R)
    aq = ctx.pos.to(torch.float64)[:, None, :, None] * w  # (B, 1, T, R)
    ak = ctx.kpos.to(torch.float64)[:, None, :, None] * w + bias[None, :, None, :]  # (B, H, Tk, R)
    qp, kp = _polar(q, aq, R), _polar(k, ak, R)
    return ctx.scale * qp @ kp.transpose(-1, -2)


def tensors(meta, H, D, npos):
    R = int(meta.get("rotary_dim", D))
    return {"pope_bias": (H, R)}


def init(name, shape, rng):
    """U(-7.5, 1): most inside the clamp's [-2 pi, 0], some beyond either end (no gradient)"""
    return (-7.5 + 8.5 * rng.random(shape)).astype("float32")


CASES = [
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="rotary_dim", T=5, H=3, D=6, meta={"rotary_dim": "3", "rope_base": "500"}),
    dict(name="million", T=4, H=2, D=8, positions="million", causal=True),
    dict(name="large", T=5, H=2, D=4, meta={"scale": "0.002"}, large=60.0),
]


def edit_inputs(t, spec, rng):
    """case large: q and k past softplus's threshold of 20 (where it is x itself)"""
    if "large" in spec:
        t["wq"] = (t["wq"] * spec["large"]).astype("float32")
        t["wk"] = (t["wk"] * spec["large"]).astype("float32")

PROJ_CASES = [
    dict(name="proj_gqa_decode", T=1, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="offset"),
    dict(name="proj_million_batch", T=3, Tk=5, H=2, D=4, B=2, positions="million", causal=True),
]
