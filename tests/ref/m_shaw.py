"""Shaw et al. 2018: clipped relative key and value vectors shared by heads."""
BASE_META = {"max_rel": "2"}


def tensors(meta, H, D, npos):
    K = int(meta.get("max_rel", 16))
    return {"rel_k": (2 * K + 1, D), "rel_v": (2 * K + 1, D)}


def index(ctx):
    K = ctx.get("max_rel", 16, int)
    return ctx.rel().clamp(-K, K) + K  # (B, T, T)


def score(ctx, q, k):
    rk = ctx.t["rel_k"][index(ctx)]  # (B, T, T, D)
    s = q @ k.transpose(-1, -2) + torch_einsum("bhid,bijd->bhij", q, rk)
    return ctx.scale * s


def value(ctx, p):
    rv = ctx.t["rel_v"][index(ctx)]
    return torch_einsum("bhij,bijd->bhid", p, rv)


def torch_einsum(eq, *a):
    import torch
    return torch.einsum(eq, *a)


CASES = [
    dict(name="k0", T=4, H=2, D=4, meta={"max_rel": "0"}),
    dict(name="wide", T=6, H=2, D=4, meta={"max_rel": "16"}, causal=True),
]
