"""GGUF files of the architectures whose llama.cpp graph decides more than the generic keys
(src/rotary/gguf_archs.c), written by tests/gguf/write_gguf.py from the specs in tests/gguf:
their scores equal a float64 reference of what llama.cpp's graph computes, and those of the
config.json they were converted from (tests/hf), at positions up to 10^5. llama.cpp's NORM rope
rotates pairs (2i, 2i + 1) by p base^(-2i/D) / f_i with f the rope_freqs factors
(ggml_rope_ext's freq_factors); Llama 4's NoPE layers scale q by
log(floor((p + 1) / 8192) + 1) 0.1 + 1 (llm_graph_input_attn_temp::set_input)."""
import json
import math
import os
import sys

import numpy as np
import pytest
import torch
from conftest import need_method

import m_rope
import posenc

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
GGUF = os.path.join(ROOT, "tests", "gguf")
HF = os.path.join(ROOT, "tests", "hf")
sys.path.insert(0, GGUF)
import write_gguf  # noqa: E402

rng = np.random.default_rng(11)
FAR = [99_990, 99_995, 99_999, 100_000]
KEYS = [3, 8_191, 8_192, 40_000, 99_000, 99_990, 99_995, 99_999, 100_000]


def gguf(tmp_path, name):
    spec = json.load(open(os.path.join(GGUF, name + ".json")))
    path = tmp_path / (name + ".gguf")
    path.write_bytes(write_gguf.header(spec["kv"], spec.get("tensors", [])))
    return str(path), spec


def attend(path, layer, method, D, q, k, extra=None):
    settings = {"method": method, "heads": 1, "kv_heads": 1, "causal": "true", "hf_config": path, "hf_layer": layer}
    settings.update(extra or {})
    v = np.zeros_like(k)
    out = posenc.attend(settings, {"q": q, "k": k, "v": v, "positions": np.array(FAR, np.int64),
                                   "key_positions": np.array(KEYS, np.int64)})
    return torch.tensor(np.asarray(out["scores"]), dtype=torch.float64).reshape(len(FAR), len(KEYS))


def check(got, want, rel=2e-5, tol=1e-5):
    m = torch.arange(len(KEYS))[None, :] <= torch.arange(len(FAR))[:, None] + (len(KEYS) - len(FAR))
    err, scale = (got - want).abs()[m].max().item(), want[m].abs().max().item()
    assert err <= rel * scale + tol, f"max |posenc - reference| {err:.3g} of scores up to {scale:.3g}"


def norm_rope(x, pos, inv):
    """llama.cpp's NORM rope: pairs (2i, 2i + 1) of the head at angle p inv_i"""
    x = torch.tensor(x, dtype=torch.float64)
    ang = torch.tensor(pos, dtype=torch.float64)[:, None] * inv[None]
    c, s = ang.cos(), ang.sin()
    out = x.clone()
    out[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    out[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    return out


def factors_inv(spec, base, D):
    f = torch.tensor(next(t["f32"] for t in spec["tensors"] if isinstance(t, dict)), dtype=torch.float64)
    return 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D) / f


@pytest.mark.parametrize("name,base,factor,low,high", [("llama4_scout", 5e5, 16.0, 1.0, 1.0),
                                                       ("llama31", 5e5, 8.0, 1.0, 4.0)])
def test_gguf_rope_freqs_rotate_as_llama_cpp(tmp_path, name, base, factor, low, high):
    """The rope_freqs factors divide each pair's frequency (a LongRoPE table of one list, attention
    factor 1), and they are the llama3 scaling of the config.json the file came from, to float32"""
    need_method("rope")
    path, spec = gguf(tmp_path, name)
    D = 128
    q = rng.standard_normal((len(FAR), D)).astype(np.float32)
    k = rng.standard_normal((len(KEYS), D)).astype(np.float32)
    inv = factors_inv(spec, base, D)
    want = norm_rope(q, FAR, inv) @ norm_rope(k, KEYS, inv).T / math.sqrt(D)
    check(attend(path, 0, "rope", D, q, k), want)
    o = dict(original_max_position_embeddings=8192, low_freq_factor=low, high_freq_factor=high)
    hf, _ = m_rope.scaled_inv_freq("llama3", D, base, factor, max(KEYS) + 1, o)
    assert torch.allclose(inv, torch.as_tensor(hf, dtype=torch.float64), rtol=1e-6, atol=0)


def test_gguf_llama4_equals_its_config(tmp_path):
    """Llama 4 Scout in GGUF and its config.json: the chunked RoPE layers (no permutation: the
    checkpoint's pairs are interleaved, Llama4Model.undo_permute False) and the NoPE layers'
    temperature give the same scores"""
    need_method("rope")
    need_method("none")
    path, _ = gguf(tmp_path, "llama4_scout")
    D = 128
    q = rng.standard_normal((len(FAR), D)).astype(np.float32)
    k = rng.standard_normal((len(KEYS), D)).astype(np.float32)
    config = os.path.join(HF, "llama4_scout.json")
    check(attend(path, 0, "rope", D, q, k), attend(config, 0, "rope", D, q, k))
    tau = torch.log(torch.floor((torch.tensor(FAR, dtype=torch.float64) + 1) / 8192) + 1) * 0.1 + 1
    want = (torch.tensor(q, dtype=torch.float64) * tau[:, None]) @ torch.tensor(k, dtype=torch.float64).T / math.sqrt(D)
    check(attend(path, 3, "none", D, q, k), want)
    check(attend(config, 3, "none", D, q, k), want)


@pytest.mark.parametrize("name,layer,D", [("gemma3_27b", 0, 128), ("gemma3_27b", 5, 128), ("gemma3_1b_v5", 0, 256),
                                          ("gemma3_1b_v5", 5, 256), ("deepseek_v3", 0, 192)])
def test_gguf_gemma3_deepseek2_equal_their_configs(tmp_path, name, layer, D):
    """Gemma 3 (sliding layers at 10^4 unscaled, global ones at the file's base and linear factor,
    llama.cpp's attention scale by size) and DeepSeek-V3 (YaRN on the MLA slice, mscale^2 on the
    scale) in GGUF give their config.json's scores"""
    need_method("rope")
    path, _ = gguf(tmp_path, name)
    q = rng.standard_normal((len(FAR), D)).astype(np.float32)
    k = rng.standard_normal((len(KEYS), D)).astype(np.float32)
    got = attend(path, layer, "rope", D, q, k)
    check(got, attend(os.path.join(HF, name + ".json"), layer, "rope", D, q, k), 1e-6, 0)
