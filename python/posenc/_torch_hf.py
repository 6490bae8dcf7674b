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


# ---- patch: posenc as the attention of a transformers model ---------------------------------
# transformers' attention modules (LlamaAttention and the families copied from it) project q, k,
# v, rotate q and k with their module's apply_rotary_pos_emb (or apply_rotary_emb, ...), update
# the cache, then call the function that config._attn_implementation names in
# ALL_ATTENTION_FUNCTIONS with q [B, H, T, D], k, v [B, Hkv, Tk, D] and the layer's
# position_ids among its keyword arguments (modeling_llama.py LlamaAttention.forward,
# LlamaDecoderLayer.forward; modeling_utils.py AttentionInterface). patch() makes that function
# posenc's ("posenc", registered in AttentionInterface) and has each attention module's forward
# skip HF's rotation, so that q and k reach posenc as projected (after the family's q/k norms,
# which act per head before the rotation) and the cache keeps them unrotated: posenc rotates q
# and k at their positions, keys at key_positions, as an engine holding unrotated keys does.
_ROTATIONS = ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_rotary_pos_emb_interleave")
_IMPLEMENTATION = "posenc"
_HF_APPLIES = ("llama_4_scaling_beta",)
# the families whose HF code tests/python/test_hf_executed.py runs beside patch() (their rows of
# posenc's table): a family not here is refused rather than guessed
CHECKED = frozenset("""llama mistral mixtral qwen2 qwen2_moe qwen3 qwen3_moe arcee starcoder2 gemma gemma3_text phi
    phi3 phimoe smollm3 granite granitemoe gpt_oss cohere cohere2 glm glm4 glm4_moe gpt_neox falcon stablelm olmo
    olmo2 olmo3 exaone4 exaone ernie4_5 persimmon nemotron ministral3 gemma4_text""".split())


def _no_rotation_of(f):
    """What stands for rotation function f: its inputs returned as they are: q and k, or the one
    tensor of a function that rotates one at a time (GPT-J's apply_rotary_pos_emb(tensor, sin,
    cos))."""
    import inspect
    try:
        names = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        names = []
    if len(names) > 1 and names[1] in ("sin", "cos", "freqs_cis", "position_embeddings", "sincos"):
        return lambda x, *args, **kwargs: x
    return lambda q, k, *args, **kwargs: (q, k)


class _SkipRotation:
    """While a patched attention module runs, its modeling module's rotation functions return q
    and k as they are (nested calls counted: modules of one family share the functions)."""

    def __init__(self, modeling):
        self.modeling, self.depth, self.saved = modeling, 0, {}

    def __enter__(self):
        if self.depth == 0:
            for n in _ROTATIONS:
                f = getattr(self.modeling, n, None)
                if f is not None:
                    self.saved[n] = f
                    setattr(self.modeling, n, _no_rotation_of(f))
        self.depth += 1

    def __exit__(self, *exc):
        self.depth -= 1
        if self.depth == 0:
            for n, f in self.saved.items():
                setattr(self.modeling, n, f)
            self.saved = {}


_SKIPS = {}


class _Plan:
    """What posenc runs for one attention module: its settings (the family table's for its layer,
    or the caller's method), the window of a sliding layer, and the module's tensors by name."""

    def __init__(self, settings, window, tensors, layer, family):
        self.settings, self.window, self.tensors = settings, window, tensors
        self.layer, self.family = layer, family


def _key_positions(pos, T, Tk):
    """The keys' positions: the queries' own when the call holds every key (a forward without a
    cache, or the first step into an empty one); otherwise HF's cache holds the Tk - T tokens
    before the queries, at the positions just before theirs (generate's, with or without a
    sliding cache: contiguous positions)."""
    if Tk == T:
        return pos
    last = pos[..., -1:]
    return last - (Tk - 1) + torch.arange(Tk, dtype=pos.dtype, device=pos.device)


