"""Sinusoidal (Vaswani et al.), three layouts; angles in float64."""
PROJECTED = False  # acts on x: no projected form
import math

import torch


def table(pos, C, layout, base):
    """P[pos] (..., C) in float64."""
    half = C // 2
    t = torch.arange(half, dtype=torch.float64)
    if layout == "t2t":  # tensor2tensor get_timing_signal_1d
        w = torch.exp(-t * math.log(base) / (half - 1))
    else:
        w = torch.exp(-(2 * t / C) * math.log(base))
    ang = pos.to(torch.float64)[..., None] * w
    if layout == "interleaved":
        return torch.stack([ang.sin(), ang.cos()], -1).flatten(-2)
    return torch.cat([ang.sin(), ang.cos()], -1)


def embed(ctx, x):
    P = table(ctx.pos + ctx.get("shift", 0, int), ctx.C, ctx.get("sin_layout", "interleaved"),
              ctx.get("sin_base", 10000.0, float))
    return x + P


CASES = [
    dict(name="concat", T=5, H=2, D=4, meta={"sin_layout": "concat"}),
    dict(name="t2t_base", T=5, H=3, D=4, meta={"sin_layout": "t2t", "sin_base": "500"}),
    dict(name="million", T=4, H=2, D=8, positions="million"),
    dict(name="shift_causal", T=6, H=2, D=4, meta={"shift": "7"}, causal=True),
]
