"""posenc.torch.Attention: outputs and gradients against a plain-PyTorch float64 layer (the
project's reference, tests/ref/posenc_ref.py with its m_<name>.py modules) on every case the
reference defines, and against `posenc attend` and the expectations on the public
conformance cases. Methods come from the library's list and the reference's modules."""
import os
import subprocess

import numpy as np
import pytest
import torch
from conftest import CLI, LIB_METHODS, REF_METHODS, ROOT, assert_close, need_method, public_cases
from read_safetensors import read_safetensors

import posenc.torch as pt

INPUTS = ("x", "ids", "positions", "mems", "dy", "dy_imag")


def reference_cases():
    import make_fixtures
    import posenc_ref
    out = []
    for method in REF_METHODS:
        mod = posenc_ref.method_module(method)
        specs = [s for s in make_fixtures.GENERIC if s["name"] not in getattr(mod, "SKIP_GENERIC", ())]
        specs += list(getattr(mod, "CASES", []))
        out += [(method, dict(s), 5000 + i) for i, s in enumerate(specs)]
    return out


def run_module(meta, t, dtype=torch.float32):
    """The layer as a posenc.torch.Attention holding t's tensors: forward on t's inputs,
    backward with t's dy. Returns the module, its outputs and {grad name: array}."""
    att = pt.Attention.from_tensors(meta, t).to(dtype)
    tok = "ids" if "ids" in t else "x"
    inp = torch.tensor(t[tok])
    if tok == "x":
        inp = inp.to(dtype).requires_grad_()
    pos = torch.tensor(t["positions"]) if "positions" in t else None
    mems = torch.tensor(t["mems"]) if "mems" in t else None
    mask = torch.tensor(t["attn_mask"]) if "attn_mask" in t else None
    y, probs = att(inp, positions=pos, mems=mems, need_weights=True, attn_mask=mask)
    outs = {"probs": probs}
    if isinstance(y, tuple):
        outs["y"], outs["y_imag"] = y
    else:
        outs["y"] = y
    grads = {}
    if "dy" in t or "dy_imag" in t:
        loss = 0
        for o in ("y", "y_imag"):
            if o in outs and "d" + o in t:
                loss = loss + (outs[o] * torch.tensor(t["d" + o]).to(dtype)).sum()
        loss.backward()
        if tok == "x":
            grads["dx"] = inp.grad.numpy()
        for n, p in att.contract_tensors().items():
            grads["d" + n] = p.grad.numpy()
    return att, {n: v.detach().numpy() for n, v in outs.items()}, grads


@pytest.mark.parametrize("method,spec,seed", reference_cases(),
                         ids=lambda v: v if isinstance(v, str) else v["name"] if isinstance(v, dict) else "")
def test_module_equals_float64_reference(method, spec, seed):
    import make_fixtures
    import posenc_ref
    need_method(method)
    mod = posenc_ref.method_module(method)
    meta, t = make_fixtures.build(mod, spec, seed)
    fixture = os.path.join(ROOT, "tests", "fixtures", f"{method}_{spec['name']}")
    if ("positions" in t and t["positions"].max() > 1000 and os.path.exists(fixture + ".safetensors")
            and os.path.exists(fixture + ".expected.safetensors")):
        # far positions can make the float64 reference slow (FLOATER integrates the ODE step
        # by step): take the same case from its committed fixture, which that reference wrote
        t, meta = read_safetensors(fixture + ".safetensors")
        ref, _ = read_safetensors(fixture + ".expected.safetensors")
    else:
        try:
            ref = {n: v.numpy() for n, v in posenc_ref.attend(meta, t).items()}
        except NotImplementedError as e:
            pytest.skip(str(e))
    att, outs, grads = run_module(meta, t)
    for name in ("y", "y_imag", "probs"):
        if name in ref:
            assert_close(name, outs[name], ref[name])
    assert set(grads) == {n for n in ref if n not in ("y", "y_imag", "scores", "probs")}
    for name, g in grads.items():
        assert_close(name, g, ref[name])
    # every parameter of the module received a gradient
    assert all(p.grad is not None for p in att.parameters())


