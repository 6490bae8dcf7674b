"""RoPE (RoFormer): half (NeoX/HF Llama) and interleaved (GPT-J/Meta) layouts, float64 angles."""
import torch


def inv_freq(ctx):
    scaling = ctx.get("rope_scaling", "none")
    if scaling != "none":
        raise NotImplementedError(f"rope_scaling {scaling} is not in the reference yet")
    r = ctx.get("rotary_dim", ctx.D, int)
    base = ctx.get("rope_base", 10000.0, float)
    return 1.0 / base ** (torch.arange(0, r, 2, dtype=torch.float64) / r), 1.0


def rotate_one(x, pos, freqs, attn, layout):
    r = freqs.numel() * 2
    ang = pos.to(torch.float64)[:, None, :, None] * freqs  # (B, 1, T, r/2)
    cos, sin = ang.cos() * attn, ang.sin() * attn
    xr, rest = x[..., :r], x[..., r:]
    if layout == "half":
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
    return torch.cat([out, rest], -1)


def rotate(ctx, q, k):
    freqs, attn = inv_freq(ctx)
    layout = ctx.get("rope_layout", "half")
    return rotate_one(q, ctx.pos, freqs, attn, layout), rotate_one(k, ctx.pos, freqs, attn, layout)


CASES = [
    dict(name="interleaved", T=6, H=2, D=8, meta={"rope_layout": "interleaved"}),
    dict(name="partial_half", T=6, H=2, D=8, meta={"rotary_dim": "4"}, causal=True),
    dict(name="partial_interleaved_base", T=6, H=3, D=6,
         meta={"rotary_dim": "4", "rope_layout": "interleaved", "rope_base": "500000"}),
    dict(name="million", T=5, H=2, D=16, positions="million", causal=True),
    dict(name="million_interleaved", T=4, H=2, D=8, positions="million",
         meta={"rope_layout": "interleaved"}),
    dict(name="gqa", T=6, H=6, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
]
