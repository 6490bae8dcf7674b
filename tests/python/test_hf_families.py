"""Each family's config in tests/hf, read through posenc's family table (`hf_config=`), gives the
scores of that family's own attention code at positions up to 10^5: a float64 reference written
here from the HF functions each row cites (GPT-NeoX's rotate_half on its rotary_pct slice, GPT-J's
rotate_every_two at base 10000, GLM-4's repeat_interleave pairs on half the head, Cohere2's
interleaved sliding layers and NoPE global ones, EXAONE 4 likewise in the half layout, Falcon's
rotate_half, Bloom's build_alibi_tensor on key indexes, Ministral 3's YaRN with its query scaling
by position, Gemma 4's whole-head sliding layers and p-RoPE global layers, GPT-OSS's YaRN with
its learned sinks; ChatGLM3's interleaved pairs on half its kv_channels head, EXAONE 3's and Baichuan
7B's rotate_half, Falcon 40B's and Phi-4-mini's slices, InternLM2's dynamic NTK base, Baichuan 13B's
ALiBi of _get_interleave's slopes for 40 heads, DeepSeek-V4's rotated values and output)."""
import math
import os

import numpy as np
import pytest
import torch
from conftest import need_method

import m_rope
import posenc

HF = os.path.join(os.path.dirname(__file__), "..", "hf")
rng = np.random.default_rng(7)


def inv_freq(rd, base):
    return 1.0 / base ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd)


def rotate_half_slice(x, pos, rd, inv):
    """modeling_llama rotate_half on the leading rd dims (GPT-NeoX's apply_rotary_pos_emb)"""
    ang = pos[:, None].double() * inv[None]
    c, s = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    r = x[:, :rd]
    x1, x2 = r[:, :rd // 2], r[:, rd // 2:]
    return torch.cat([r * c + torch.cat([-x2, x1], -1) * s, x[:, rd:]], -1)


def every_two_slice(x, pos, rd, inv):
    """GPT-J's rotate_every_two with repeat_interleaved sin and cos (GLM, Cohere alike)"""
    ang = pos[:, None].double() * inv[None]
    c, s = ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)
    r = x[:, :rd]
    rot = torch.stack([-r[:, 1::2], r[:, 0::2]], -1).flatten(-2)
    return torch.cat([r * c + rot * s, x[:, rd:]], -1)


def run(config, layer, method, H, D, qpos, kpos, extra=None, tensors=None):
    """posenc's scores and probabilities for one layer of config (the key route)"""
    T, Tk = len(qpos), len(kpos)
    q = rng.standard_normal((T, H * D)).astype(np.float32)
    k = rng.standard_normal((Tk, H * D)).astype(np.float32)
    v = rng.standard_normal((Tk, H * D)).astype(np.float32)
    settings = {"method": method, "heads": H, "causal": "true", "hf_config": os.path.join(HF, config), "hf_layer": layer}
    settings.update(extra or {})
    out = posenc.attend(settings, {"q": q, "k": k, "v": v, "positions": np.array(qpos, np.int64),
                                   "key_positions": np.array(kpos, np.int64), **(tensors or {})})
    return torch.tensor(q, dtype=torch.float64), torch.tensor(k, dtype=torch.float64), out


def causal_mask(T, Tk):
    return torch.arange(Tk)[None, :] <= torch.arange(T)[:, None] + (Tk - T)


def check_scores(got, want, T, Tk):
    m = causal_mask(T, Tk)
    got = torch.tensor(np.asarray(got), dtype=torch.float64).reshape(want.shape)
    err = (got - want).abs()[..., m].max().item()
    scale = want[..., m].abs().max().item()
    assert err <= 2e-5 * scale + 1e-5, f"max |posenc - reference| {err:.3g} of scores up to {scale:.3g}"


FAR = [99_990, 99_995, 99_999, 100_000]
KEYS = [3, 40_000, 99_000, 99_990, 99_995, 99_999, 100_000]


