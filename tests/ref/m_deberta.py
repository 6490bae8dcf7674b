"""DeBERTa disentangled attention, as HF DebertaV2 (DisentangledSelfAttention): c2p and p2c
terms over the relative position i - j, log-bucketed as make_log_bucket_position.

The bucket is computed the way HF computes it in a model: PyTorch's default dtype float32 (the
ratio, both logs, the ceil), whatever the default dtype of this float64 reference. The p2c term
is formed HF's way (k Qr^T gathered at the transposed, negated relative position, then
transposed) rather than from the spec's "same index r", so the fixtures check that the two agree.
"""
PROJ_META = {"share_att_key": "false"}  # the projected form has no wq, wk to share
import contextlib
import math
import os

import torch

BASE_META = {"position_buckets": "6", "max_relative_positions": "12"}


@contextlib.contextmanager
def _float32_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def log_bucket(rel, bucket_size, max_position):
    """rel = i - j (int64 tensor) -> int64 tensor, HF make_log_bucket_position under float32."""
    with _float32_default():
        mid = bucket_size // 2
        sign = torch.sign(rel)
        inner = (rel < mid) & (rel > -mid)
        abs_pos = torch.where(inner, torch.tensor(mid - 1).type_as(rel), rel.abs())
        denom = torch.log(torch.tensor((max_position - 1) / mid))  # float32 of a double
        log_pos = torch.ceil(torch.log(abs_pos / mid) / denom * (mid - 1)) + mid
        out = torch.where(abs_pos <= mid, rel.type_as(log_pos), log_pos * sign)
        return out.to(torch.long)


def settings(ctx):
    pb = ctx.get("position_buckets", 256, int)
    mrp = ctx.get("max_relative_positions", 512, int)
    terms = ctx.get("pos_att", "c2p|p2c").split("|")
    share = ctx.get("share_att_key", True, bool)
    return pb, mrp, pb if pb > 0 else mrp, "c2p" in terms, "p2c" in terms, share


def relative(ctx, rel):
    """rel (i - j) -> bucketed as the configuration says."""
    pb, mrp = settings(ctx)[:2]
    return log_bucket(rel, pb, mrp) if pb > 0 else rel


def defaults(ctx):
    c2p, p2c = settings(ctx)[3:5]
    if "scale" not in ctx.meta:
        ctx.scale = 1.0 / math.sqrt(ctx.D * (1 + c2p + p2c))


def tensors(meta, H, D, npos):
    pb = int(meta.get("position_buckets", 256))
    mrp = int(meta.get("max_relative_positions", 512))
    S = pb if pb > 0 else mrp
    C = H * D
    out = {"rel_embeddings": (2 * S, C)}
    if meta.get("share_att_key", "true") == "false":
        terms = meta.get("pos_att", "c2p|p2c").split("|")
        if "c2p" in terms:
            out["pos_key_w"] = (C, C)
        if "p2c" in terms:
            out["pos_query_w"] = (C, C)
    return out


def init(name, shape, rng):
    import numpy as np
    a = 1 / np.sqrt(shape[1]) if name in ("pos_key_w", "pos_query_w") else 0.5
    return (a * (2 * rng.random(shape) - 1)).astype(np.float32)


def _project(ctx, w, b):
    """rel_embeddings w^T + b, split into heads: (H, 2S, D)."""
    t = ctx.t
    p = t["rel_embeddings"] @ t[w].T
    if b in t:
        p = p + t[b]
    return p.view(p.shape[0], ctx.H, ctx.D).transpose(0, 1)


def score(ctx, q, k):
    S, c2p, p2c, share = settings(ctx)[2:]
    rel = relative(ctx, ctx.pos[:, :, None] - ctx.kpos[:, None, :])  # (B, T, Tk) bucket(i - j)
    B, H, T, Tk = q.shape[0], ctx.H, ctx.T, ctx.Tk
    s = q @ k.transpose(-1, -2)
    if c2p:
        kr = _project(ctx, *(("wk", "bk") if share else ("pos_key_w", "pos_key_b")))
        c2p_att = q @ kr.transpose(-1, -2)  # (B, H, T, 2S)
        c2p_pos = torch.clamp(rel + S, 0, 2 * S - 1)
        s = s + torch.gather(c2p_att, -1, c2p_pos[:, None].expand(B, H, T, Tk))
    if p2c:
        qr = _project(ctx, *(("wq", "bq") if share else ("pos_query_w", "pos_query_b")))
        p2c_att = k @ qr.transpose(-1, -2)  # (B, H, Tk, 2S), row = key
        # the spec's k_j . Qr[r_ij], r_ij the same index as c2p's (HF's -r_pos of the transposed
        # pair, since the bucket is odd): for each key row j gather column r_ij, then transpose
        p2c_pos = torch.clamp(rel + S, 0, 2 * S - 1).transpose(-1, -2)  # (B, Tk, T)
        s = s + torch.gather(p2c_att, -1, p2c_pos[:, None].expand(B, H, Tk, T)).transpose(-1, -2)
    return ctx.scale * s


