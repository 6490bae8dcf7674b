"""Tiny transformers models of the families in posenc's table (tests/python/test_hf_executed.py):
each family's configuration class with its own positional defaults, shrunk to a few layers of 4
heads of 16, windows of 8 tokens, and weights large enough (initializer_range 0.2) that the
scores are sharp: a positional convention gone wrong moves the attention, not a rounding."""
import copy

import torch

# what the families need beside the common sizes: a padding id inside the tiny vocabulary, the
# layer count that reaches a family's first full or NoPE layer (its pattern's period)
_COMMON = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, sliding_window=8, max_position_embeddings=131072,
               initializer_range=0.2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
_LAYERS = {"gemma3_text": 6, "gemma3": 6, "smollm3": 4, "cohere2": 4, "exaone4": 4}
# a family whose default slice is wider than the tiny head (GPT-J rotates 64 dims of 256)
_EXTRA = {"gptj": dict(rotary_dim=8)}


def config(model_type):
    from transformers import CONFIG_MAPPING
    cls = CONFIG_MAPPING[model_type]
    has = cls().to_dict()
    # a key the family's class does not have (GPT-NeoX's num_key_value_heads) would be a stray
    # attribute its code never reads
    kw = {k: v for k, v in _COMMON.items() if k in has or k in ("num_hidden_layers", "vocab_size", "hidden_size")}
    kw["num_hidden_layers"] = _LAYERS.get(model_type, 4)
    kw.update(_EXTRA.get(model_type, {}))
    return cls(**kw)


def model(model_type, seed=0):
    """HF's model of the family (AutoModelForCausalLM, eager attention, float32, eval)."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config(model_type), attn_implementation="eager").float().eval()


def copy_model(model):
    return copy.deepcopy(model)
