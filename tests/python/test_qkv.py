"""The projected form from Python: posenc.attend with q, k, v (numpy) on the committed
projected-form and attn_mask fixtures, posenc.torch.attention (autograd) against the float64
reference's gradients, and the Attention module's attn_mask."""
import glob
import os

import numpy as np
import pytest
import torch

import make_fixtures
import posenc
import posenc.torch as pt
import posenc_ref
from conftest import ROOT, assert_close, need_method
from read_safetensors import read_safetensors

FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def fixture_cases():
    out = []
    for p in sorted(glob.glob(os.path.join(FIXTURES, "*_proj_*.safetensors")) +
                    glob.glob(os.path.join(FIXTURES, "*_mask_*.safetensors"))):
        if not p.endswith(".expected.safetensors"):
            out.append(p)
    return out


@pytest.mark.parametrize("case", fixture_cases(), ids=os.path.basename)
def test_attend_on_fixtures(case):
    t, meta = read_safetensors(case)
    need_method(meta["method"])
    exp, _ = read_safetensors(case[:-len(".safetensors")] + ".expected.safetensors")
    got = posenc.attend(meta, t)
    assert sorted(got) == sorted(exp)
    for name, b in exp.items():
        assert_close(name, got[name], b)


def _heads_first(a, H):  # [B, n, H*D] -> [B, H, n, D]
    return torch.as_tensor(a).view(a.shape[0], a.shape[1], H, -1).transpose(1, 2)


@pytest.mark.parametrize("method,spec", [
    ("rope", dict(name="py_rope", T=3, Tk=7, H=2, D=4, B=2, positions="gapped", causal=True, mask="random")),
    ("alibi", dict(name="py_alibi_gqa", T=2, Tk=6, H=4, D=4, kv_heads=2, B=2, causal=True, mask="window")),
    ("t5", dict(name="py_t5", T=4, Tk=4, H=2, D=4, B=1, positions="cross")),
    ("shaw", dict(name="py_shaw", T=1, Tk=9, H=2, D=4, B=1, causal=True, positions="offset")),
])
def test_torch_attention_gradients(method, spec):
    """posenc.torch.attention's output and every gradient equal the float64 reference."""
    need_method(method)
    mod = posenc_ref.method_module(method)
    meta, t = make_fixtures.build_qkv(mod, spec, seed=11)
    exp = posenc_ref.attend_qkv(meta, t)
    H = spec["H"]
    keys = {k: v for k, v in meta.items() if k not in ("method", "heads", "kv_heads", "causal")}
    q, k, v = (_heads_first(t[n], H if n == "q" else spec.get("kv_heads", H)).to(torch.float64)
               .requires_grad_() for n in ("q", "k", "v"))
    params = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in t.items()
              if a.dtype == np.float32 and n not in ("q", "k", "v", "do")}
    o = pt.attention(q, k, v, method, positions=t.get("positions"), key_positions=t.get("key_positions"),
                     attn_mask=None if "attn_mask" not in t else torch.as_tensor(t["attn_mask"]),
                     causal=meta.get("causal") == "true", tensors=params, **keys)
    assert o.shape == q.shape
    do = _heads_first(t["do"], H).to(torch.float64)
    (o * do).sum().backward()
    B, T = spec["B"], spec["T"]
    assert_close("o", o.detach().transpose(1, 2).reshape(B, T, -1), exp["o"])
    for n, x in (("q", q), ("k", k), ("v", v)):
        assert_close("d" + n, x.grad.transpose(1, 2).reshape(B, x.shape[2], -1), exp["d" + n])
    for n, p in params.items():
        assert_close("d" + n, p.grad, exp["d" + n])


def test_window_is_its_attn_mask():
    """window=(left, right), FlashAttention's window_size, is the mask of keys
    i + Tk - T - left .. i + Tk - T + right, on every method kind; a bad window names the key."""
    torch.manual_seed(5)
    B, H, T, Tk, D = 2, 2, 6, 10, 4
    q = torch.randn(B, H, T, D, dtype=torch.float64)
    k, v = torch.randn(B, H, Tk, D, dtype=torch.float64), torch.randn(B, H, Tk, D, dtype=torch.float64)
    i = torch.arange(T)[:, None] + Tk - T
    j = torch.arange(Tk)[None, :]
    for method in ("none", "rope", "alibi"):
        for left, right, causal in ((3, 0, True), (2, 1, False), (-1, 2, False)):
            mask = ((j >= i - left) | (left < 0)) & ((j <= i + right) | (right < 0))
            o1 = pt.attention(q, k, v, method, causal=causal, window=(left, right))
            o2 = pt.attention(q, k, v, method, causal=causal, attn_mask=mask)
            assert_close(f"{method} window={left},{right}", o1, o2)
    with pytest.raises(posenc.PosencError, match="window"):
        pt.attention(q, k, v, "none", window=(-3, 0))


def test_torch_attention_refusals():
    q = torch.zeros(2, 3, 4)
    with pytest.raises(posenc.PosencError, match="projected form"):
        pt.attention(q, q, q, "sinusoidal")
    with pytest.raises(posenc.PosencError, match="every key masked"):
        pt.attention(q, q, q, "none", attn_mask=torch.tensor([[1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=torch.bool))
    with pytest.raises(TypeError, match="attn_mask"):
        pt.attention(q, q, q, "none", attn_mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match="per-head"):
        pt.attention(q[None], q[None], q[None], "none", attn_mask=torch.ones(1, 2, 3, 3, dtype=torch.bool))


def test_module_attn_mask_packs_documents():
    """Two documents packed in one row (positions restart, block-diagonal mask) give each
    document's own output."""
    torch.manual_seed(3)
    att = pt.Attention(dim=8, heads=2, method="rope", causal=True)
    a, b = torch.randn(3, 8), torch.randn(4, 8)
    doc = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    mask = doc[:, None] == doc[None, :]
    packed = att(torch.cat([a, b]), positions=torch.tensor([0, 1, 2, 0, 1, 2, 3]), attn_mask=mask)
    assert_close("first", packed[:3].detach(), att(a).detach())
    assert_close("second", packed[3:].detach(), att(b).detach())


def test_operator_in_a_trace():
    """posenc.torch.attention is the operator torch.ops.posenc.attention (torch.library): a
    trace records the call as that node, so the traced module recomputes on new inputs (a call
    through ctypes alone would be frozen into constants) and its gradients are the eager ones."""
    if not hasattr(torch.ops.posenc, "attention"):
        pytest.skip("this PyTorch has no torch.library")
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rel_bias = torch.nn.Parameter(torch.randn(32, 2))

        def forward(self, q, k, v):
            return pt.attention(q, k, v, "t5", causal=True, tensors={"rel_bias": self.rel_bias})

    g = torch.Generator().manual_seed(3)
    make = lambda: [torch.randn(1, 2, 6, 8, generator=g, requires_grad=True) for _ in range(3)]  # noqa: E731
    block = Block()
    traced = torch.jit.trace(block, tuple(make()))
    assert "posenc::attention" in str(traced.graph)
    q, k, v = make()
    eager = block(q, k, v)
    eager.sum().backward()
    want = [t.grad.clone() for t in (q, k, v, block.rel_bias)]
    for t in (q, k, v, block.rel_bias):
        t.grad = None
    got = traced(q, k, v)
    assert torch.equal(got, eager)
    got.sum().backward()
    for a, b in zip([t.grad for t in (q, k, v, block.rel_bias)], want):
        assert torch.equal(a, b)
