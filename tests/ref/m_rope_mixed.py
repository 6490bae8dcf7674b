"""RoPE-Mixed (Heo et al. 2024, naver-ai/rope-vit compute_mixed_cis): pair t of head h rotates by
sum_a pos[a] * rope_freqs[a, h, t]; float64 angles; rope_freqs gets its gradient by autograd."""
import torch

from m_rope import rotate_ang


def axes(meta, t):
    return int(t["rope_freqs"].shape[0])


def rotate(ctx, q, k):
    f = ctx.t["rope_freqs"]  # (A, H, r/2)
    layout = ctx.get("rope_layout", "interleaved")

    def one(x, pos):
        p = (pos if pos.dim() == 3 else pos[..., None]).to(torch.float64)  # (B, n, A)
        return rotate_ang(x, torch.einsum("bna,aht->bhnt", p, f), 1.0, layout)
    return one(q, ctx.pos), one(k, ctx.kpos)


def tensors(meta, H, D, npos):
    r = int(meta.get("rotary_dim", D))
    return {"rope_freqs": (1, H, r // 2)}


def init(name, shape, rng):
    return (0.5 * (2 * rng.random(shape) - 1)).astype("float32")


# a 3 x 2 grid of patches: (x, y) positions, as a ViT's
GRID = [[x, y] for y in range(2) for x in range(3)]

CASES = [
    dict(name="grid", T=6, H=2, D=8, pos_axes=GRID, tensors={"rope_freqs": (2, 2, 4)}),
    dict(name="grid_half_partial", T=6, H=3, D=8, pos_axes=GRID, causal=True,
         meta={"rope_layout": "half", "rotary_dim": "4"}, tensors={"rope_freqs": (2, 3, 2)}),
    dict(name="grid_batch", T=6, H=2, D=4, B=2, pos_axes=[GRID, [[p[0] + 5, 2 * p[1]] for p in GRID]],
         tensors={"rope_freqs": (2, 2, 2)}),
]
PROJ_CASES = [
    dict(name="proj_grid", T=2, Tk=6, H=2, D=8, pos_axes=GRID[4:], kpos_axes=GRID,
         tensors={"rope_freqs": (2, 2, 4)}),
]