def _hf_mask(mask, B, T, Tk):
    """HF's mask (sdpa's: bool [B or 1, 1, T, Tk], True takes part; an eager model's is additive,
    0 or the dtype's minimum) as posenc's bool [B, T, Tk], or None."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"attn_implementation 'posenc': HF's mask is a {type(mask).__name__} (a flex BlockMask?); "
                         "posenc reads a tensor mask")
    if mask.dtype != torch.bool:
        mask = mask == 0
    mask = mask[..., -T:, -Tk:]
    if mask.dim() == 4:
        if mask.shape[1] != 1:
            raise ValueError("attn_implementation 'posenc': a per-head mask is not read")
        mask = mask[:, 0]
    return mask.expand(B, T, Tk)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                      softcap=None, position_ids=None, **kwargs):
    """transformers' attention function for attn_implementation="posenc" (AttentionInterface):
    q [B, H, T, D], k, v [B, Hkv, Tk, D] as the module projected them (patch() keeps HF's
    rotation out); returns (o [B, T, H, D], None)."""
    import posenc.torch as pt
    plan = getattr(module, "_posenc", None)
    if plan is None:
        raise ValueError(f"{type(module).__name__}: attn_implementation 'posenc' reads the model's positional scheme: "
                         "load the model, then posenc.torch.hf.patch(model)")
    if softcap:
        raise ValueError(f"{type(module).__name__}: attention-logit soft-capping (softcap {softcap}) is not computed by posenc")
    B, T, Tk = int(query.shape[0]), int(query.shape[-2]), int(key.shape[-2])
    if position_ids is None:
        position_ids = getattr(module, "_posenc_position_ids", None)
    if position_ids is None:
        pos = torch.arange(Tk - T, Tk, dtype=torch.int64).expand(B, T)
    else:
        pos = torch.as_tensor(position_ids).to(torch.int64)
        if pos.dim() == 3:
            raise ValueError(f"{plan.family}: position_ids with several axes (M-RoPE) are not read by patch() yet")
        pos = pos.expand(B, T)
    settings = dict(plan.settings)
    if plan.window:
        settings["window"] = f"{plan.window - 1},0"
    tensors = {n: getattr(module, a) for n, a in plan.tensors.items()}
    o = pt.attention(query, key, value, positions=pos, key_positions=_key_positions(pos, T, Tk),
                     attn_mask=_hf_mask(attention_mask, B, T, Tk), tensors=tensors,
                     dropout_p=float(dropout), **settings)
    return o.transpose(1, 2).contiguous(), None


def _register():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(_IMPLEMENTATION, attention_forward)
    AttentionMaskInterface.register(_IMPLEMENTATION, sdpa_mask)  # boolean masks, None where causal alone


def _attention_modules(model):
    """(layer index, module) of each attention module: HF's are named *Attention and carry
    layer_idx (their output projection is o_proj, or dense in GPT-NeoX, GPT-J, Phi, Falcon)."""
    out = []
    for _, m in model.named_modules():
        if type(m).__name__.endswith("Attention") and isinstance(getattr(m, "layer_idx", None), int):
            out.append((int(m.layer_idx), m))
    return out


def patch(model, method=None, optional=(), **keys):
    """Makes posenc the attention, positional scheme included, of every attention layer of a
    transformers model, and returns the model.

      model = AutoModelForCausalLM.from_config(...)      # or from_pretrained
      posenc.torch.hf.patch(model)                        # the model's own scheme, from its config
      posenc.torch.hf.patch(model, method="alibi")        # another method, to fine-tune

    method None: each layer computes what the model's config says its family computes, read by
    posenc's family table (posenc hf-config; the rope base and scaling, the rotated slice and its
    layout, NoPE layers, sliding windows, the softmax scale, GPT-OSS's sinks), so that logits
    match HF's own. Another method replaces it: the layer keeps its heads, kv heads, causality and
    window, takes the method and **keys, and its tensors (alibi_slopes, rel_bias, ...) become
    parameters of the attention module (posenc_<name>), initialised as posenc.torch.Attention's
    (trainable); optional names the method's optional tensors to create, as Attention's does
    (optional="alibi_slopes": ALiBi with trainable slopes).
    The model then runs its forward, backward and generate (HF's cache holds unrotated keys;
    with a cache, keys sit at the positions just before the queries') through posenc. Refused by
    name: a family posenc's table does not read, soft-capped logits, MLA, M-RoPE's multi-axis
    positions, chunked attention, a module that rotates by other code than its family's
    apply_rotary_pos_emb."""
    import json
    import sys
    import tempfile

    import torch.nn as nn

    import posenc.torch as pt
    from posenc._torch_fn import _text_settings

    _register()
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    mods = _attention_modules(model)
    if not mods:
        raise ValueError(f"{type(model).__name__}: no attention module (HF's *Attention with a layer_idx) was found")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg.to_dict(), f, default=str)
    try:
        for layer, m in mods:
            settings, info = _lib.hf_layer_settings(f.name, layer)
            fam = info["family"]
            if info["mla"]:
                raise ValueError(f"{fam}: multi-head latent attention (one rotated key head beside the latent) is not "
                                 "a q/k/v layer patch() can take")
            if info["chunked"]:
                raise ValueError(f"{fam}: layer {layer} attends within chunks (attention_chunk_size), which patch() "
                                 "does not read yet")
            if settings.get("rope_sections"):
                raise ValueError(f"{fam}: M-RoPE (rope_sections) reads position_ids with several axes, which "
                                 "patch() does not read yet")
            if fam not in CHECKED:
                raise ValueError(f"{fam}: patch() has not been run beside {fam}'s modeling code yet "
                                 "(tests/python/test_hf_executed.py lists the families it has: posenc.torch.hf.CHECKED)")
            own = {"heads", "kv_heads", "causal"}
            if method is None:
                # what the family's forward does itself, outside its rotation function, stays its
                # own: Ministral 3's query scale by position (Ministral3Attention.forward,
                # get_llama_4_attn_scale)
                chosen = {k: v for k, v in settings.items() if k not in _HF_APPLIES}
            else:
                chosen = {k: v for k, v in settings.items() if k in own}
                chosen["method"] = method
                chosen.update({k: str(v) for k, v in keys.items()})
            tensors = {}
            if method is None and settings.get("attention_sinks") == "true":
                if not isinstance(getattr(m, "sinks", None), torch.Tensor):
                    raise ValueError(f"{fam}: attention_sinks without the module's 'sinks' tensor")
                tensors["sinks"] = "sinks"
            if method is not None:
                holder = pt._MethodTensors()
                H, D = int(chosen["heads"]), int(info["head_dim"])
                holder._make_tensors(_text_settings(chosen, {}), H * D, H, None, optional)
                for n in holder.tensor_names:
                    p = nn.Parameter(getattr(holder, n).detach().clone())
                    m.register_parameter("posenc_" + n, p)
                    tensors[n] = "posenc_" + n
            if method is None and settings.get("rope_scaling") == "longrope":
                text = cfg.to_dict()
                rs = text.get("rope_parameters") or text.get("rope_scaling") or {}
                for n in ("short_factor", "long_factor"):
                    m.register_buffer("posenc_" + n, torch.tensor(rs[n], dtype=torch.float32), persistent=False)
                    tensors[n] = "posenc_" + n
            # a window on every layer that is not full (chunked layers are refused above)
            window = int(info["window"]) if info["layer_type"] != "full_attention" else 0
            m._posenc = _Plan(chosen, window, tensors, layer, fam)
            modeling = sys.modules[type(m).__module__]
            skip = _SKIPS.setdefault(modeling.__name__, _SkipRotation(modeling))
            if not getattr(m, "_posenc_wrapped", False):
                orig = m.forward

                def forward(*a, _orig=orig, _skip=skip, _m=m, **kw):
                    # the layer's position_ids: some families' forward takes them by name and
                    # does not pass them on to the attention function (Ministral 3)
                    _m._posenc_position_ids = kw.get("position_ids")
                    try:
                        with _skip:
                            return _orig(*a, **kw)
                    finally:
                        _m._posenc_position_ids = None
                m.forward = forward
                m._posenc_wrapped = True
    finally:
        os.unlink(f.name)
    for c in {id(cfg): cfg, id(text_cfg): text_cfg}.values():
        c._attn_implementation = _IMPLEMENTATION
    return model
