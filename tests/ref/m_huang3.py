"""Huang et al. 2020, method 3: s = scale sum_d q_d k_d rel_vec[a + K, d], a = clip(i - j, -K, K)."""
import torch

from m_huang1 import distance

BASE_META = {"max_rel": "3"}


def tensors(meta, H, D, npos):
    K = int(meta.get("max_rel", 64))
    return {"rel_vec": (2 * K + 1, D)}


def score(ctx, q, k):
    a, K = distance(ctx)
    e = ctx.t["rel_vec"][a + K]  # (B, T, T, D)
    return ctx.scale * torch.einsum("bhid,bhjd,bijd->bhij", q, k, e)


CASES = [
    dict(name="k0", T=4, H=2, D=4, meta={"max_rel": "0"}),
    dict(name="default_k", T=7, H=3, D=4, B=2, meta={"max_rel": None},
         positions=[[0, 10, 30, 64, 65, 100, 200], [5, 6, 7, 70, 71, 72, 300]]),
    dict(name="million_causal", T=6, H=2, D=4, positions="million", causal=True),
]
