"""NoPE: no hooks, plain attention; with attn_temperature_tuning, Llama 4's NoPE layers
(HF Llama4TextAttention): q at position p times 1 + attn_scale * log1p(floor((p + 1) / floor_scale))."""
import torch


def rotate(ctx, q, k):
    if ctx.get("attn_temperature_tuning", "false") != "true":
        return q, k
    fs, a = ctx.get("floor_scale", 8192.0, float), ctx.get("attn_scale", 0.1, float)
    tau = 1 + a * torch.log1p(torch.floor((ctx.pos.to(torch.float64) + 1) / fs))  # (B, T)
    return q * tau[:, None, :, None], k


def tuned(floor_scale=None, attn_scale=None):
    m = {"attn_temperature_tuning": "true"}
    if floor_scale is not None:
        m["floor_scale"] = str(floor_scale)
    if attn_scale is not None:
        m["attn_scale"] = str(attn_scale)
    return m


CASES = [
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True),
    dict(name="tuned_floors", T=7, H=2, D=4, causal=True, meta=tuned(2, 0.5)),
    dict(name="tuned_gapped_gqa", T=6, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2,
         meta=tuned(3, 0.25)),
    dict(name="tuned_million", T=5, H=2, D=8, causal=True, positions="million", meta=tuned()),
]

PROJ_CASES = [
    dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="proj_tuned_decode", T=1, Tk=9, H=4, D=4, kv_heads=2, causal=True, positions="offset",
         meta=tuned(4, 0.1)),
]
