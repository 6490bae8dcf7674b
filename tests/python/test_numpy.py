"""posenc.attend / posenc.encode / posenc.embed (numpy) against the public conformance cases,
`posenc attend` and the float64 reference; the library's errors as PosencError."""
import os
import subprocess

import numpy as np
import pytest
from conftest import CLI, LIB_METHODS, REF_METHODS, assert_close, need_method, public_cases
from read_safetensors import read_safetensors

import posenc


def test_methods_match_the_tool():
    if not os.path.exists(CLI):
        pytest.skip(f"{CLI} not built")
    out = subprocess.run([CLI, "methods"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    assert [r[0] for r in rows] == LIB_METHODS
    for r in rows:
        assert posenc.method_family(r[0]) == r[1]
        assert posenc.method_keys(r[0]) == r[2:]


def test_method_info_is_the_library_s():
    """pe_method_describe through ctypes: the facts tools read instead of method names."""
    from posenc import _lib
    info = {m: _lib.method_info(m) for m in LIB_METHODS}
    assert [m for m in LIB_METHODS if info[m]["token_ids"]] == ["complex"]
    assert [m for m in LIB_METHODS if info[m]["memory"]] == ["xl"]
    assert [m for m in LIB_METHODS if info[m]["scale_in_init"]] == ["t5"]
    assert {m: info[m]["axes_min"] for m in LIB_METHODS if info[m]["axes_min"]} == {"rope_mixed": 2}
    with pytest.raises(posenc.PosencError):
        _lib.method_info("nosuch")


@pytest.mark.parametrize("case,method", public_cases(), ids=lambda v: os.path.basename(str(v)))
def test_attend_public_case(case, method):
    need_method(method)
    t, meta = read_safetensors(case)
    exp, _ = read_safetensors(case[:-len(".safetensors")] + ".expected.safetensors")
    out = posenc.attend(meta, t)
    assert set(out) == set(exp)
    for name, b in exp.items():
        assert out[name].dtype == np.float32
        assert_close(name, out[name], b)


def test_attend_overrides_like_the_tool():
    rng = np.random.default_rng(0)
    C = 8
    t = {n: (rng.random((C, C), np.float32) - 0.5) for n in ("wq", "wk", "wv", "wo")}
    t["x"] = rng.random((5, C), np.float32)
    a = posenc.attend({"method": "none", "heads": 2}, t, causal=True)
    b = posenc.attend({"method": "none", "heads": 2, "causal": "true"}, t)
    assert np.isneginf(a["scores"][0, 0, 1]) and np.array_equal(a["y"], b["y"])


def _reference_encoding(method, mod, meta, tt):
    """The float64 reference's encoding of an absolute method: (y, y_imag or None)."""
    import torch

    import posenc_ref
    if method == "floater":  # B(t) at the given positions [B, T]
        return mod.biases(tt, tt["positions"], meta.get("floater_dt", "0.01"),
                          meta.get("floater_step", "0.002")), None
    tok = tt["ids"] if "ids" in tt else tt["x"]
    B, T = tok.shape[:2]
    pos = tt["positions"] if "positions" in tt else torch.arange(T)
    pos = pos.expand(B, T)
    if method == "complex":
        ang = tt["freq"][tt["ids"]] * pos[..., None].to(torch.float64)
        if "phase" in tt:
            ang = ang + tt["phase"][tt["ids"]]
        amp = tt["amp"][tt["ids"]]
        return amp * torch.cos(ang), amp * torch.sin(ang)
    x = tt["x"]
    ctx = posenc_ref.Ctx(meta, tt, B, T, T, 1, 1, x.shape[-1], pos, pos)
    if hasattr(mod, "defaults"):
        mod.defaults(ctx)
    return (mod.embed(ctx, x) if hasattr(mod, "embed") else x), None


@pytest.mark.parametrize("method", [m for m in REF_METHODS if m not in LIB_METHODS
                                    or posenc.method_family(m) == "absolute"])
def test_embed_equals_the_reference(method):
    """embed = the reference's encoding (x + P[positions], FLOATER's B(t), the complex
    embedding) on a batch, values and gradients."""
    import torch

    import make_fixtures
    import posenc_ref
    need_method(method)
    mod = posenc_ref.method_module(method)
    meta, t = make_fixtures.build(mod, dict(name="enc", T=5, H=1, D=8, B=2, positions="gapped"), 7)
    t = {n: v for n, v in t.items() if n not in ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")}
    rng = np.random.default_rng(8)
    if method == "floater":
        t["dy"] = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)
        t.pop("x")
    out = posenc.embed(meta, t)
    tt = {n: torch.tensor(v, dtype=torch.float64, requires_grad=not n.startswith("dy"))
          if v.dtype.kind == "f" else torch.tensor(v.astype(np.int64)) for n, v in t.items()}
    y, y_imag = _reference_encoding(method, mod, meta, tt)
    assert_close("y", out["y"], y.detach().numpy())
    loss = (y * tt["dy"]).sum()
    if y_imag is not None:
        assert_close("y_imag", out["y_imag"], y_imag.detach().numpy())
        loss = loss + (y_imag * tt["dy_imag"]).sum()
    loss.backward()
    for n, v in tt.items():
        if v.requires_grad:
            assert_close("dx" if n == "x" else "d" + n, out["dx" if n == "x" else "d" + n], v.grad.numpy())


@pytest.mark.parametrize("method", [m for m in REF_METHODS if m not in LIB_METHODS
                                    or posenc.method_family(m) == "absolute"])
def test_encode_equals_the_reference_and_embed(method):
    """encode (pe_encode, one sequence, P alone) = the reference's encoding at x = 0, and
    = embed (the layer run token by token) on the same inputs."""
    import torch

    import make_fixtures
    import posenc_ref
    need_method(method)
    if not posenc._lib.HAS_ENCODE:
        pytest.skip("this library has no pe_encode")
    mod = posenc_ref.method_module(method)
    meta, t = make_fixtures.build(mod, dict(name="enc", T=6, H=2, D=4, positions=[0, 2, 3, 7, 8, 40]), 9)
    t = {n: v for n, v in t.items() if n not in ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo",
                                                 "dy", "dy_imag")}
    if "x" in t:
        t["x"] = np.zeros_like(t["x"])
    out = posenc.encode(meta, t)
    np.testing.assert_array_equal(out["positions"], t["positions"])
    tt = {n: torch.tensor(v[None] if n in ("x", "ids", "positions") else v,
                          dtype=torch.float64 if v.dtype.kind == "f" else torch.int64)
          for n, v in t.items()}
    y, y_imag = _reference_encoding(method, mod, meta, tt)
    emb = posenc.embed(meta, t)
    if method == "floater":
        for r, name in enumerate(("P_q", "P_k", "P_v")):
            assert_close(name, out[name], y[0, :, r].numpy())
            np.testing.assert_array_equal(out[name], emb["y"][:, r])
    elif method == "complex":
        assert_close("P_re", out["P_re"], y[0].numpy())
        assert_close("P_im", out["P_im"], y_imag[0].numpy())
        np.testing.assert_array_equal(out["P_re"], emb["y"])
        np.testing.assert_array_equal(out["P_im"], emb["y_imag"])
    else:
        assert_close("P", out["P"], y[0].numpy())
        np.testing.assert_array_equal(out["P"], emb["y"])


def test_encode_width_and_errors():
    if not posenc._lib.HAS_ENCODE:
        pytest.skip("this library has no pe_encode")
    need_method("sinusoidal")
    out = posenc.encode({"method": "sinusoidal"}, {"positions": np.arange(3)}, width=6)
    assert out["P"].shape == (3, 6) and out["P"].dtype == np.float32
    with pytest.raises(posenc.PosencError, match="width"):
        posenc.encode({"method": "sinusoidal"}, {"positions": np.arange(3)})
    with pytest.raises(posenc.PosencError, match="not absolute"):
        posenc.encode({"method": "rope"}, {"positions": np.arange(3)}, width=4)


def test_embed_learned_by_hand():
    need_method("learned")
    rng = np.random.default_rng(1)
    x = rng.random((2, 3, 4), np.float32)
    table = rng.random((9, 4), np.float32)
    pos = np.array([[0, 2, 5], [1, 3, 4]])
    dy = rng.random((2, 3, 4), np.float32)
    out = posenc.embed({"method": "learned", "shift": 2}, {"x": x, "pos_table": table,
                                                           "positions": pos, "dy": dy})
    np.testing.assert_array_equal(out["y"], x + table[pos + 2])
    np.testing.assert_array_equal(out["dx"], dy)
    want = np.zeros_like(table)
    np.add.at(want, pos + 2, dy)
    np.testing.assert_allclose(out["dpos_table"], want, rtol=1e-6)


# ---- errors --------------------------------------------------------------------------------
def _layer(C=8, T=4, **extra):
    rng = np.random.default_rng(2)
    t = {n: rng.random((C, C), np.float32) for n in ("wq", "wk", "wv", "wo")}
    t["x"] = rng.random((T, C), np.float32)
    t.update(extra)
    return t


@pytest.mark.parametrize("settings,tensors,status,words", [
    ({"method": "nope", "heads": 2}, {}, "EKEY", "nope"),
    ({"method": "none", "heads": 2, "bogus": "1"}, {}, "EKEY", "bogus"),
    ({"heads": 2}, {}, "EKEY", "method"),
    ({"method": "none", "heads": 3}, {}, None, "heads"),
    ({"method": "none", "heads": 2}, {"wq": None}, "ETENSOR", "wq"),
    ({"method": "none", "heads": 2}, {"zz": np.zeros(3, np.float32)}, "ETENSOR", "zz"),
    ({"method": "none", "heads": 2}, {"wk": np.zeros((4, 8), np.float32)}, "ETENSOR", "wk"),
    ({"method": "none", "heads": 2}, {"positions": np.zeros(3, np.int64)}, "ETENSOR", "positions"),
    ({"method": "none", "heads": 2}, {"positions": np.zeros(4, np.float32)}, "ETENSOR", "positions"),
])
def test_library_errors_become_exceptions(settings, tensors, status, words):
    t = _layer()
    for n, v in tensors.items():
        if v is None:
            del t[n]
        else:
            t[n] = v
    with pytest.raises(posenc.PosencError) as e:
        posenc.attend(settings, t)
    assert words in str(e.value) and "\n" not in str(e.value)
    if status:
        assert e.value.status_name == status and e.value.status < 0


def test_learned_position_out_of_range():
    need_method("learned")
    t = _layer(pos_table=np.zeros((3, 8), np.float32))
    with pytest.raises(posenc.PosencError, match="pos"):
        posenc.attend({"method": "learned", "heads": 2}, t)


def test_python_side_errors():
    with pytest.raises(TypeError, match="setting value"):
        posenc.attend({"method": "none", "heads": [2]}, _layer())
    with pytest.raises(ValueError, match="at most 4"):
        posenc.attend({"method": "none", "heads": 2}, _layer(zz=np.zeros((1,) * 5, np.float32)))
    with pytest.raises(TypeError, match="complex64"):
        posenc.attend({"method": "none", "heads": 2}, _layer(zz=np.zeros(2, np.complex64)))
    with pytest.raises(ValueError, match="not absolute"):
        posenc.embed({"method": "rope"}, {"x": np.zeros((2, 4), np.float32)})
    with pytest.raises(ValueError, match="layer weight"):
        posenc.embed({"method": "sinusoidal"}, {"x": np.zeros((2, 4), np.float32),
                                                 "wq": np.zeros((4, 4), np.float32)})
    with pytest.raises(posenc.PosencError, match="unknown method|nope"):
        posenc.method_keys("nope")
    with pytest.raises(posenc.PosencError, match="positions"):
        posenc.embed({"method": "sinusoidal"}, {"x": np.zeros((2, 4), np.float32),
                                                 "positions": np.zeros(3, np.int64)})


def test_float64_is_computed_in_float32_and_returned_in_float64():
    rng = np.random.default_rng(0)
    t = {n: rng.standard_normal((8, 8)) for n in ("wq", "wk", "wv", "wo")}
    t["x"] = rng.standard_normal((4, 8))
    out64 = posenc.attend({"method": "none", "heads": 2}, t)
    out32 = posenc.attend({"method": "none", "heads": 2}, {n: a.astype(np.float32) for n, a in t.items()})
    assert out64["y"].dtype == np.float64
    assert np.array_equal(out64["y"], out32["y"].astype(np.float64))
