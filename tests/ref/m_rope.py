"""RoPE (RoFormer): half (NeoX/HF Llama) and interleaved (GPT-J/Meta) layouts, float64 angles."""
import math
import os

import torch


def scaled_inv_freq(kind, r, base, s, n_pos, o, short_factor=None, long_factor=None):
    """HF modeling_rope_utils, in float64. o: dict of the scaling's other keys. Returns
    (inv_freq (r/2), attention_factor)."""
    exps = torch.arange(0, r, 2, dtype=torch.float64) / r
    default = 1.0 / base ** exps
    if kind == "none":
        return default, 1.0
    if kind == "linear":
        return default / s, 1.0
    if kind == "ntk":
        return 1.0 / (base * s ** (r / (r - 2))) ** exps, 1.0
    if kind == "dynamic":
        lmax = o["max_position_embeddings"]
        L = max(n_pos, lmax)
        return 1.0 / (base * (s * L / lmax - (s - 1)) ** (r / (r - 2))) ** exps, 1.0
    if kind == "proportional":  # HF _compute_proportional_rope_parameters (Gemma 4's p-RoPE):
        # the first int(p * r // 2) pairs at the whole head's frequencies (over s), the rest still
        n = int(o.get("rope_proportion", 1.0) * r // 2)
        return torch.where(torch.arange(r // 2) < n, default / s, torch.zeros_like(default)), 1.0
    L0 = o["original_max_position_embeddings"]
    if kind == "yarn":
        def corr(rot):
            return r * math.log(L0 / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = corr(o.get("beta_fast") or 32), corr(o.get("beta_slow") or 1)
        if o.get("yarn_truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, r - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(r // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
        extra = 1 - ramp
        inv = default / s * (1 - extra) + default * extra

        def mscale(sc, m=1.0):
            return 1.0 if sc <= 1 else 0.1 * m * math.log(sc) + 1.0
        if "attention_factor" in o:
            attn = o["attention_factor"]
        elif o.get("mscale") and o.get("mscale_all_dim"):
            attn = mscale(s, o["mscale"]) / mscale(s, o["mscale_all_dim"])
        else:
            attn = mscale(s)
        return inv, attn
    if kind == "llama3":
        lff, hff = o.get("low_freq_factor", 1.0), o.get("high_freq_factor", 4.0)
        wl = 2 * math.pi / default
        inv = torch.where(wl > L0 / lff, default / s, default)
        smooth = (L0 / wl - lff) / (hff - lff)
        smoothed = (1 - smooth) * inv / s + smooth * inv
        medium = ~(wl < L0 / hff) & ~(wl > L0 / lff)
        return torch.where(medium, smoothed, inv), 1.0
    if kind == "longrope":
        f = long_factor if n_pos > L0 else short_factor
        inv = 1.0 / (f * base ** exps)
        if "attention_factor" in o:
            attn = o["attention_factor"]
        else:
            sc = o["max_position_embeddings"] / L0 if "max_position_embeddings" in o else s
            attn = 1.0 if sc <= 1 else math.sqrt(1 + math.log(sc) / math.log(L0))
        return inv, attn
    raise NotImplementedError(f"rope_scaling {kind}")


INT_KEYS = ("original_max_position_embeddings", "max_position_embeddings")
REAL_KEYS = ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor",
             "low_freq_factor", "high_freq_factor", "rope_proportion")


def inv_freq(ctx):
    if "hf_config" in ctx.meta:
        raise NotImplementedError("hf_config is read by the C tests, not by the reference")
    o = {k: int(ctx.meta[k]) for k in INT_KEYS if k in ctx.meta}
    o.update({k: float(ctx.meta[k]) for k in REAL_KEYS if k in ctx.meta})
    if "yarn_truncate" in ctx.meta:
        o["yarn_truncate"] = ctx.meta["yarn_truncate"] == "true"
    r = ctx.get("rotary_dim", ctx.D - ctx.get("rotary_offset", 0, int), int)
    return scaled_inv_freq(ctx.get("rope_scaling", "none"), r,
                           ctx.get("rope_base", 10000.0, float), ctx.get("rope_factor", 1.0, float),
                           ctx.pos_max() + 1, o, ctx.t.get("short_factor"), ctx.t.get("long_factor"))


def rotate_ang(x, ang, attn, layout):
    """x (B, H, T, D) with pairs of the first r dims rotated by ang (B, 1 or H, T, r/2)."""
    r = ang.shape[-1] * 2
    cos, sin = ang.cos() * attn, ang.sin() * attn
    xr, rest = x[..., :r], x[..., r:]
    if layout == "half":
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
    return torch.cat([out, rest], -1)


def sections(meta):
    s = meta.get("rope_sections")
    return [int(v) for v in s.split(",")] if s else None


def axes(meta, t):
    s = sections(meta)
    return len(s) if s and len(s) > 1 else 1


def openpangu_order(s):
    """vLLM openpangu_rope.py get_mrope_interleaved_id_list: each next pair goes to the axis with
    pairs left, other than the previous one where possible, of the least share placed/count
    (then the lowest); with three sections one time pair is kept for the very end."""
    three = len(s) == 3
    counts = [s[0] - three, s[1], s[2] if three else 0]
    placed, order, last = [0, 0, 0], [], None
    for _ in range(sum(counts)):
        left = [k for k in range(3) if placed[k] < counts[k]]
        pick = [k for k in left if k != last] or left
        best = min(pick, key=lambda k: (placed[k] / counts[k], k))
        order.append(best)
        placed[best] += 1
        last = best
    return order + [0] * three


def pair_axes(meta, half):
    """The position axis of each pair: its section (contiguous, Qwen2-VL's
    apply_multimodal_rotary_pos_emb), Qwen3-VL's apply_interleaved_mrope (pair t reads axis
    a >= 1 when t % A == a and t < A * s_a, else axis 0), ERNIE-4.5-VL's recomposition_to_3d
    (rows and columns alternating over the first s_1 + s_2 pairs, then time: its pre-rotated
    frequencies leave pair t at theta_t), or openPangu's balanced order."""
    s = sections(meta)
    A = len(s)
    layout = meta.get("rope_section_layout", "contiguous")
    if layout == "interleaved":
        return [t % A if t % A and t < A * s[t % A] else 0 for t in range(half)]
    if layout == "alternating":
        return [1 + t % 2 if t < s[1] + s[2] else 0 for t in range(half)]
    if layout == "balanced":
        return openpangu_order(s)
    return [a for a, n in enumerate(s) for _ in range(n)]


def rotate_one(x, pos, freqs, attn, layout, axis=None):
    if axis is None:
        ang = pos.to(torch.float64)[:, None, :, None] * freqs  # (B, 1, T, r/2)
    else:  # multi-axis: pair t at its axis's position
        ang = pos[..., axis].to(torch.float64)[:, None] * freqs
    return rotate_ang(x, ang, attn, layout)


def _rotation(ctx):
    """x, positions, sign -> x with its slice from rotary_offset rotated by sign times the angle,
    times the attention factor."""
    freqs, attn = inv_freq(ctx)
    layout = ctx.get("rope_layout", "half")
    axis = None
    s = sections(ctx.meta)
    if s:
        axis = pair_axes(ctx.meta, freqs.numel())
        if ctx.get("rope_section_freqs", "shared") == "per_axis":  # rope-vit compute_axial_cis
            base = ctx.get("rope_base", 10000.0, float)
            freqs = torch.cat([base ** (-torch.arange(n, dtype=torch.float64) / n) for n in s])
        if len(s) == 1:
            axis = None
    off = ctx.get("rotary_offset", 0, int)  # DeepSeek MLA: the rotated slice is the head's last dims

    def one(x, pos, sign=1):
        return torch.cat([x[..., :off], rotate_one(x[..., off:], pos, sign * freqs, attn, layout, axis)], -1)
    return one


def rotate(ctx, q, k):
    one = _rotation(ctx)
    qr = one(q, ctx.pos)
    beta = ctx.get("llama_4_scaling_beta", 0.0, float)
    if beta:  # HF ministral3 _get_llama_4_attn_scale: after the rotation, the whole query head times
        # 1 + beta log(1 + floor(position / original_max_position_embeddings))
        L0 = ctx.get("original_max_position_embeddings", 0, int)
        p = ctx.pos.to(torch.float64).clamp(min=0)  # HF has no negative positions; posenc scales them by 1
        qr = qr * (1 + beta * torch.log(1 + torch.floor(p / L0)))[:, None, :, None]
    return qr, one(k, ctx.kpos)


# rope_values, from HF transformers models/deepseek_v4/modeling_deepseek_v4.py (commit 3614558),
# DeepseekV4Attention.forward: its one kv tensor, the keys and the values, goes through
# apply_rotary_pos_emb with the keys' cos and sin (times the attention factor), and the attention
# output through apply_rotary_pos_emb(attn_output, cos, -sin) at the query positions.
def rotate_values(ctx, v):
    return _rotation(ctx)(v, ctx.kpos)


def output(ctx, o):
    return _rotation(ctx)(o, ctx.pos, -1)


def tensors(meta, H, D, npos):
    if meta.get("rope_scaling") != "longrope":
        return {}
    r = int(meta.get("rotary_dim", D))
    return {"short_factor": (r // 2,), "long_factor": (r // 2,)}


def init(name, shape, rng):
    if name == "sinks":  # logits of either sign, some above the scores
        return (3.0 * rng.random(shape) - 1.0).astype("float32")
    return (1.0 + 3.0 * rng.random(shape)).astype("float32")  # LongRoPE factors are >= 1


BIG = 2 ** 20
NEAR_2_20 = [BIG - 9, BIG - 5, BIG - 4, BIG - 1, BIG]


def scaling(kind, **kv):
    m = {"rope_scaling": kind}
    m.update({k: str(v) for k, v in kv.items()})
    return m


CASES = [
    dict(name="interleaved", T=6, H=2, D=8, meta={"rope_layout": "interleaved"}),
    dict(name="partial_half", T=6, H=2, D=8, meta={"rotary_dim": "4"}, causal=True),
    dict(name="partial_interleaved_base", T=6, H=3, D=6,
         meta={"rotary_dim": "4", "rope_layout": "interleaved", "rope_base": "500000"}),
    dict(name="million", T=5, H=2, D=16, positions="million", causal=True),
    dict(name="million_interleaved", T=4, H=2, D=8, positions="million",
         meta={"rope_layout": "interleaved"}),
    dict(name="gqa", T=6, H=6, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    # DeepSeek-V3's MLA: the last qk_rope_head_dim dims rotate (interleaved), YaRN with mscale
    # on the softmax scale (scale = mscale^2 / sqrt(D), here 1 + 0.1 ln 4 squared over sqrt 12)
    dict(name="mla_slice", T=6, H=3, D=12, causal=True, positions="offset", meta=dict(
        scaling("yarn", rope_factor=4, original_max_position_embeddings=64, mscale=1, mscale_all_dim=1),
        rotary_dim="4", rotary_offset="8", rope_layout="interleaved", scale=repr((1 + 0.1 * math.log(4)) ** 2 / math.sqrt(12)))),
    dict(name="slice_middle", T=5, H=2, D=10, kv_heads=1, positions="gapped", B=2,
         meta={"rotary_dim": "4", "rotary_offset": "2"}),
    dict(name="offset_default_dim", T=4, H=2, D=8, meta={"rotary_offset": "2"}),
    dict(name="linear", T=6, H=2, D=8, meta=scaling("linear", rope_factor=4), causal=True),
    dict(name="ntk", T=6, H=2, D=8, meta=scaling("ntk", rope_factor=8)),
    dict(name="dynamic_below", T=6, H=2, D=8, positions="offset",
         meta=scaling("dynamic", rope_factor=2, max_position_embeddings=512)),
    dict(name="dynamic_above", T=6, H=2, D=8, positions="offset",
         meta=scaling("dynamic", rope_factor=2, max_position_embeddings=64)),
    dict(name="yarn_half", T=6, H=2, D=16, causal=True,
         meta=scaling("yarn", rope_factor=8, original_max_position_embeddings=128)),
    dict(name="yarn_mscale", T=5, H=2, D=16,
         meta=scaling("yarn", rope_factor=4, original_max_position_embeddings=64, mscale=0.707,
                      mscale_all_dim=0.707, beta_fast=16, beta_slow=2)),
    dict(name="yarn_mscale_only", T=5, H=2, D=16,
         meta=scaling("yarn", rope_factor=4, original_max_position_embeddings=64, mscale=1.5)),
    dict(name="yarn_notruncate_attn", T=5, H=3, D=8, meta=scaling(
        "yarn", rope_factor=16, original_max_position_embeddings=256, yarn_truncate="false",
        attention_factor=0.8)),
    dict(name="yarn_partial", T=5, H=2, D=16, meta=dict(
        scaling("yarn", rope_factor=4, original_max_position_embeddings=64), rotary_dim="8")),
    dict(name="llama3", T=6, H=2, D=32, causal=True, meta=scaling(
        "llama3", rope_factor=8, original_max_position_embeddings=64, rope_base=500000)),
    # Llama 4: low_freq_factor == high_freq_factor, no band between scaled and kept
    dict(name="llama4_freqs", T=5, H=2, D=32, positions="offset", meta=dict(scaling(
        "llama3", rope_factor=16, original_max_position_embeddings=64, low_freq_factor=1,
        high_freq_factor=1, rope_base=500000), rope_layout="interleaved")),
    dict(name="llama3_freqs", T=5, H=2, D=32, meta=scaling(
        "llama3", rope_factor=4, original_max_position_embeddings=32, low_freq_factor=2,
        high_freq_factor=8)),
    dict(name="longrope_short", T=6, H=2, D=8, causal=True, meta=scaling(
        "longrope", original_max_position_embeddings=16, max_position_embeddings=64)),
    dict(name="longrope_long", T=6, H=2, D=8, positions="offset", meta=scaling(
        "longrope", original_max_position_embeddings=16, max_position_embeddings=64)),
    dict(name="longrope_factor_attn", T=5, H=2, D=8, positions="gapped", B=2, meta=scaling(
        "longrope", original_max_position_embeddings=8, rope_factor=4)),
    dict(name="longrope_given_attn", T=5, H=2, D=8, positions="offset", meta=scaling(
        "longrope", original_max_position_embeddings=8, attention_factor=1.3)),
]

# Exact angles at 2^20 for every scaling (issue: precision to a float64 reference).
for _kind, _extra in [("none", {}), ("linear", dict(rope_factor=4)), ("ntk", dict(rope_factor=4)),
                      ("dynamic", dict(rope_factor=4, max_position_embeddings=4096)),
                      ("yarn", dict(rope_factor=32, original_max_position_embeddings=4096)),
                      ("llama3", dict(rope_factor=8, original_max_position_embeddings=8192)),
                      ("longrope", dict(original_max_position_embeddings=4096,
                                        max_position_embeddings=131072)),
                      ("proportional", dict(rope_proportion=0.25, rope_base=1000000))]:
    for _layout in ("half", "interleaved"):
        CASES.append(dict(name=f"2p20_{_kind}_{_layout}", T=5, H=2, D=16, positions=NEAR_2_20,
                          causal=True, meta=dict(scaling(_kind, **_extra), rope_layout=_layout)))


# Gemma 4's global layers: p-RoPE over the whole head (pairs (t, t + D/2)), a quarter of the
# frequencies rotating (partial_rotary_factor 0.25, base 10^6)
CASES += [
    dict(name="proportional", T=6, H=4, D=16, kv_heads=1, causal=True, positions="gapped", B=2,
         meta=scaling("proportional", rope_proportion=0.25, rope_base=1000000)),
    dict(name="proportional_factor_odd", T=5, H=3, D=12, positions="offset",
         meta=scaling("proportional", rope_proportion=0.3, rope_factor=8)),  # int(0.3 * 12 // 2) = 1 pair
    dict(name="proportional_interleaved", T=5, H=2, D=16, positions="million", causal=True,
         meta=dict(scaling("proportional", rope_proportion=0.5), rope_layout="interleaved")),
    dict(name="proportional_none_rotate", T=4, H=2, D=8, meta=scaling("proportional", rope_proportion=0.2)),
]

# GPT-OSS: learned attention sinks (a logit per head in each row's softmax), here with GQA, a
# window and gapped rows, and with a mask
SINKS = {"attention_sinks": "true"}
CASES += [
    dict(name="sinks_gqa_window", T=7, H=4, D=8, kv_heads=2, causal=True, positions="gapped", B=2,
         meta=dict(SINKS, window="3,0"), tensors={"sinks": (4,)}),
    dict(name="sinks_mask", T=6, H=2, D=8, mask="random", meta=SINKS, tensors={"sinks": (2,)}),
]

# DeepSeek-V4: the values rotated as the keys and the output rotated back (rope_values), on the
# head's trailing interleaved slice, one kv head; with YaRN's attention factor (it scales q, the
# keys, the values and the output alike), sinks and a window
V4 = {"rope_values": "true", "rope_layout": "interleaved", "rotary_dim": "4", "rotary_offset": "4"}
CASES += [
    dict(name="values_trailing", T=6, H=2, D=8, causal=True, positions="gapped", B=2, meta=V4),
    dict(name="values_half_full", T=5, H=3, D=6, meta={"rope_values": "true"}),
    dict(name="values_yarn_sinks_window", T=7, H=4, D=8, kv_heads=1, causal=True, positions="offset", meta=dict(
        V4, window="3,0", attention_sinks="true", **scaling("yarn", rope_factor=16, original_max_position_embeddings=4)),
        tensors={"sinks": (4,)}),
    dict(name="values_mask", T=6, H=2, D=8, mask="random", meta=V4),
]

# Ministral 3 / Mistral 4: queries scaled by position on every RoPE layer (llama_4_scaling_beta)
CASES += [
    dict(name="llama4_scaling", T=6, H=2, D=8, causal=True, positions="gapped", B=2,
         meta={"llama_4_scaling_beta": "0.1", "original_max_position_embeddings": "3"}),
    dict(name="llama4_scaling_yarn", T=6, H=2, D=16, positions="offset", meta=dict(
        scaling("yarn", rope_factor=16, original_max_position_embeddings=4, mscale=1, mscale_all_dim=1),
        llama_4_scaling_beta="0.7")),
]


HF_SCENARIOS = [("llama31", 1000), ("qwen_yarn", 1000), ("phi3_longrope", 4096),
                ("phi3_longrope", 4097), ("dynamic_ntk", 1000), ("dynamic_ntk", 10000)]


def hf_rope(config, n_pos):
    """HF's reading of a config.json (rope_scaling or rope_parameters) and its formulas, in
    float64: returns (rotary_dim, inv_freq, attention_factor)."""
    sc = config.get("rope_parameters") or config.get("rope_scaling") or {}
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    r = int(head_dim * sc.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
    base = sc.get("rope_theta", config.get("rope_theta", 10000.0))
    kind = {"default": "none", "su": "longrope"}.get(sc.get("rope_type", sc.get("type", "default")),
                                                    sc.get("rope_type", sc.get("type", "default")))
    o = {k: sc[k] for k in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor",
                            "low_freq_factor", "high_freq_factor") if k in sc}
    o["original_max_position_embeddings"] = sc.get("original_max_position_embeddings",
                                                   config.get("original_max_position_embeddings"))
    if kind in ("dynamic", "longrope"):
        o["max_position_embeddings"] = config["max_position_embeddings"]
    s = sc.get("factor")
    if s is None and kind == "yarn":
        s = config["max_position_embeddings"] / o["original_max_position_embeddings"]
    sf = torch.tensor(sc["short_factor"], dtype=torch.float64) if "short_factor" in sc else None
    lf = torch.tensor(sc["long_factor"], dtype=torch.float64) if "long_factor" in sc else None
    inv, attn = scaled_inv_freq(kind, r, base, s if s is not None else 1.0, n_pos, o, sf, lf)
    return r, inv, attn


def write_tables(out, write):
    """Frequencies and attention factors of the example configs in tests/hf, for
    tests/unit/test_hf_config.c."""
    import json
    import numpy as np
    hf = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf")
    t = {}
    for i, (name, n_pos) in enumerate(HF_SCENARIOS):
        with open(os.path.join(hf, name + ".json")) as f:
            r, inv, attn = hf_rope(json.load(f), n_pos)
        t[f"s{i}_inv_freq"] = inv.numpy().astype(np.float64)
        t[f"s{i}_attn"] = np.array([attn], dtype=np.float64)
        t[f"s{i}_n_pos"] = np.array([n_pos], dtype=np.int64)
    write(os.path.join(out, "hf_configs.safetensors"), t)

PROJ_CASES = [
    dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="proj_million_decode", T=1, Tk=6, H=2, D=16, positions="million", causal=True),
    dict(name="proj_yarn_chunk", T=2, Tk=9, H=2, D=16, causal=True, positions="offset",
         meta=scaling("yarn", rope_factor=8, original_max_position_embeddings=128)),
    dict(name="proj_dynamic_decode", T=1, Tk=9, H=2, D=8, positions="offset", causal=True,
         meta=scaling("dynamic", rope_factor=2, max_position_embeddings=64)),
    # the keys reach past original_max_position_embeddings while the queries stay below it:
    # the switch reads the maximum over both
    dict(name="proj_longrope_keys_long", T=3, Tk=6, H=2, D=8, positions="cross", meta=scaling(
        "longrope", original_max_position_embeddings=8, max_position_embeddings=32)),
    dict(name="proj_partial_interleaved", T=2, Tk=5, H=3, D=6, causal=True,
         meta={"rotary_dim": "4", "rope_layout": "interleaved"}),
    dict(name="proj_sinks_decode", T=1, Tk=9, H=4, D=8, kv_heads=2, positions="offset", causal=True,
         meta=SINKS, tensors={"sinks": (4,)}),
    dict(name="proj_sinks_chunk", T=3, Tk=70, H=2, D=8, causal=True, meta=SINKS, tensors={"sinks": (2,)}),
    dict(name="proj_proportional_decode", T=1, Tk=9, H=4, D=16, kv_heads=2, positions="offset", causal=True,
         meta=scaling("proportional", rope_proportion=0.25, rope_base=1000000)),
    dict(name="proj_values_decode", T=1, Tk=9, H=4, D=8, kv_heads=1, positions="offset", causal=True,
         meta=dict(V4, attention_sinks="true"), tensors={"sinks": (4,)}),
    dict(name="proj_values_cross", T=3, Tk=7, H=2, D=8, kv_heads=1, positions="cross", meta=V4),
    dict(name="proj_llama4_scaling_decode", T=1, Tk=9, H=2, D=8, kv_heads=1, positions="offset", causal=True,
         meta={"llama_4_scaling_beta": "0.1", "original_max_position_embeddings": "4"}),
]


# Multi-axis positions (M-RoPE): two text tokens, then a 2 x 3 grid of image patches at
# (time, row, column), as Qwen2-VL's get_rope_index lays them out.
M_POS = [[0, 0, 0], [1, 1, 1]] + [[2, 2 + r, 2 + c] for r in range(2) for c in range(3)]
GRID = [[x, y] for y in range(2) for x in range(3)]  # a ViT's (x, y)
CASES += [
    dict(name="mrope_contiguous", T=8, H=2, D=8, pos_axes=M_POS, causal=True, meta={"rope_sections": "2,1,1"}),
    dict(name="mrope_interleaved", T=8, H=2, D=12, pos_axes=M_POS, causal=True,
         meta={"rope_sections": "2,2,2", "rope_section_layout": "interleaved"}),
    dict(name="mrope_interleaved_uneven", T=8, H=2, D=16, pos_axes=M_POS,
         meta={"rope_sections": "4,2,2", "rope_section_layout": "interleaved", "rope_layout": "interleaved"}),
    dict(name="mrope_partial_gqa", T=8, H=4, D=8, kv_heads=2, pos_axes=M_POS, causal=True,
         meta={"rope_sections": "1,1,1", "rotary_dim": "6"}),
    dict(name="mrope_batch", T=8, H=2, D=8, B=2, pos_axes=[M_POS, [[p[0] + 3, p[1] + 3, p[2]] for p in M_POS]],
         meta={"rope_sections": "2,1,1"}),
    dict(name="mrope_yarn", T=8, H=2, D=8, pos_axes=M_POS, causal=True, meta=dict(
        scaling("yarn", rope_factor=4, original_max_position_embeddings=4), rope_sections="2,1,1")),
    # ERNIE-4.5-VL / Bailing: rows and columns alternating, time last; GLM-style pairs (ERNIE's)
    dict(name="mrope_alternating", T=8, H=2, D=16, pos_axes=M_POS, causal=True,
         meta={"rope_sections": "2,3,3", "rope_section_layout": "alternating", "rope_layout": "interleaved"}),
    # openPangu's balanced order, three sections and two
    dict(name="mrope_balanced", T=8, H=2, D=16, pos_axes=M_POS, causal=True,
         meta={"rope_sections": "4,2,2", "rope_section_layout": "balanced"}),
    dict(name="mrope_balanced_two", T=6, H=2, D=12, pos_axes=GRID,
         meta={"rope_sections": "4,2", "rope_section_layout": "balanced"}),
    dict(name="axial_per_axis", T=6, H=2, D=8, pos_axes=GRID,
         meta={"rope_sections": "2,2", "rope_section_freqs": "per_axis", "rope_layout": "interleaved",
               "rope_base": "100"}),
]
PROJ_CASES += [
    dict(name="proj_mrope_decode", T=1, Tk=8, H=2, D=8, pos_axes=M_POS[-1:], kpos_axes=M_POS, causal=True,
         meta={"rope_sections": "2,1,1"}),
    dict(name="proj_mrope_interleaved_gqa", T=3, Tk=8, H=4, D=12, kv_heads=2, pos_axes=M_POS[-3:], kpos_axes=M_POS,
         causal=True, meta={"rope_sections": "2,2,2", "rope_section_layout": "interleaved"}),
]
