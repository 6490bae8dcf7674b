"""ALiBi (Press et al.), slopes as ofirpress/attention_with_linear_biases get_slopes."""
import math

import torch


def get_slopes(n):
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + get_slopes(2 * c)[0::2][:n - c]


def bias(ctx):
    if "alibi_slopes" in ctx.t:
        m = ctx.t["alibi_slopes"]
    else:
        m = torch.tensor(get_slopes(ctx.H))
    d = -ctx.rel()  # i - j
    if not ctx.causal:
        d = d.abs()
    return -m[None, :, None, None] * d[:, None].to(torch.float64)


def init(name, shape, rng):
    return (0.1 + rng.random(shape)).astype("float32")


CASES = [
    dict(name="h5", T=6, H=5, D=4, causal=True),
    dict(name="h6_bidir", T=6, H=6, D=4),
    dict(name="h12_causal", T=5, H=12, D=2, causal=True),
    dict(name="slopes", T=6, H=3, D=4, causal=True, tensors={"alibi_slopes": (3,)}),
    dict(name="slopes_bidir_gapped", T=5, H=2, D=4, B=2, positions="gapped",
         tensors={"alibi_slopes": (2,)}),
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True),
    # learned attention sinks beside the bias (GPT-OSS's sinks on another method)
    dict(name="sinks", T=6, H=3, D=4, causal=True, positions="gapped", B=2, meta={"attention_sinks": "true"},
         tensors={"sinks": (3,)}),
]

PROJ_CASES = [dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2)]