@pytest.mark.parametrize("config,layer,rotate,rd,base", [
    ("gpt_neox.json", 0, rotate_half_slice, 24, 10000.0),
    ("gptj.json", 27, every_two_slice, 64, 10000.0),
    ("glm4.json", 0, every_two_slice, 64, 10000.0),
    ("cohere2.json", 0, every_two_slice, 128, 10000.0),
    ("exaone4.json", 0, rotate_half_slice, 128, 1e6),
    ("falcon_7b.json", 0, rotate_half_slice, 64, 10000.0),
    ("chatglm3.json", 27, every_two_slice, 64, 10000.0),
    ("exaone.json", 31, rotate_half_slice, 64, 10000.0),
    ("baichuan_7b.json", 0, rotate_half_slice, 128, 10000.0),
    ("falcon_40b_refinedweb.json", 59, rotate_half_slice, 64, 10000.0),
    ("phi4_mini.json", 0, rotate_half_slice, 96, 10000.0),
])
def test_rotating_layers(config, layer, rotate, rd, base):
    need_method("rope")
    D = {"gpt_neox.json": 96, "gptj.json": 256, "falcon_7b.json": 64, "exaone.json": 64,
         "falcon_40b_refinedweb.json": 64}.get(config, 128)
    q, k, out = run(config, layer, "rope", 1, D, FAR, KEYS)
    inv = inv_freq(rd, base)
    qr, kr = rotate(q, torch.tensor(FAR), rd, inv), rotate(k, torch.tensor(KEYS), rd, inv)
    check_scores(out["scores"], (qr @ kr.T / math.sqrt(D))[None], len(FAR), len(KEYS))


@pytest.mark.parametrize("config,layer", [("cohere2.json", 3), ("exaone4.json", 31)])
def test_global_layers_are_nope(config, layer):
    need_method("none")
    q, k, out = run(config, layer, "none", 1, 128, FAR, KEYS)
    check_scores(out["scores"], (q @ k.T / math.sqrt(128))[None], len(FAR), len(KEYS))
    with pytest.raises(posenc.PosencError, match="NoPE layer"):
        run(config, layer, "rope", 1, 128, FAR, KEYS)


def test_bloom_alibi():
    """Bloom: QK^T / sqrt(d) + slope_h * key index (build_alibi_tensor), the same softmax as
    posenc's -m_h (i - j) under the causal mask"""
    need_method("alibi")
    H, D, T, Tk = 16, 64, 5, 40
    pos = list(range(Tk))
    q, k, out = run("bloom.json", 0, "alibi", H, D, pos[-T:], pos)
    cp2 = 2 ** math.floor(math.log2(H))
    slopes = torch.tensor([(2 ** (-8 / cp2)) ** (h + 1) for h in range(H)], dtype=torch.float64)
    qh, kh = q.reshape(T, H, D).transpose(0, 1), k.reshape(Tk, H, D).transpose(0, 1)
    s = qh @ kh.transpose(1, 2) / math.sqrt(D) + slopes[:, None, None] * torch.arange(Tk, dtype=torch.float64)
    p = s.masked_fill(~causal_mask(T, Tk), -math.inf).softmax(-1)
    got = torch.tensor(np.asarray(out["probs"]), dtype=torch.float64).reshape(p.shape)
    assert (got - p).abs().max().item() < 1e-5


def test_internlm2_dynamic_ntk():
    """InternLM2's InternLM2DynamicNTKScalingRotaryEmbedding: past max_position_embeddings (32768) the
    base becomes base * (factor * L / 32768 - (factor - 1))^(d / (d - 2)) for a cache of L positions
    (0 .. L - 1: L = 100001 here), rotate_half over the whole head"""
    need_method("rope")
    D, L = 128, max(FAR + KEYS) + 1
    q, k, out = run("internlm2.json", 31, "rope", 1, D, FAR, KEYS)
    base = 1e6 * (2.0 * L / 32768 - 1.0) ** (D / (D - 2))
    inv = inv_freq(D, base)
    qr, kr = rotate_half_slice(q, torch.tensor(FAR), D, inv), rotate_half_slice(k, torch.tensor(KEYS), D, inv)
    check_scores(out["scores"], (qr @ kr.T / math.sqrt(D))[None], len(FAR), len(KEYS))


