"""The engine API from Python: posenc.KVCache / posenc.torch.KVCache decoding step by step
equals the float64 reference's projected form over each prefix (every scaling that changes
with the length, gapped positions, grouped-query attention, two rows); posenc.rotate and
posenc.torch.rotate (autograd: the transpose) against the reference's rotary attention;
a context shift; the cache's errors."""
import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
import posenc_ref
from conftest import assert_close

SETTINGS = [
    {"method": "rope"},
    {"method": "rope", "rope_scaling": "dynamic", "rope_factor": 2.0, "max_position_embeddings": 8},
    {"method": "rope", "rope_scaling": "yarn", "rope_factor": 4.0, "original_max_position_embeddings": 8},
    {"method": "xpos", "xpos_scale_base": 8.0},
    {"method": "alibi"},
    {"method": "t5", "num_buckets": 8, "max_distance": 12},
    {"method": "kerple"},
    {"method": "none"},
]


def _text(meta):  # the reference reads settings as the contract's text
    return {n: posenc._lib.text(v) for n, v in meta.items()}


def _tensors(layer, rng):
    return {n: rng.uniform(0.1, 0.6, size=shape).astype(np.float32) for n, shape, _ in layer.params()}


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_decode_equals_reference(settings):
    rng = np.random.default_rng(3)
    B, H, Hkv, D, N = 2, 4, 2, 8, 12
    C, Ckv = H * D, Hkv * D
    meta = {**settings, "heads": H, "kv_heads": Hkv, "causal": True}
    tensors = _tensors(posenc._lib.Layer(meta, C), rng)
    q = rng.uniform(-1, 1, (B, N, C)).astype(np.float32)
    k = rng.uniform(-1, 1, (B, N, Ckv)).astype(np.float32)
    v = rng.uniform(-1, 1, (B, N, Ckv)).astype(np.float32)
    pos = np.cumsum(1 + rng.integers(0, 3, (B, N)), axis=1) + 5  # gapped, a row each
    cache = posenc.KVCache(meta, C, batch=B, max_tokens=64, tensors=tensors)
    done = 0
    for n in (5, 1, 1, 3, 1, 1):  # a prefill chunk, then tokens
        cache.append(k[:, done:done + n], v[:, done:done + n], pos[:, done:done + n])
        o = cache.attend(q[:, done:done + n])
        end = done + n
        want = posenc_ref.attend_qkv(_text(meta), {"q": q[:, done:end], "k": k[:, :end], "v": v[:, :end],
                                            "positions": pos[:, done:end], "key_positions": pos[:, :end],
                                            **tensors})["o"]
        assert_close(f"o of tokens {done}..{end - 1}", o, want.numpy(), rtol=1e-4, atol=1e-5)
        done = end
    assert len(cache) == N


@pytest.mark.parametrize("settings", [s for s in SETTINGS if s["method"] in ("rope", "xpos")],
                         ids=lambda s: "-".join(str(v) for v in s.values()))
def test_rotate_then_plain_attention(settings):
    torch.manual_seed(1)
    H, T, D = 2, 7, 8
    q, k, v = (torch.randn(1, H, T, D, dtype=torch.float32) for _ in range(3))
    pos = torch.arange(T) * 3 + 100
    keys = {n: x for n, x in settings.items() if n != "method"}
    want = pt.attention(q, k, v, settings["method"], positions=pos, key_positions=pos, causal=True, **keys)
    qr = pt.rotate(q, pos, settings["method"], which="q", **keys)
    kr = pt.rotate(k, pos, settings["method"], which="k", **keys)
    got = pt.attention(qr, kr, v, "none", positions=pos, key_positions=pos, causal=True)
    assert_close("o", got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    # autograd: the backward is the transpose, <R x, y> = <x, R^T y>
    x = torch.randn(1, H, T, D, requires_grad=True)
    y = torch.randn(1, H, T, D)
    (pt.rotate(x, pos, settings["method"], **keys) * y).sum().backward()
    ry = posenc.rotate(y[0].transpose(0, 1).numpy(), pos.numpy(), settings, backward=True)
    assert_close("dx", x.grad[0].transpose(0, 1).numpy(), ry, rtol=1e-5, atol=1e-6)


def test_rotation_exact_at_a_million():
    pos = np.array([999_999, 1_000_000], dtype=np.int64)
    x = np.zeros((2, 1, 8), np.float32)
    x[:, 0, 0] = 1  # pair 0 of the half layout: (cos, sin) of p theta_0 = p
    y = posenc.rotate(x, pos, {"method": "rope"})
    assert np.allclose(y[:, 0, 0], np.cos(pos.astype(np.float64)), atol=1e-7)
    assert np.allclose(y[:, 0, 4], np.sin(pos.astype(np.float64)), atol=1e-7)


def test_shift_then_attend():
    rng = np.random.default_rng(5)
    H, D, N = 2, 8, 10
    C = H * D
    meta = {"method": "rope", "heads": H, "causal": True}
    k = rng.uniform(-1, 1, (1, N, C)).astype(np.float32)
    v = rng.uniform(-1, 1, (1, N, C)).astype(np.float32)
    q = rng.uniform(-1, 1, (1, 1, C)).astype(np.float32)
    pos = np.arange(N) + 999_000
    cache = posenc.KVCache(meta, C, max_tokens=16)
    cache.append(k, v, pos)
    cache.shift(2, 3)  # llama.cpp: keep 2, drop 3, the rest 3 positions earlier
    keep = np.r_[0:2, 5:N]
    kpos = np.r_[pos[:2], pos[5:] - 3]
    o = cache.attend(q, kpos[-1:])
    want = posenc_ref.attend_qkv(_text(meta), {"q": q, "k": k[:, keep], "v": v[:, keep], "positions": kpos[-1:][None],
                                        "key_positions": kpos[None]})["o"]
    assert len(cache) == N - 3
    assert_close("o after the shift", o, want.numpy(), rtol=1e-4, atol=1e-5)


def test_cache_errors():
    cache = pt.KVCache("rope", 2, 4, max_tokens=3)
    k = torch.zeros(1, 2, 2, 4)
    with pytest.raises(posenc.PosencError, match="empty"):
        cache.attend(torch.zeros(1, 2, 1, 4))
    cache.append(k, k)
    with pytest.raises(posenc.PosencError, match="kv_cache full"):
        cache.append(k, k)
    assert len(cache) == 2
    with pytest.raises(posenc.PosencError, match="complex-valued"):
        pt.KVCache("complex", 2, 4)
    with pytest.raises(ValueError, match="shape"):
        cache.attend(torch.zeros(1, 3, 1, 4))


def test_decode_example():
    import os
    import subprocess
    import sys

    from conftest import ROOT
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "decode.py")], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")})
    assert r.returncode == 0, r.stderr
    assert "max |o_cache - o_full|" in r.stdout


