"""NoPE: no hooks, plain attention; then the query temperatures, q' = tau(p) lambda_h q:
- attn_temperature_tuning, Llama 4's NoPE layers (HF Llama4TextAttention): q at position p times
  1 + attn_scale * log1p(floor((p + 1) / floor_scale));
- head_scale, HeadScale (Wang et al. 2024; AntNLP/nope_head_scale models/llama_nope.py,
  ScaleMixin.query_scale: query_states * scale_param * (1 / sqrt(head_dim))): query head h times
  the tensor head_scales[h], the layer's scale 1/sqrt(D) beside it."""
import torch


def tensors(meta, H, D, npos):
    return {"head_scales": (H,)} if meta.get("head_scale", "false") == "true" else {}


def init(name, shape, rng):
    return (0.5 + 1.5 * rng.random(shape)).astype("float32")  # away from 1: the scale shows


def rotate(ctx, q, k):
    if ctx.get("attn_temperature_tuning", "false") == "true":
        fs, a = ctx.get("floor_scale", 8192.0, float), ctx.get("attn_scale", 0.1, float)
        tau = 1 + a * torch.log1p(torch.floor((ctx.pos.to(torch.float64) + 1) / fs))  # (B, T)
        q = q * tau[:, None, :, None]
    if ctx.get("head_scale", "false") == "true":
        q = q * ctx.t["head_scales"][None, :, None, None]
    return q, k


def tuned(floor_scale=None, attn_scale=None):
    m = {"attn_temperature_tuning": "true"}
    if floor_scale is not None:
        m["floor_scale"] = str(floor_scale)
    if attn_scale is not None:
        m["attn_scale"] = str(attn_scale)
    return m


HS = {"head_scale": "true"}

CASES = [
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True),
    dict(name="tuned_floors", T=7, H=2, D=4, causal=True, meta=tuned(2, 0.5)),
    dict(name="tuned_gapped_gqa", T=6, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2,
         meta=tuned(3, 0.25)),
    dict(name="tuned_million", T=5, H=2, D=8, causal=True, positions="million", meta=tuned()),
    # HeadScale: odd heads, grouped keys, batches with gaps, T = 1, both temperatures at once
    dict(name="head_scale_h3", T=6, H=3, D=4, causal=True, meta=HS),
    dict(name="head_scale_gqa_gapped", T=5, H=4, D=4, kv_heads=2, B=2, positions="gapped", causal=True,
         meta=HS),
    dict(name="head_scale_t1", T=1, H=2, D=4, causal=True, meta=HS),
    dict(name="head_scale_tuned_million", T=5, H=2, D=8, causal=True, positions="million",
         meta=dict(tuned(3, 0.5), **HS)),
]

PROJ_CASES = [
    dict(name="proj_sinks", T=4, Tk=6, H=2, D=4, causal=True, meta={"attention_sinks": "true"}, tensors={"sinks": (2,)}),
    dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="proj_tuned_decode", T=1, Tk=9, H=4, D=4, kv_heads=2, causal=True, positions="offset",
         meta=tuned(4, 0.1)),
    dict(name="proj_head_scale_decode", T=1, Tk=8, H=3, D=4, causal=True, positions="offset", meta=HS),
    dict(name="proj_head_scale_window", T=4, Tk=9, H=4, D=4, kv_heads=2, B=2, positions="gapped", mask="random",
         meta=dict(HS, window="3,0"), causal=True),
]
