"""Decoding with posenc.torch: a causal rope attention (grouped-query, YaRN scaling) over a
KV cache, one token at a time, checked against posenc.torch.attention over the whole prefix;
then posenc.torch.rotate, the same rotation on your own tensors.
    python3 examples/decode.py        (with the library built: make)"""
import torch

import posenc.torch as pt

torch.manual_seed(0)
B, H, Hkv, D, N = 1, 8, 2, 32, 48
keys = {"rope_scaling": "yarn", "rope_factor": 4.0, "original_max_position_embeddings": 16}
q, k, v = torch.randn(B, H, N, D), torch.randn(B, Hkv, N, D), torch.randn(B, Hkv, N, D)

cache = pt.KVCache("rope", H, D, kv_heads=Hkv, batch=B, max_tokens=64, **keys)
cache.append(k[:, :, :16], v[:, :, :16])  # the prompt: 16 tokens at positions 0..15
outs = [cache.attend(q[:, :, :16])]
for t in range(16, N):  # then one token per step
    cache.append(k[:, :, t:t + 1], v[:, :, t:t + 1])
    outs.append(cache.attend(q[:, :, t:t + 1]))
o = torch.cat(outs, dim=2)
full = pt.attention(q, k, v, "rope", causal=True, **keys)
print(f"decode: {len(cache)} tokens cached, max |o_cache - o_full| = {(o - full).abs().max().item():.2g}")
assert (o - full).abs().max().item() < 1e-4

# the rotation alone: rotate q and k yourself, then plain attention gives the same
qr = pt.rotate(q, torch.arange(N), "rope", which="q", **keys)
kr = pt.rotate(k, torch.arange(N), "rope", which="k", **keys)
plain = pt.attention(qr, kr, v, "none", causal=True)
print(f"rotate: max |o_rotated - o_rope| = {(plain - full).abs().max().item():.2g}")
assert (plain - full).abs().max().item() < 1e-4
