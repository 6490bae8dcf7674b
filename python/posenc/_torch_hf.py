"""posenc.torch.from_hf: an attention layer of a HuggingFace model (its config.json and state
dict) as a posenc.torch.Attention with the model's positional scheme (posenc.hf_config)."""
import os

import torch

import posenc
from posenc import _lib
from posenc.torch import Attention


def _hf_config(config):
    """config: a config.json path, a dict of one, or an object with to_dict() (a HF config)."""
    import json
    if isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            return json.load(f)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if isinstance(config, dict):
        return dict(config)
    raise TypeError(f"config: expected a config.json path, a dict or a HF config, got {type(config).__name__}")


def _pick(state_dict, prefixes, names):
    """The prefix under which every one of names is in state_dict (the first that has them)."""
    for p in prefixes:
        if all(p + n in state_dict for n in names):
            return p
    raise KeyError(f"state_dict has none of {[p + names[0] for p in prefixes]}")


def from_hf(state_dict, config, layer=0, prefix=None, assume=None):
    """A posenc Attention holding layer `layer` of a HuggingFace model: its weights from
    state_dict (the model's, or the attention module's own), its settings from config (a
    config.json path, a dict, or a HF config object) as posenc's hf_config reads them (rope
    base, scaling, GQA, the layer's type; Llama 4's NoPE layers; Gemma's scale).
      llama, mistral, qwen2, gemma*, llama4 ...  self_attn.{q,k,v,o}_proj (biases where present)
      t5      SelfAttention.{q,k,v,o} and relative_attention_bias (layer 0 of its stack holds
              it: pass that layer's state_dict entry, or the model's, for any layer); scale 1
      bert    attention.self.{query,key,value}, attention.output.dense (absolute positions:
              the layer itself is method none, not causal)
    prefix: where the layer's tensors are (default: model.layers.{layer}.self_attn. and the
    other usual places, then none). assume: the family whose code reads a config of a model_type
    posenc's family table does not have (posenc hf-config --families), which is otherwise refused. The module reproduces HF's layer on the same input: HF
    keeps q and k in the half rope layout (its checkpoints are permuted from Meta's), which is
    posenc's default, and Llama 4 the interleaved one, which hf_config sets."""
    import tempfile
    cfg = _hf_config(config)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    mt = str(text.get("model_type") or cfg.get("model_type") or "")
    sd = state_dict
    if mt.startswith("t5") or mt in ("mt5", "umt5"):
        enc = "decoder" if text.get("is_decoder") else "encoder"
        pre = [prefix] if prefix is not None else [f"{enc}.block.{layer}.layer.0.SelfAttention.", "SelfAttention.", ""]
        p = _pick(sd, pre, ["q.weight", "k.weight", "v.weight", "o.weight"])
        bias_key = next((k for k in (p + "relative_attention_bias.weight",
                                     f"{enc}.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
                         if k in sd), None)
        if bias_key is None:
            raise KeyError("t5: no relative_attention_bias.weight (layer 0 of the stack holds it)")
        H, dk, d = int(text["num_heads"]), int(text["d_kv"]), int(text["d_model"])
        if H * dk != d:
            raise ValueError(f"t5: num_heads * d_kv = {H * dk} is not d_model {d}: posenc's layer has C = H * D")
        decoder = bool(text.get("is_decoder"))
        m = Attention(d, H, "t5", causal=decoder, bias=False, bidirectional=not decoder, scale=1.0,
                      num_buckets=int(text.get("relative_attention_num_buckets", 32)),
                      max_distance=int(text.get("relative_attention_max_distance", 128)))
        names = {"wq": "q.weight", "wk": "k.weight", "wv": "v.weight", "wo": "o.weight"}
        with torch.no_grad():
            for n, k in names.items():
                getattr(m, n).copy_(sd[p + k])
            m.rel_bias.copy_(sd[bias_key])
        return m
    if mt.startswith("bert") or mt in ("roberta", "xlm-roberta", "distilbert"):
        if text.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"bert: position_embedding_type {text.get('position_embedding_type')!r}: only absolute "
                             "positions (added to the embeddings, outside the layer) are read")
        pre = [prefix] if prefix is not None else [f"bert.encoder.layer.{layer}.attention.",
                                                   f"encoder.layer.{layer}.attention.", "attention.", ""]
        p = _pick(sd, pre, ["self.query.weight", "self.key.weight", "self.value.weight", "output.dense.weight"])
        C, H = int(text["hidden_size"]), int(text["num_attention_heads"])
        m = Attention(C, H, "none", causal=False)
        names = {"q": "self.query", "k": "self.key", "v": "self.value", "o": "output.dense"}
        with torch.no_grad():
            for n, k in names.items():
                getattr(m, "w" + n).copy_(sd[p + k + ".weight"])
                getattr(m, "b" + n).copy_(sd[p + k + ".bias"])
        return m
    # decoder LMs with q_proj .. o_proj: the settings of the layer as the library reads them
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        import json
        json.dump(cfg, f)
    try:
        settings, info = _lib.hf_layer_settings(f.name, layer, assume)
    finally:
        os.unlink(f.name)
    if info["mla"]:
        raise ValueError("MLA (DeepSeek-V2/V3): its latent projections are not a q/k/v layer; run its "
                         "attention through posenc.torch.attention with the settings of posenc hf-config")
    pre = [prefix] if prefix is not None else [f"model.layers.{layer}.self_attn.",
                                               f"model.language_model.layers.{layer}.self_attn.",
                                               f"language_model.model.layers.{layer}.self_attn.", "self_attn.", ""]
    p = _pick(sd, pre, ["q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"])
    if p + "q_norm.weight" in sd or p + "k_norm.weight" in sd:
        raise ValueError(f"{mt}: the layer normalises q and k (q_norm, k_norm) before the rotation, which is not "
                         "part of posenc's layer: project and normalise in torch, then posenc.torch.attention")
    H, D = int(settings.pop("heads")), int(info["head_dim"])
    method = settings.pop("method")
    kv = settings.pop("kv_heads", None)
    causal = settings.pop("causal", "true") == "true"
    C = sd[p + "q_proj.weight"].shape[1]
    if H * D != C or sd[p + "o_proj.weight"].shape != (C, H * D):
        raise ValueError(f"{mt}: heads {H} x head_dim {D} = {H * D} is not the hidden size {C}: posenc's layer "
                         "has C = H * D (use posenc.torch.attention on the projected q, k, v)")
    bias = p + "q_proj.bias" in sd
    m = Attention(C, H, method, kv_heads=None if kv is None else int(kv), causal=causal, bias=bias, **settings)
    with torch.no_grad():
        if settings.get("rope_scaling") == "longrope":  # the factor tables are tensors of the layer
            rs = text.get("rope_parameters") or text.get("rope_scaling")
            m.short_factor.copy_(torch.tensor(rs["short_factor"]))
            m.long_factor.copy_(torch.tensor(rs["long_factor"]))
        for n in "qkvo":
            getattr(m, "w" + n).copy_(sd[p + n + "_proj.weight"])
            b = getattr(m, "b" + n)
            if b is not None:
                src = sd.get(p + n + "_proj.bias")
                b.copy_(src) if src is not None else b.zero_()
    return m
