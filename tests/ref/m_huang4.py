"""Huang et al. 2020, method 4: s = scale (q.k + q.rel_vec[a + K] + k.rel_vec[a + K]),
a = clip(i - j, -K, K). With K = max_position_embeddings - 1 this is HF BERT's
relative_key_query: distance = position_ids_l - position_ids_r (query minus key), row
distance + max_position_embeddings - 1, both einsums on the same row."""
import torch

from m_huang1 import distance

BASE_META = {"max_rel": "3"}


def tensors(meta, H, D, npos):
    K = int(meta.get("max_rel", 64))
    return {"rel_vec": (2 * K + 1, D)}


def score(ctx, q, k):
    a, K = distance(ctx)
    e = ctx.t["rel_vec"][a + K]  # (B, T, T, D)
    s = q @ k.transpose(-1, -2)
    s = s + torch.einsum("bhid,bijd->bhij", q, e) + torch.einsum("bhjd,bijd->bhij", k, e)
    return ctx.scale * s


CASES = [
    dict(name="k0", T=4, H=2, D=4, meta={"max_rel": "0"}),
    dict(name="default_k", T=7, H=3, D=4, B=2, meta={"max_rel": None},
         positions=[[0, 10, 30, 64, 65, 100, 200], [5, 6, 7, 70, 71, 72, 300]]),
    dict(name="million_causal", T=6, H=2, D=4, positions="million", causal=True),
    dict(name="bert_window", T=6, H=2, D=4, meta={"max_rel": "5"}),  # K = T - 1: no clipping
]
