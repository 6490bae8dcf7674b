"""Finite differences through the autograd Function (torch.autograd.gradcheck) for every
method of the library, at its default settings, with every optional tensor created: float64
inputs, computed in float32 by the library, so the tolerances are float32's. A check that a
wrong gradient is caught keeps the tolerances honest."""
import pytest
import torch
from conftest import LIB_METHODS

import posenc
import posenc.torch as pt

# float32 inside: central differences with eps 1e-3 carry ~1e-4 rounding noise. Full mode
# (every element of every input), so the layer is small: C = 4, two heads, T = 3.
TOL = dict(eps=1e-3, atol=1e-3, rtol=1e-2)
# settings off the defaults where a default start sits on a kink: pope's bias starts at 0, the
# end of its clamp to [-2 pi, 0], where a central difference is not the derivative
SETTINGS = {"pope": {"pope_bias_uniform_init": "true"}}


def _layer_inputs(method, seed=0):
    torch.manual_seed(seed)
    axes = method == "rope_mixed"  # its free rows are position axes: two, as a ViT's (x, y)
    att = pt.Attention(4, 2, method, rows=2 if axes else 8, optional="all", **SETTINGS.get(method, {}))
    names = list(att.contract_tensors())
    values = [p.detach().double().requires_grad_() for p in att.contract_tensors().values()]
    if pt._reads_ids(method):
        inp = {"ids": torch.randint(0, 8, (2, 3))}
    else:
        names.insert(0, "x")
        values.insert(0, torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True))
        inp = {}
    inp["positions"] = torch.tensor([[0, 1, 3], [2, 4, 5]])
    if axes:
        inp["positions"] = torch.stack([inp["positions"], torch.tensor([[1, 0, 2], [0, 3, 1]])], -1)
    if att.has_memory:
        inp["mems"] = torch.randn(2, 2, 4)
    return att.settings, names, values, inp


def _check(method, seed):
    settings, names, values, inp = _layer_inputs(method, seed)

    def f(*vals):
        out = pt.attend(settings, {**inp, **dict(zip(names, vals))})
        return (out["y"], out["y_imag"]) if "y_imag" in out else out["y"]

    return torch.autograd.gradcheck(f, values, raise_exception=False, **TOL)


@pytest.mark.parametrize("method", LIB_METHODS)
def test_gradcheck_attention(method):
    # relu, abs and clipping have kinks: a draw that puts one within eps of a sample point
    # fails by chance, so a failed first draw must be followed by two that pass
    assert _check(method, 0) or (_check(method, 1) and _check(method, 2))


@pytest.mark.parametrize("method", [m for m in LIB_METHODS if posenc.method_family(m) == "absolute"])
def test_gradcheck_encoding(method):
    torch.manual_seed(1)
    enc = pt.Encoding(method, 4, rows=8, optional="all")
    names = list(enc.method_tensors())
    values = [p.detach().double().requires_grad_() for p in enc.method_tensors().values()]
    inp = {"positions": torch.tensor([0, 2, 3, 5])}
    if pt._reads_ids(method):
        inp["ids"] = torch.randint(0, 8, (2, 4))
    elif method != "floater":
        names.insert(0, "x")
        values.insert(0, torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True))
    if not values:
        pytest.skip(f"{method}: nothing to differentiate")

    def f(*vals):
        out = pt.embed(enc.settings, {**inp, **dict(zip(names, vals))})
        return (out["y"], out["y_imag"]) if "y_imag" in out else out["y"]

    assert torch.autograd.gradcheck(f, values, **TOL)


def test_gradcheck_catches_a_wrong_gradient():
    """The same check with the library's dwq scaled by 1.05 must fail."""
    from posenc import _lib
    settings, names, values, inp = _layer_inputs(LIB_METHODS[0])

    def wrong(s, arrays):
        out = _lib.attend(s, arrays)
        if "dwq" in out:
            out["dwq"] = out["dwq"] * 1.05
        return out

    def f(*vals):
        t = {**inp, **dict(zip(names, vals))}
        return pt._Fn.apply(wrong, settings, tuple(t), ("y",), *t.values())[0]

    assert not torch.autograd.gradcheck(f, values, raise_exception=False, **TOL)