@pytest.mark.parametrize("case,method", public_cases(), ids=lambda v: os.path.basename(str(v)))
def test_module_equals_posenc_attend_on_public_cases(case, method, tmp_path):
    need_method(method)
    if not os.path.exists(CLI):
        pytest.skip(f"{CLI} not built")
    t, meta = read_safetensors(case)
    out_path = tmp_path / "out.safetensors"
    subprocess.run([CLI, "attend", case, "-o", str(out_path)], check=True, capture_output=True)
    tool, _ = read_safetensors(str(out_path))
    exp, _ = read_safetensors(case[:-len(".safetensors")] + ".expected.safetensors")
    _, outs, grads = run_module(meta, t)
    got = {**outs, **grads}
    for name, b in tool.items():
        if name == "scores":
            continue
        assert name in got, f"{name} missing from the module's results"
        assert_close(name, got[name], b, rtol=1e-6, atol=1e-6)   # same library: same numbers
        assert_close(name, got[name], exp[name])


def test_functional_attend_returns_scores_and_probs():
    need_method("rope")
    rng = np.random.default_rng(3)
    C = 8
    t = {n: torch.tensor(rng.random((C, C), np.float32) - 0.5, requires_grad=True)
         for n in ("wq", "wk", "wv", "wo")}
    t["x"] = torch.tensor(rng.random((2, 5, C), np.float32), requires_grad=True)
    out = pt.attend({"method": "rope", "heads": 2, "causal": True}, t)
    assert set(out) == {"y", "scores", "probs"}
    assert out["scores"].shape == (2, 2, 5, 5) and torch.isinf(out["scores"][0, 0, 0, 1])
    assert not out["probs"].requires_grad
    out["y"].sum().backward()
    assert all(v.grad is not None for v in t.values())


def test_explicit_positions_equal_default_and_gqa():
    need_method("rope")
    torch.manual_seed(0)
    att = pt.Attention(16, 4, "rope", kv_heads=2, causal=True)
    assert att.wk.shape == (8, 16) and att.wv.shape == (8, 16)
    x = torch.randn(3, 6, 16)
    y0 = att(x)
    y1 = att(x, positions=torch.arange(6))
    y2 = att(x, positions=torch.arange(6).expand(3, 6).to(torch.int32))
    assert torch.equal(y0, y1) and torch.equal(y0, y2)
    # rotary: a global shift of the positions changes nothing
    y3 = att(x, positions=torch.arange(6) + 1000)
    assert torch.allclose(y0, y3, atol=1e-4)
    # batch = sequences: each row alone gives the same result
    assert torch.allclose(att(x[1]), y0[1], atol=1e-6)


def test_module_called_twice_before_backward():
    need_method("t5")
    torch.manual_seed(0)
    att = pt.Attention(8, 2, "t5", num_buckets=8, max_distance=16)
    x = torch.randn(2, 5, 8, requires_grad=True)
    (att(x).sum() + 2 * att(x[:, :3]).sum()).backward()
    g = {n: p.grad.clone() for n, p in att.named_parameters()}
    att.zero_grad()
    x2 = x.detach().clone().requires_grad_()
    att(x2).sum().backward()
    g1 = {n: p.grad.clone() for n, p in att.named_parameters()}
    att.zero_grad()
    (2 * att(x2[:, :3]).sum()).backward()
    for n in g:
        assert torch.allclose(g[n], g1[n] + dict(att.named_parameters())[n].grad, atol=1e-5)


def test_init_follows_the_references():
    need_method("t5")
    torch.manual_seed(0)
    att = pt.Attention(64, 4, "t5")
    assert abs(att.rel_bias.std().item() - 64 ** -0.5) < 0.03
    if "alibi" in pt.posenc.methods():
        a = pt.Attention(18, 6, "alibi", optional="alibi_slopes")
        assert torch.allclose(a.alibi_slopes, torch.tensor(pt._get_slopes(6), dtype=torch.float32))
        # trainable slopes at their initial value give the fixed slopes' layer
        b = pt.Attention(18, 6, "alibi")
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "alibi_slopes"})
        x = torch.randn(5, 18)
        assert torch.allclose(a(x), b(x), atol=1e-6)
    if "learned" in pt.posenc.methods():
        le = pt.LearnedEncoding(32, 100)
        assert abs(le.pos_table.std().item() - 0.02) < 0.003


