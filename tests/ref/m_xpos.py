"""xPos (Sun et al.) with lucidrains/rotary-embedding-torch's conventions, in float64:
interleaved RoPE over the whole head (freqs 1/base^(2t/D)), then per pair t the query times
z_t^(c/B) and the key times z_t^(-c/B), z_t = (2t + g D)/((1 + g) D) (the buffer
`(arange(0, dim, 2) + 0.4 dim) / (1.4 dim)`), c = p - n // 2 (get_scale's `t - len(t) // 2`),
with n = max(positions) + 1 over the whole tensor, B = xpos_scale_base, g = xpos_gamma. The
scale multiplies cos and sin alike (apply_rotary_emb's `scale`)."""
import torch


def side(x, pos, freqs, scale):
    """x (B, h, T, D); pos (B, T); freqs (D/2); scale (B, T, D/2) -> rotated and scaled x."""
    ang = pos.to(torch.float64)[:, None, :, None] * freqs  # (B, 1, T, D/2)
    cos, sin = ang.cos() * scale[:, None], ang.sin() * scale[:, None]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)


def rotate(ctx, q, k):
    D = ctx.D
    base = ctx.get("rope_base", 10000.0, float)
    sb = ctx.get("xpos_scale_base", 512.0, float)
    g = ctx.get("xpos_gamma", 0.4, float)
    two_t = torch.arange(0, D, 2, dtype=torch.float64)
    freqs = 1.0 / base ** (two_t / D)
    z = (two_t + g * D) / ((1 + g) * D)
    n = ctx.pos_max() + 1

    def scale(pos):  # (B, n, D/2) z^(c/B), c = p - floor(n/2)
        return z ** ((pos - n // 2).to(torch.float64) / sb)[..., None]

    return side(q, ctx.pos, freqs, scale(ctx.pos)), side(k, ctx.kpos, freqs, scale(ctx.kpos) ** -1)


CASES = [
    dict(name="even_n", T=6, H=2, D=8),
    dict(name="odd_n_gapped", T=5, H=2, D=8, positions=[0, 2, 3, 7, 8], causal=True),
    dict(name="gqa", T=6, H=6, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="mqa_h3", T=5, H=3, D=6, kv_heads=1),
    dict(name="keys", T=6, H=2, D=8,
         meta={"xpos_scale_base": "64", "xpos_gamma": "0.8", "rope_base": "500000"}),
    dict(name="large", T=6, H=2, D=16, positions=[2990, 2991, 2993, 2994, 2995, 2996],
         causal=True),
    dict(name="million", T=5, H=2, D=16, positions="million",
         meta={"xpos_scale_base": "100000"}),
    # c/B ~ 98: z^(+-c/B) ~ 1e(-+)53, fine in float64 but not float32 unless centred nearer
    dict(name="far", T=6, H=2, D=8, positions=[100000, 100001, 100003, 100004, 100006, 100007]),
    dict(name="negative", T=5, H=2, D=4, positions=[-9, -7, -6, -4, -3],
         meta={"xpos_scale_base": "8"}),
]

PROJ_CASES = [dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
              dict(name="proj_million_decode", T=1, Tk=6, H=2, D=16, positions="million", causal=True,
                   meta={"xpos_scale_base": "100000"})]