def test_baichuan_13b_alibi():
    """Baichuan-13B: QK^T / sqrt(d) plus slope_h * key index (_gen_alibi_mask), slopes of
    _get_interleave for 40 heads (32 of the power of two, then every other of 64's), the softmax of
    posenc's -m_h (i - j) under the causal mask"""
    need_method("alibi")
    H, D, T, Tk = 40, 128, 5, 40
    pos = list(range(Tk))
    q, k, out = run("baichuan_13b.json", 39, "alibi", H, D, pos[-T:], pos)

    def interleave(n):
        if math.log2(n).is_integer():
            start = 2 ** (-(2 ** -(math.log2(n) - 3)))
            return [start * start ** i for i in range(n)]
        c = 2 ** math.floor(math.log2(n))
        return interleave(c) + interleave(2 * c)[0::2][:n - c]

    slopes = torch.tensor(interleave(H), dtype=torch.float64)
    qh, kh = q.reshape(T, H, D).transpose(0, 1), k.reshape(Tk, H, D).transpose(0, 1)
    s = qh @ kh.transpose(1, 2) / math.sqrt(D) + slopes[:, None, None] * torch.arange(Tk, dtype=torch.float64)
    p = s.masked_fill(~causal_mask(T, Tk), -math.inf).softmax(-1)
    got = torch.tensor(np.asarray(out["probs"]), dtype=torch.float64).reshape(p.shape)
    assert (got - p).abs().max().item() < 1e-5


def test_ministral3_yarn_and_query_scaling():
    """Ministral 3: YaRN (factor 16, L0 16384, mscale = mscale_all_dim) over the head, then
    q times 1 + 0.1 ln(1 + floor(p / 16384)) (HF ministral3 _get_llama_4_attn_scale)"""
    need_method("rope")
    D = 128
    q, k, out = run("ministral3.json", 0, "rope", 1, D, FAR, KEYS)
    o = dict(original_max_position_embeddings=16384, beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)
    inv, attn = m_rope.scaled_inv_freq("yarn", D, 1e6, 16.0, max(FAR + KEYS) + 1, o)
    qr = rotate_half_slice(q, torch.tensor(FAR), D, inv) * attn
    kr = rotate_half_slice(k, torch.tensor(KEYS), D, inv) * attn
    tau = 1 + 0.1 * torch.log(1 + torch.floor(torch.tensor(FAR, dtype=torch.float64) / 16384))
    check_scores(out["scores"], ((qr * tau[:, None]) @ kr.T / math.sqrt(D))[None], len(FAR), len(KEYS))


