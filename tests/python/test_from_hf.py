"""posenc.torch.from_hf reproduces HF attention layers built here in plain torch from their
published formulas (modeling_llama / qwen2: rotate_half RoPE with the scaling's frequencies,
repeat_kv, causal softmax; Llama 4's NoPE layers: the query temperature; T5: relative
buckets, no 1/sqrt(d); BERT: plain attention), and its state_dict round trip restores the
method."""
import io
import math

import pytest
import torch
from conftest import need_method

import m_rope
import posenc
import posenc.torch as pt

torch.manual_seed(0)


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat([-x2, x1], -1)


def hf_decoder_attention(sd, p, x, H, Hkv, D, inv_freq, tau=None):
    """modeling_llama's LlamaAttention in float64: q/k/v projections, RoPE (inv_freq; None: a
    NoPE layer, with Llama 4's temperature tau(pos) on q), repeat_kv, causal softmax, o_proj."""
    x = x.double()
    lin = (lambda n: torch.nn.functional.linear(x, sd[p + n + "_proj.weight"].double(),
                                                None if p + n + "_proj.bias" not in sd else sd[p + n + "_proj.bias"].double()))
    B, T, _ = x.shape
    q, k, v = (lin(n).view(B, T, h, D).transpose(1, 2) for n, h in (("q", H), ("k", Hkv), ("v", Hkv)))
    pos = torch.arange(T, dtype=torch.float64)
    if inv_freq is not None:
        ang = torch.cat([pos[:, None] * inv_freq] * 2, -1)
        q, k = (t * ang.cos() + rotate_half(t) * ang.sin() for t in (q, k))
    if tau is not None:
        q = q * tau(pos)[:, None]
    k, v = (t.repeat_interleave(H // Hkv, 1) for t in (k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, H * D)
    return torch.nn.functional.linear(o, sd[p + "o_proj.weight"].double())


def random_sd(p, C, H, Hkv, D, bias):
    sd = {}
    for n, rows in (("q", H * D), ("k", Hkv * D), ("v", Hkv * D)):
        sd[p + n + "_proj.weight"] = torch.randn(rows, C, dtype=torch.float32) * 0.2
        if bias:
            sd[p + n + "_proj.bias"] = torch.randn(rows, dtype=torch.float32) * 0.1
    sd[p + "o_proj.weight"] = torch.randn(C, H * D, dtype=torch.float32) * 0.2
    return sd


@pytest.mark.parametrize("model_type,scaling,bias", [
    ("llama", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16}, False),
    ("qwen2", None, True),
    ("mistral", {"rope_type": "linear", "factor": 2.0}, False),
])
def test_decoder_layers(model_type, scaling, bias):
    need_method("rope")
    C, H, Hkv, D, theta = 32, 4, 2, 8, 50000.0
    cfg = {"model_type": model_type, "hidden_size": C, "num_attention_heads": H, "num_key_value_heads": Hkv,
           "num_hidden_layers": 2, "rope_theta": theta, "max_position_embeddings": 64, "rope_scaling": scaling}
    p = "model.layers.1.self_attn."
    sd = random_sd(p, C, H, Hkv, D, bias)
    att = pt.from_hf(sd, cfg, layer=1)
    x = torch.randn(2, 9, C, dtype=torch.float32)
    kind = "none" if scaling is None else scaling["rope_type"]
    o = {k: v for k, v in (scaling or {}).items() if k not in ("rope_type", "factor")}
    inv, attn = m_rope.scaled_inv_freq(kind, D, theta, (scaling or {}).get("factor", 1.0), 9, o)
    assert attn == 1.0
    want = hf_decoder_attention(sd, p, x, H, Hkv, D, inv)
    got = att(x)
    assert (got.double() - want).abs().max() < 2e-5


def test_llama4_nope_layer_with_temperature():
    need_method("none")
    C, H, Hkv, D = 32, 4, 2, 8
    cfg = {"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": C, "num_attention_heads": H, "num_key_value_heads": Hkv,
        "head_dim": D, "num_hidden_layers": 4, "rope_theta": 500000.0, "floor_scale": 3, "attn_scale": 0.5,
        "attn_temperature_tuning": True}}
    p = "model.layers.3.self_attn."
    sd = random_sd(p, C, H, Hkv, D, False)
    att = pt.from_hf(sd, cfg, layer=3)
    assert att.method == "none" and att.settings["attn_temperature_tuning"] == "true"
    x = torch.randn(2, 11, C, dtype=torch.float32)
    want = hf_decoder_attention(sd, p, x, H, Hkv, D, None,
                                tau=lambda pos: 1 + 0.5 * torch.log1p(torch.floor((pos + 1) / 3)))
    assert (att(x).double() - want).abs().max() < 2e-5
    assert pt.from_hf(sd | random_sd("model.layers.0.self_attn.", C, H, Hkv, D, False), cfg, layer=0).method == "rope"


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket (rel = key - query)."""
    ret = torch.zeros_like(rel)
    n = num_buckets
    if bidirectional:
        n //= 2
        ret += (rel > 0).long() * n
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    exact = n // 2
    large = exact + (torch.log(rel.double() / exact) / math.log(max_distance / exact) * (n - exact)).long()
    large = torch.min(large, torch.full_like(large, n - 1))
    return ret + torch.where(rel < exact, rel, large)


def test_t5_encoder_layer():
    need_method("t5")
    C, H, dk = 32, 4, 8
    cfg = {"model_type": "t5", "d_model": C, "num_heads": H, "d_kv": dk, "relative_attention_num_buckets": 16,
           "relative_attention_max_distance": 20, "num_layers": 2}
    p = "encoder.block.0.layer.0.SelfAttention."
    sd = {p + n + ".weight": torch.randn(C, C, dtype=torch.float32) * 0.2 for n in "qkvo"}
    sd[p + "relative_attention_bias.weight"] = torch.randn(16, H, dtype=torch.float32)
    att = pt.from_hf(sd, cfg)
    x = torch.randn(2, 30, C, dtype=torch.float32)
    xd = x.double()
    q, k, v = ((xd @ sd[p + n + ".weight"].double().T).view(2, 30, H, dk).transpose(1, 2) for n in "qkv")
    pos = torch.arange(30)
    b = sd[p + "relative_attention_bias.weight"].double()[t5_bucket(pos[None, :] - pos[:, None], True, 16, 20)]
    s = q @ k.transpose(-1, -2) + b.permute(2, 0, 1)  # T5: no 1/sqrt(d)
    want = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(2, 30, C) @ sd[p + "o.weight"].double().T
    assert (att(x).double() - want).abs().max() < 2e-5


def test_bert_layer():
    need_method("none")
    C, H = 32, 4
    cfg = {"model_type": "bert", "hidden_size": C, "num_attention_heads": H}
    p = "bert.encoder.layer.0.attention."
    sd = {}
    for n in ("self.query", "self.key", "self.value", "output.dense"):
        sd[p + n + ".weight"] = torch.randn(C, C, dtype=torch.float32) * 0.2
        sd[p + n + ".bias"] = torch.randn(C, dtype=torch.float32) * 0.1
    att = pt.from_hf(sd, cfg)
    x = torch.randn(2, 7, C, dtype=torch.float32).double()
    lin = (lambda n, t: t @ sd[p + n + ".weight"].double().T + sd[p + n + ".bias"].double())
    q, k, v = (lin(n, x).view(2, 7, H, -1).transpose(1, 2) for n in ("self.query", "self.key", "self.value"))
    o = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(C // H), -1) @ v
    want = lin("output.dense", o.transpose(1, 2).reshape(2, 7, C))
    assert (att(x.float()).double() - want).abs().max() < 2e-5


def test_refusals():
    need_method("rope")
    cfg = {"model_type": "qwen3", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 8, "num_hidden_layers": 1}
    sd = random_sd("self_attn.", 32, 4, 2, 8, False)
    sd["self_attn.q_norm.weight"] = torch.ones(8)
    with pytest.raises(ValueError, match="q_norm"):
        pt.from_hf(sd, cfg)
    with pytest.raises(KeyError, match="q_proj"):
        pt.from_hf({}, cfg)
    with pytest.raises(posenc.PosencError, match="layer 5"):
        pt.from_hf(sd, cfg, layer=5)


def test_family_table():
    """a model_type posenc's family table does not have is refused with the nearest family;
    assume= reads it as that family's code does; the family read is reported"""
    need_method("rope")
    cfg = {"model_type": "qwen9", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_hidden_layers": 1, "rope_theta": 321.0}
    sd = random_sd("self_attn.", 32, 4, 2, 8, False)
    with pytest.raises(posenc.PosencError, match="nearest known: qwen"):
        pt.from_hf(sd, cfg)
    m = pt.from_hf(sd, cfg, assume="qwen2")
    assert float(m.settings["rope_base"]) == 321.0
    import json, tempfile, os
    from posenc import _lib
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"model_type": "cohere2", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4}, f)
    try:
        keys, info = _lib.hf_layer_settings(f.name, 3)
        assert info["family"] == "cohere2" and keys["method"] == "none"
        keys, info = _lib.hf_layer_settings(f.name, 0)
        assert keys["method"] == "rope" and keys["rope_layout"] == "interleaved"
    finally:
        os.unlink(f.name)


def test_state_dict_round_trip_restores_the_method():
    need_method("alibi")
    att = pt.Attention(16, 4, "rope", causal=True, kv_heads=2, rope_scaling="linear", rope_factor=2.0)
    x = torch.randn(2, 5, 16, dtype=torch.float32)
    buf = io.BytesIO()
    torch.save(att.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    m = pt.Attention.from_state_dict(sd)
    assert m.settings == att.settings and torch.equal(m(x), att(x))
    with pytest.raises(ValueError, match="saved from a layer"):
        pt.Attention(16, 4, "alibi").load_state_dict(sd)
    nested = {"block.att." + k: v for k, v in sd.items()}
    assert pt.Attention.from_state_dict(nested, prefix="block.att.").settings == att.settings