def test_cache_hostile_integers():
    """Issue 32's reproducers: shift(2**63 - 1, 2**63 - 1) corrupted the heap, 2**64 wrapped to 0;
    each is refused and the cache answers as before."""
    cache = pt.KVCache("rope", 2, 4, max_tokens=8)
    k = torch.rand(1, 2, 3, 4)  # (B, Hkv, n, D)
    cache.append(k, k)
    q = torch.rand(1, 2, 1, 4)
    before = cache.attend(q)
    for args in [(2**63 - 1, 2**63 - 1, 0), (1, 2**63 - 1, 0), (0, 1, -2**63), (0, 1, 2**60)]:
        with pytest.raises(posenc.PosencError):
            cache.shift(*args)
    for args in [(2**64, 0), (0, -2**64), (-2**63 - 1, 0)]:
        with pytest.raises(posenc.PosencError, match="64-bit"):
            cache.shift(*args)
    with pytest.raises(posenc.PosencError, match="2\\^53"):
        cache.append(k[:, :, :1], k[:, :, :1], positions=torch.tensor([2**53 + 1]))
    assert len(cache) == 3
    assert torch.equal(cache.attend(q), before)


@pytest.mark.parametrize("delta", [None, (2, 2, 2), (2, 0, 0)])
def test_mrope_decode_and_shift(delta):
    """M-RoPE through the cache: positions (time, row, column) as Qwen2-VL lays out text:2,
    image:2x3, text:2 (posenc.mrope_positions), decoded token by token against the float64
    reference's projected form, then a shift on every axis or on the time axis alone"""
    rng = np.random.default_rng(11)
    H, D = 2, 8
    C = H * D
    meta = {"method": "rope", "heads": H, "causal": True, "rope_sections": "2,1,1"}
    pos = np.array([[0, 0, 0], [1, 1, 1]] + [[2, 2 + r, 2 + c] for r in range(2) for c in range(3)] +
                   [[5, 5, 5], [6, 6, 6]], dtype=np.int64)
    N = len(pos)
    q = rng.uniform(-1, 1, (1, N, C)).astype(np.float32)
    k = rng.uniform(-1, 1, (1, N, C)).astype(np.float32)
    v = rng.uniform(-1, 1, (1, N, C)).astype(np.float32)
    cache = posenc.KVCache(meta, C, max_tokens=16)
    assert cache.axes == 3
    for t in range(N):
        cache.append(k[:, t:t + 1], v[:, t:t + 1], pos[t:t + 1])
        o = cache.attend(q[:, t:t + 1], pos[t:t + 1])
        want = posenc_ref.attend_qkv(_text(meta), {"q": q[:, t:t + 1], "k": k[:, :t + 1], "v": v[:, :t + 1],
                                                   "positions": pos[None, t:t + 1], "key_positions": pos[None, :t + 1]})["o"]
        assert_close(f"o of token {t}", o, want.numpy(), rtol=1e-4, atol=1e-5)
    if delta is None:
        return
    cache.shift(1, 2, delta)
    keep = np.r_[0:1, 3:N]
    kpos = np.concatenate([pos[:1], pos[3:] - np.array(delta)])
    o = cache.attend(q[:, -1:], kpos[-1:])
    want = posenc_ref.attend_qkv(_text(meta), {"q": q[:, -1:], "k": k[:, keep], "v": v[:, keep],
                                               "positions": kpos[None, -1:], "key_positions": kpos[None]})["o"]
    assert_close("o after the shift", o, want.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="position axes"):
        cache.shift(0, 1, (1, 1))