@pytest.mark.parametrize("layer,D", [(0, 256), (5, 512)])
def test_gemma4_sliding_and_proportional(layer, D):
    """Gemma 4 31B: sliding layers rotate_half over the whole 256-dim head at base 10^4
    (Gemma4TextRotaryEmbedding.compute_default_rope_parameters), global ones over the whole
    512-dim head with HF's _compute_proportional_rope_parameters: the first
    int(0.25 * 512 // 2) = 64 frequencies 10^6^(-2t/512), the other 192 zero; softmax scale 1"""
    need_method("rope")
    q, k, out = run("gemma4_31b.json", layer, "rope", 1, D, FAR, KEYS)
    if layer == 0:
        inv = inv_freq(D, 10000.0)
    else:
        rope_angles = int(0.25 * D // 2)
        inv = torch.cat([1.0 / 1e6 ** (torch.arange(0, 2 * rope_angles, 2, dtype=torch.float64) / D),
                         torch.zeros(D // 2 - rope_angles, dtype=torch.float64)])
    qr, kr = rotate_half_slice(q, torch.tensor(FAR), D, inv), rotate_half_slice(k, torch.tensor(KEYS), D, inv)
    check_scores(out["scores"], (qr @ kr.T)[None], len(FAR), len(KEYS))
    with pytest.raises(posenc.PosencError, match="head_dim"):
        run("gemma4_31b.json", layer, "rope", 1, 768 - D, FAR, KEYS)  # the other layer kind's width


def test_gpt_oss_yarn_and_sinks():
    """GPT-OSS: YaRN x32 from 4096 at base 150000 without truncation (attention factor
    0.1 ln 32 + 1 on cos and sin), rotation by halves, then the learned sink of each head as one
    more logit of every row's softmax, dropped (modular_gpt_oss.py eager_attention_forward)"""
    need_method("rope")
    H, D = 2, 64
    sinks = np.array([1.5, -0.5], np.float32)
    q, k, out = run("gpt_oss.json", 1, "rope", H, D, FAR, KEYS, tensors={"sinks": sinks})
    o = dict(original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0, yarn_truncate=False)
    inv, attn = m_rope.scaled_inv_freq("yarn", D, 150000.0, 32.0, max(FAR + KEYS) + 1, o)
    T, Tk = len(FAR), len(KEYS)
    qh, kh = q.reshape(T, H, D).transpose(0, 1), k.reshape(Tk, H, D).transpose(0, 1)
    qr = torch.stack([rotate_half_slice(qh[h], torch.tensor(FAR), D, inv) * attn for h in range(H)])
    kr = torch.stack([rotate_half_slice(kh[h], torch.tensor(KEYS), D, inv) * attn for h in range(H)])
    s = (qr @ kr.transpose(1, 2) / math.sqrt(D)).masked_fill(~causal_mask(T, Tk), -math.inf)
    sk = torch.tensor(sinks, dtype=torch.float64).reshape(H, 1, 1).expand(H, T, 1)
    combined = torch.cat([s, sk], -1)
    p = torch.softmax(combined - combined.max(-1, keepdim=True).values, -1)[..., :-1]
    got = torch.tensor(np.asarray(out["probs"]), dtype=torch.float64).reshape(p.shape)
    assert (got - p).abs().max().item() < 1e-5
    assert (got.sum(-1) < 1).all()  # the sink takes its share


def every_two_last(x, pos, rd, inv, sign=1.0):
    """DeepSeek-V4's apply_rotary_pos_emb: cos and sin repeat_interleaved, rotate_half on pairs
    0::2 / 1::2 of the last rd dims (x[..., -rope_dim:]); sign -1 is its -sin"""
    ang = pos[:, None].double() * inv[None]
    c, s = ang.cos().repeat_interleave(2, -1), sign * ang.sin().repeat_interleave(2, -1)
    r = x[:, -rd:]
    rot = torch.stack([-r[:, 1::2], r[:, 0::2]], -1).flatten(-2)
    return torch.cat([x[:, :-rd], r * c + rot * s], -1)


@pytest.mark.parametrize("layer", [0, 3])
def test_deepseek_v4_shared_kv(layer):
    """DeepSeek-V4-Flash (modeling_deepseek_v4.py DeepseekV4Attention.forward): the one kv tensor
    (keys and values) and q rotated on the head's last 64 dims in adjacent pairs, the attention
    output rotated back with -sin at the query positions; layer 0 slides at base 10^4 unscaled
    ("main"), layer 3 (HCA) at compress_rope_theta 160000 with YaRN x16 from 65536, its attention
    factor forced to 1 (DeepseekV4Config.__post_init__); softmax scale 512^-1/2"""
    need_method("rope")
    D, rd = 512, 64
    sinks = np.array([0.3], np.float32)
    T, Tk = len(FAR), len(KEYS)
    q = rng.standard_normal((T, D)).astype(np.float32)
    kv = rng.standard_normal((Tk, D)).astype(np.float32)
    settings = {"method": "rope", "heads": 1, "causal": "true", "hf_config": os.path.join(HF, "deepseek_v4.json"),
                "hf_layer": layer}
    out = posenc.attend(settings, {"q": q, "k": kv, "v": kv, "positions": np.array(FAR, np.int64),
                                   "key_positions": np.array(KEYS, np.int64), "sinks": sinks})
    if layer == 0:
        inv = inv_freq(rd, 10000.0)
    else:
        o = dict(original_max_position_embeddings=65536, beta_fast=32.0, beta_slow=1.0, attention_factor=1.0)
        inv, attn = m_rope.scaled_inv_freq("yarn", rd, 160000.0, 16.0, max(FAR + KEYS) + 1, o)
        assert attn == 1.0
    qd, kd = torch.tensor(q, dtype=torch.float64), torch.tensor(kv, dtype=torch.float64)
    qr, kr = every_two_last(qd, torch.tensor(FAR), rd, inv), every_two_last(kd, torch.tensor(KEYS), rd, inv)
    s = (qr @ kr.T / math.sqrt(D)).masked_fill(~causal_mask(T, Tk), -math.inf)
    combined = torch.cat([s, torch.full((T, 1), float(sinks[0]), dtype=torch.float64)], -1)
    p = torch.softmax(combined - combined.max(-1, keepdim=True).values, -1)[..., :-1]
    want = every_two_last(p @ kr, torch.tensor(FAR), rd, inv, -1.0)
    check_scores(out["scores"], s.masked_fill(~causal_mask(T, Tk), 0)[None], T, Tk)
    got = torch.tensor(np.asarray(out["o"]), dtype=torch.float64).reshape(want.shape)
    assert (got - want).abs().max().item() < 2e-5 * want.abs().max().item() + 1e-6


def test_deepseek_v4_compressed_entries():
    """An HCA layer's compressed entries (DeepseekV4HCACompressor.forward): one per window of
    compress_rate tokens, rotated at its window's first position i * compress_rate with the
    layer's compress rope, appended after the layer's own keys (K = V); query t sees entry w only
    when w < (t + 1) // compress_rate (its block_bias), its own keys within the sliding window
    (create_sliding_window_causal_mask: t - 128 < u <= t). Given as key_positions and attn_mask,
    posenc's scores and output equal the float64 reference of that layer."""
    need_method("rope")
    D, rd, m, W = 512, 64, 128, 128
    T = 4
    qpos = [1000, 1100, 1200, 1279]
    own = list(range(1279 - 200, 1280))  # the layer's own keys: the last 201 tokens
    comp = [w * m for w in range(10)]    # entries of windows 0 .. 9 at their first positions
    kpos = own + comp
    Tk = len(kpos)
    mask = np.zeros((T, Tk), dtype=bool)
    for i, t in enumerate(qpos):
        for j, u in enumerate(own):
            mask[i, j] = t - W < u <= t
        for w in range(len(comp)):
            mask[i, len(own) + w] = w < (t + 1) // m
    q = rng.standard_normal((T, D)).astype(np.float32)
    kv = rng.standard_normal((Tk, D)).astype(np.float32)
    sinks = np.array([-0.7], np.float32)
    settings = {"method": "rope", "heads": 1, "causal": "false", "hf_config": os.path.join(HF, "deepseek_v4.json"),
                "hf_layer": 3}
    out = posenc.attend(settings, {"q": q, "k": kv, "v": kv, "positions": np.array(qpos, np.int64),
                                   "key_positions": np.array(kpos, np.int64), "attn_mask": mask, "sinks": sinks})
    o = dict(original_max_position_embeddings=65536, beta_fast=32.0, beta_slow=1.0, attention_factor=1.0)
    inv, _ = m_rope.scaled_inv_freq("yarn", rd, 160000.0, 16.0, max(qpos + kpos) + 1, o)
    qd, kd = torch.tensor(q, dtype=torch.float64), torch.tensor(kv, dtype=torch.float64)
    qr, kr = every_two_last(qd, torch.tensor(qpos), rd, inv), every_two_last(kd, torch.tensor(kpos), rd, inv)
    s = (qr @ kr.T / math.sqrt(D)).masked_fill(~torch.tensor(mask), -math.inf)
    combined = torch.cat([s, torch.full((T, 1), float(sinks[0]), dtype=torch.float64)], -1)
    p = torch.softmax(combined - combined.max(-1, keepdim=True).values, -1)[..., :-1]
    want = every_two_last(p @ kr, torch.tensor(qpos), rd, inv, -1.0)
    got = torch.tensor(np.asarray(out["o"]), dtype=torch.float64).reshape(want.shape)
    assert (got - want).abs().max().item() < 2e-5 * want.abs().max().item() + 1e-6
    gp = torch.tensor(np.asarray(out["probs"]), dtype=torch.float64).reshape(p.shape)
    assert (gp - p).abs().max().item() < 1e-5


def test_ernie4_5_vl_alternating_sections():
    """ERNIE-4.5-VL: HF's Ernie4_5_VLMoeTextRotaryEmbedding in float64 as its code does it: the
    inverse frequencies pre-rotated (even ones, then odd ones, over the first h + w), each axis's
    angles, recomposition_to_3d (sections [h, w, t] from axes 1, 2, 0; rows and columns stacked
    pair by pair, then time; each repeated twice) and rotate_half_text; against posenc's
    alternating layout read from the config at positions (time, row, column) up to 10^5"""
    need_method("rope")
    D, h, w, t = 128, 22, 22, 20
    T, Tk = 4, 7
    pos_k = np.array([[3, 3, 3], [40_000, 40_001, 40_002], [99_000, 99_010, 99_020], [99_990, 99_991, 99_993],
                      [99_995, 99_995, 99_995], [99_999, 99_999, 100_000], [100_000, 100_000, 100_000]], np.int64)
    pos_q = pos_k[-T:]
    q = rng.standard_normal((T, D)).astype(np.float32)
    k = rng.standard_normal((Tk, D)).astype(np.float32)
    v = rng.standard_normal((Tk, D)).astype(np.float32)
    settings = {"method": "rope", "heads": 1, "causal": "true", "hf_config": os.path.join(HF, "ernie4_5_vl.json"),
                "hf_layer": 0}
    out = posenc.attend(settings, {"q": q, "k": k, "v": v, "positions": pos_q, "key_positions": pos_k})
    inv = inv_freq(D, 500000.0)
    inv3 = torch.cat([inv[:h + w][0::2], inv[:h + w][1::2], inv[h + w:]])

    def rotate(x, pos):
        freqs = torch.tensor(pos.T, dtype=torch.float64)[:, :, None] * inv3  # (3, n, D/2)
        def recompose(f):
            fh, fw, ft = (m[(i + 1) % 3] for i, m in enumerate(f.split([h, w, t], dim=-1)))
            return torch.cat([torch.stack([fh, fw], -1).flatten(-2), ft], -1).repeat_interleave(2, -1)
        c, s = recompose(freqs.cos()), recompose(freqs.sin())
        x = torch.tensor(x, dtype=torch.float64)
        rot = torch.stack((-x[:, 1::2], x[:, 0::2]), -1).flatten(-2)  # rotate_half_text
        return x * c + rot * s

    want = rotate(q, pos_q) @ rotate(k, pos_k).T / math.sqrt(D)
    check_scores(out["scores"], want[None], T, Tk)


def test_gguf_llama_equals_its_config(tmp_path):
    """A Llama in GGUF (tests/gguf/llama.json, written by tests/gguf/write_gguf.py) through the key
    route: llama.cpp's NORM pairs (2p, 2p + 1) on q and k permuted as the converter permutes them
    (conversion/llama.py LlamaModel.permute: GGUF row 2j + s of a head is HF row j + s D / 2) give
    the scores of the HF config's half layout on the unpermuted q and k, at positions up to 10^5"""
    need_method("rope")
    import json
    import sys
    sys.path.insert(0, os.path.join(HF, "..", "gguf"))
    import write_gguf
    spec = json.load(open(os.path.join(HF, "..", "gguf", "llama.json")))
    path = tmp_path / "llama.gguf"
    path.write_bytes(write_gguf.header(spec["kv"], spec.get("tensors", [])))
    cfg = tmp_path / "llama.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                               "num_hidden_layers": 32, "rope_theta": 10000.0}))
    D, T, Tk = 128, len(FAR), len(KEYS)
    q = rng.standard_normal((T, D)).astype(np.float32)
    k = rng.standard_normal((Tk, D)).astype(np.float32)
    v = rng.standard_normal((Tk, D)).astype(np.float32)
    perm = np.array([j + s * D // 2 for j in range(D // 2) for s in (0, 1)])  # GGUF row -> HF row
    at = {"positions": np.array(FAR, np.int64), "key_positions": np.array(KEYS, np.int64)}
    base = {"method": "rope", "heads": 1, "causal": "true", "hf_layer": 3}
    hf = posenc.attend({**base, "hf_config": str(cfg)}, {"q": q, "k": k, "v": v, **at})
    gg = posenc.attend({**base, "hf_config": str(path)}, {"q": q[:, perm], "k": k[:, perm], "v": v, **at})
    want = torch.tensor(np.asarray(hf["scores"]), dtype=torch.float64)
    check_scores(gg["scores"], want, T, Tk)
