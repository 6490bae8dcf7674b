"""TUPE (Ke et al. 2020; guolinke/TUPE TransformerSentenceEncoder): untied positional attention.

    pt     = LayerNorm(pos_table)  (pos_ln_w, pos_ln_b, eps 1e-5); position p uses row p + 1
    A[a,b] = scale (pt_a uq^T + uq_b)_h . (pt_b uk^T + uk_b)_h,   scale = 1/sqrt(2D)
    s      = scale q.k + A[i+1, j+1] + rel_bias[bucket(j - i), h]  (T5 bidirectional buckets)
With tupe_cls (default) the first token is [CLS], as the reference's encoder resets it: column 0
takes A[1, 1] (others to [CLS]), then row 0 (its diagonal included) takes A[0, 0] ([CLS] to
others); buckets likewise: column 0 = num_buckets, then row 0 = num_buckets // 2."""
import math

import torch

import m_t5

BASE_META = {"num_buckets": "8", "max_distance": "16"}


def defaults(ctx):
    if "scale" not in ctx.meta:
        ctx.scale = 1.0 / math.sqrt(2 * ctx.D)


def tensors(meta, H, D, npos):
    C = H * D
    return {"pos_table": (npos + 2, C), "pos_ln_w": (C,), "pos_ln_b": (C,), "uq": (C, C),
            "uq_b": (C,), "uk": (C, C), "uk_b": (C,),
            "rel_bias": (int(meta.get("num_buckets", 32)) + 1, H)}


def init(name, shape, rng):
    if name == "pos_ln_w":
        return (0.5 + rng.random(shape)).astype("float32")
    a = 1.0 if name == "pos_table" else 0.5
    return (a * (2 * rng.random(shape) - 1)).astype("float32")


def bias(ctx):
    t, H, D, C = ctx.t, ctx.H, ctx.D, ctx.C
    pt = torch.nn.functional.layer_norm(t["pos_table"], (C,), t["pos_ln_w"], t["pos_ln_b"], 1e-5)
    pq = (pt @ t["uq"].T + t["uq_b"]).view(-1, H, D)       # (N, H, D)
    pk = (pt @ t["uk"].T + t["uk_b"]).view(-1, H, D)
    A = ctx.scale * torch.einsum("bihd,bjhd->bhij", pq[ctx.pos + 1], pk[ctx.kpos + 1])  # row p + 1
    nb = ctx.get("num_buckets", 32, int)
    bucket = m_t5.bucket(ctx.rel(), True, nb, ctx.get("max_distance", 128, int))   # (B, T, Tk)
    if ctx.get("tupe_cls", True, bool):
        a00 = ctx.scale * (pq[0] * pk[0]).sum(-1)            # (H) [CLS] to others
        a11 = ctx.scale * (pq[1] * pk[1]).sum(-1)            # (H) others to [CLS]
        i = torch.arange(ctx.T)[:, None] + ctx.M  # token indices: [CLS] is token 0
        j = torch.arange(ctx.Tk)[None, :]
        A = torch.where(j == 0, a11[None, :, None, None], A)
        A = torch.where(i == 0, a00[None, :, None, None], A)
        bucket = torch.where(j == 0, torch.full_like(bucket, nb), bucket)
        bucket = torch.where(i == 0, torch.full_like(bucket, nb // 2), bucket)
    return A + t["rel_bias"][bucket].permute(0, 3, 1, 2)


CASES = [
    dict(name="nocls", T=6, H=2, D=4, meta={"tupe_cls": "false"}),
    dict(name="nocls_batch_gapped", T=5, H=3, D=2, B=2, meta={"tupe_cls": "false"},
         positions="gapped"),
    dict(name="cls_causal_h5", T=6, H=5, D=2, causal=True),
    dict(name="default_buckets", T=12, H=2, D=4, meta={"num_buckets": "32", "max_distance": "128"},
         positions=[0, 1, 3, 7, 12, 20, 40, 64, 100, 128, 150, 300]),
    dict(name="far", T=6, H=2, D=4, positions=[0, 1, 2, 50, 51, 400]),
    dict(name="far_nocls", T=6, H=2, D=4, meta={"tupe_cls": "false"}, positions=[3, 4, 30, 31, 90, 200]),
    dict(name="buckets_small", T=7, H=2, D=4, meta={"num_buckets": "4", "max_distance": "5"},
         positions="gapped"),
    dict(name="t2", T=2, H=2, D=4),
    dict(name="t1_nocls", T=1, H=3, D=2, meta={"tupe_cls": "false"}),
    dict(name="scaled", T=5, H=2, D=4, meta={"scale": "0.7"}),
]

PROJ_CASES = [  # [CLS] is token 0: key index 0, and the first query only when Tk == T
    dict(name="proj_cls_full", T=5, Tk=5, H=2, D=4),
    dict(name="proj_nocls_decode", T=1, Tk=6, H=2, D=4, causal=True, meta={"tupe_cls": "false"}),
]