FAR = [0, 1, 2, 3, 5, 8, 13, 16, 21, 32, 34, 55, 64, 89, 127, 128, 129, 144, 200, 233, 255, 256,
       257, 300, 377, 400, 510, 511, 512, 513, 610, 700, 987, 1000, 1597, 2584, 4181, 10946,
       100000, 1000000]

CASES = [
    # HF's defaults (256 buckets, 512 positions) over distances up to 10^6
    dict(name="default_far", T=40, H=2, D=4, meta={"position_buckets": "256",
                                                  "max_relative_positions": "512"}, positions=FAR),
    dict(name="million", T=6, H=2, D=4, positions="million"),
    dict(name="nobuckets", T=9, H=2, D=4, meta={"position_buckets": "0", "max_relative_positions": "3"}),
    dict(name="nobuckets_neg", T=7, H=3, D=4, B=2, positions="gapped",
         meta={"position_buckets": "-1", "max_relative_positions": "5"}),
    dict(name="c2p", T=8, H=2, D=4, positions=[0, 1, 3, 6, 10, 15, 21, 40], meta={"pos_att": "c2p"}),
    dict(name="p2c", T=8, H=2, D=4, positions=[0, 1, 3, 6, 10, 15, 21, 40], meta={"pos_att": "p2c"}),
    dict(name="p2c_c2p_causal", T=7, H=2, D=4, causal=True, meta={"pos_att": "p2c|c2p"}),
    dict(name="unshared", T=8, H=2, D=4, B=2, positions="gapped", meta={"share_att_key": "false"},
         tensors={"pos_key_b": (8,), "pos_query_b": (8,)}),
    dict(name="unshared_c2p", T=7, H=2, D=4, meta={"share_att_key": "false", "pos_att": "c2p"}),
    dict(name="unshared_p2c_bias", T=7, H=3, D=2, meta={"share_att_key": "false", "pos_att": "p2c"},
         tensors={"pos_query_b": (6,), "pos_key_w": (6, 6)}),  # pos_key_w given but unused
    dict(name="scaled", T=5, H=2, D=4, meta={"scale": "0.3"}),
    dict(name="small_buckets", T=9, H=2, D=4, positions=[0, 2, 3, 7, 11, 20, 33, 60, 100],
         meta={"position_buckets": "2", "max_relative_positions": "100"}),
    dict(name="odd_buckets", T=9, H=2, D=4, positions=[0, 2, 3, 7, 11, 20, 33, 60, 100],
         meta={"position_buckets": "7", "max_relative_positions": "30"}),
    # max_relative_positions - 1 == position_buckets / 2: HF's log ratio is infinite and the
    # cast gives INT64_MIN, so every distance beyond the middle reads row 0
    dict(name="degenerate", T=9, H=2, D=4, positions=[0, 2, 3, 7, 11, 20, 33, 60, 100],
         meta={"position_buckets": "8", "max_relative_positions": "5"}),
    dict(name="span_below_mid", T=9, H=2, D=4, positions=[0, 2, 3, 7, 11, 20, 33, 60, 100],
         meta={"position_buckets": "16", "max_relative_positions": "4"}),
]


REGIMES = [(256, 512), (256, 1024), (256, 4096), (512, 1024), (128, 512), (64, 128), (32, 64),
           (8, 16), (6, 12), (6, 13), (4, 8), (2, 2), (2, 100), (3, 10), (16, 4), (16, 9),
           (10, 6), (256, 10**6), (128, 100000), (5, 1)]


def write_tables(out, write):
    """Buckets straight from HF's formula under float32, for tests/unit/test_deberta.c: many
    (position_buckets, max_relative_positions) regimes over distances -5000..5000 and far ones
    (to 10^6 and beyond). Regimes with max_relative_positions - 1 == position_buckets / 2
    ((10, 6)) give HF's non-finite log ratio, which PyTorch casts to INT64_MIN on x86."""
    import numpy as np
    far = np.unique(np.concatenate([np.round(np.geomspace(5000, 2 * 10**6, 400)),
                                    [10**4, 65535, 65536, 10**5, 10**6 - 1, 10**6, 10**6 + 1,
                                     2**24 - 1, 2**24, 2**24 + 1, 10**8, 2**31 - 1]]))
    rel = np.concatenate([np.arange(-5000, 5001), far, -far]).astype(np.int64)
    t = {"rel": rel}
    for bs, mp in REGIMES:
        t[f"b_{bs}_{mp}"] = log_bucket(torch.tensor(rel), bs, mp).numpy().astype(np.int64)
    write(os.path.join(out, "deberta_buckets.safetensors"), t)

PROJ_CASES = [
    dict(name="proj_c2p_far", T=2, Tk=8, H=2, D=4, positions="offset", causal=True, meta={"pos_att": "c2p"}),
    dict(name="proj_p2c_nobuckets", T=3, Tk=6, H=2, D=4, positions="cross",
         meta={"pos_att": "p2c", "position_buckets": "0", "max_relative_positions": "4"}),
]
