"""T5 relative bias, buckets exactly as HF T5Attention._relative_position_bucket (float32 log)."""
import math
import os

import torch

BASE_META = {"num_buckets": "8", "max_distance": "16"}


def bucket(rel, bidirectional, num_buckets, max_distance):
    """rel = j - i (int64 tensor). Follows HF: float32 log, truncation by .to(long)."""
    out = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        out = out + (rel > 0).to(torch.long) * num_buckets
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return out + torch.where(small, rel, large)


def defaults(ctx):
    if "scale" not in ctx.meta:
        ctx.scale = 1.0


def tensors(meta, H, D, npos):
    return {"rel_bias": (int(meta.get("num_buckets", 32)), H)}


def bias(ctx):
    bidir = ctx.get("bidirectional", not ctx.causal, bool)
    b = bucket(ctx.rel(), bidir, ctx.get("num_buckets", 32, int), ctx.get("max_distance", 128, int))
    return ctx.t["rel_bias"][b].permute(0, 3, 1, 2)  # (B, H, T, T)


CASES = [
    dict(name="default_buckets", T=40, H=2, D=4, meta={"num_buckets": "32", "max_distance": "128"},
         positions=[0, 1, 2, 3, 5, 8, 13, 16, 21, 32, 34, 55, 64, 89, 127, 128, 129, 144, 200, 233,
                    256, 300, 377, 400, 512, 610, 700, 987, 1000, 1597, 2000, 2584, 3000, 4181,
                    5000, 6765, 8000, 10946, 20000, 100000]),
    dict(name="unidir_noncausal", T=9, H=2, D=4, meta={"bidirectional": "false"}),
    dict(name="bidir_causal", T=9, H=3, D=4, meta={"bidirectional": "true"}, causal=True),
    dict(name="scaled", T=5, H=2, D=4, meta={"scale": "0.5"}),
]


def write_tables(out, write):
    """Bucket tables straight from the HF formula, for tests/unit/test_properties.c: every
    (num_buckets, max_distance, bidirectional) regime over distances -3000..3000 plus far ones."""
    import numpy as np
    rel = np.concatenate([np.arange(-3000, 3001), [-10**6, -65536, 65536, 10**6, 2**31 - 1]])
    regimes = [(32, 128), (8, 16), (16, 20), (64, 256), (4, 5), (10, 100), (6, 7), (128, 1024)]
    t = {"rel": rel.astype(np.int64)}
    for nb, md in regimes:
        for bidir in (0, 1):
            b = bucket(torch.tensor(rel), bool(bidir), nb, md).numpy().astype(np.int32)
            t[f"b_{nb}_{md}_{bidir}"] = b
    write(os.path.join(out, "t5_buckets.safetensors"), t)

PROJ_CASES = [dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2)]