def test_encoders():
    need_method("sinusoidal")
    import m_sinusoidal
    enc = pt.SinusoidalEncoding(8, layout="concat", base=500, shift=3)
    x = torch.randn(2, 5, 8, requires_grad=True)
    pos = torch.tensor([[0, 1, 4, 9, 10], [2, 3, 5, 6, 100]])
    y = enc(x, pos)
    P = m_sinusoidal.table(pos + 3, 8, "concat", 500.0)
    assert torch.allclose(y.double(), x.double() + P, atol=1e-5)
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    assert list(enc.parameters()) == []
    if "learned" in pt.posenc.methods():
        le = pt.LearnedEncoding(8, 16, shift=1)
        y = le(x[0])
        assert torch.allclose(y, x[0] + le.pos_table[1:6])
        (y * 3).sum().backward()
        assert torch.equal(le.pos_table.grad[1:6], torch.full((5, 8), 3.0))
        assert le.pos_table.grad[0].abs().sum() == 0 and le.pos_table.grad[6:].abs().sum() == 0


def test_floater_and_complex_encoders():
    """The two absolute encoders with their own shapes, when the library has them: their
    encoding must be the one the layer uses (checked through attend with identity weights
    in posenc.encode itself), so here: shapes, gradients, and agreement with Attention."""
    torch.manual_seed(0)
    if "floater" in pt.posenc.methods():
        enc = pt.FloaterEncoding(8)
        pos = torch.tensor([0, 3, 7])
        b = enc(positions=pos)
        assert b.shape == (3, 3, 8)
        b.sum().backward()
        assert all(p.grad is not None for p in enc.parameters())
    if "complex" in pt.posenc.methods():
        emb = pt.ComplexEmbedding(11, 8, phase=True)
        ids = torch.tensor([[1, 4, 2], [3, 3, 10]])
        re, im = emb(ids, positions=torch.tensor([1, 2, 3]))
        r, w, th = emb.amp[ids], emb.freq[ids], emb.phase[ids]
        p = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float32)[None, :, None]
        assert torch.allclose(re, r * torch.cos(w * p + th), atol=1e-5)
        assert torch.allclose(im, r * torch.sin(w * p + th), atol=1e-5)
        (re.sum() + im.sum()).backward()
        assert emb.amp.grad is not None and emb.phase.grad is not None


@pytest.mark.parametrize("method", [m for m in LIB_METHODS if m != "none"])
def test_init_follows_the_library(method):
    """Every method tensor starts as the library describes it (pe_param_spec.init): constants
    exactly, uniforms within their bounds, normals near their spread."""
    from posenc import _lib
    settings = {"method": method, "heads": 4}
    keys = {"kerple": {"kerple": "power"}, "deberta": {"share_att_key": False}}.get(method, {})
    opt = {"alibi": ["alibi_slopes"], "deberta": ["pos_key_b", "pos_query_b"]}.get(method, [])
    att = pt.Attention(64, 4, method, rows=40, optional=opt, **keys)
    inits = _lib.Layer({**settings, **keys}, 64).inits()
    for name in att.tensor_names:
        t, (kind, a, b) = getattr(att, name).detach().double(), inits[name]
        if kind == "const":
            assert torch.all(t == torch.tensor(a, dtype=torch.float32).double()), name
        elif kind == "uniform":
            assert t.min() >= a and t.max() <= b, name
        elif kind == "normal" and t.numel() >= 64:
            assert 0.7 * a < t.std() < 1.3 * a, (name, float(t.std()), a)


def test_fast_path_calls_are_independent():
    """Each forward owns its library layer: two forwards, then their backwards in either order,
    give each its own gradient (nothing is recomputed, nothing shared)."""
    torch.manual_seed(3)
    att = pt.Attention(16, 4, "rope", causal=True)
    x1, x2 = (torch.randn(2, 6, 16, dtype=torch.float32, requires_grad=True) for _ in range(2))
    y1, y2 = att(x1), att(x2)
    (y2 * 2).sum().backward()
    g2 = att.wq.grad.clone()
    y1.sum().backward()
    g1 = att.wq.grad - g2
    att.wq.grad = None
    att(x1).sum().backward()
    assert torch.allclose(g1, att.wq.grad, atol=1e-5)
    y, probs = att(x1, need_weights=True)
    assert probs.shape == (2, 4, 6, 6) and torch.allclose(probs.sum(-1), torch.ones(2, 4, 6, dtype=torch.float32), atol=1e-5)
    assert torch.allclose(y, att(x1), atol=1e-5)  # the T x T path and the fused one agree


def test_in_place_change_before_backward_is_caught():
    att = pt.Attention(8, 2, "none")
    y = att(torch.randn(3, 8, dtype=torch.float32))
    with torch.no_grad():
        att.wq.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
