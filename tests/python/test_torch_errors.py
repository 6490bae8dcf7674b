"""Bad arguments to posenc.torch raise clear errors: the library's message for what it
validates (keys, shapes, positions), ValueError/TypeError for what Python catches first."""
import pytest
import torch
from conftest import need_method

import posenc
import posenc.torch as pt


@pytest.mark.parametrize("args,kwargs,exc,words", [
    ((16, 4, "nope"), {}, posenc.PosencError, "nope"),
    ((16, 4, "none"), {"bogus": 1}, posenc.PosencError, "bogus"),
    ((16, 3, "none"), {}, posenc.PosencError, "heads"),
    ((16, 4, "none"), {"kv_heads": 3}, posenc.PosencError, "kv_heads"),
    ((16, 4, "none"), {"causal": "maybe"}, ValueError, "causal"),
    ((16, 4, "none"), {"optional": ["alibi_slopes"]}, ValueError, "alibi_slopes"),
])
def test_constructor_errors(args, kwargs, exc, words):
    with pytest.raises(exc, match=words):
        pt.Attention(*args, **kwargs)


def test_method_specific_constructor_errors():
    if "shaw" in posenc.methods():
        with pytest.raises(posenc.PosencError, match="kv_heads"):
            pt.Attention(16, 4, "shaw", kv_heads=2)
    if "learned" in posenc.methods():
        with pytest.raises(ValueError, match="rows"):
            pt.Attention(16, 4, "learned")
        with pytest.raises(ValueError, match="rows"):
            pt.Encoding("learned", 16)
    if "rope" in posenc.methods():
        with pytest.raises(ValueError, match="not absolute"):
            pt.Encoding("rope", 16)
        with pytest.raises(posenc.PosencError, match="rope_layout"):
            pt.Attention(16, 4, "rope", rope_layout="sideways")


def test_forward_errors():
    att = pt.Attention(16, 4, "none")
    with pytest.raises(ValueError, match=r"x: shape \[2, 5, 8\]"):
        att(torch.zeros(2, 5, 8))
    with pytest.raises(TypeError, match="torch.Tensor"):
        att([[0.0] * 16])
    with pytest.raises(TypeError, match="x: dtype"):
        att(torch.zeros(5, 16, dtype=torch.int64))
    with pytest.raises(TypeError, match="float32"):
        att(torch.zeros(5, 16, dtype=torch.complex64))
    with pytest.raises(TypeError, match="positions"):
        att(torch.zeros(5, 16), positions=torch.zeros(5))
    with pytest.raises(posenc.PosencError, match="positions"):
        att(torch.zeros(5, 16), positions=torch.arange(4))
    with pytest.raises(ValueError, match="memory"):
        att(torch.zeros(5, 16), mems=torch.zeros(2, 16))
    with pytest.raises(ValueError, match="no tokens"):  # was torch's reshape error (issue 32)
        att(torch.zeros(2, 0, 16))
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU"):
            att(torch.zeros(5, 16, device="cuda"))


def test_position_out_of_the_table():
    need_method("learned")
    att = pt.Attention(16, 4, "learned", rows=8)
    with pytest.raises(posenc.PosencError, match="pos"):
        att(torch.zeros(3, 16), positions=torch.tensor([0, 1, 8]))
    enc = pt.LearnedEncoding(16, 8, shift=2)
    with pytest.raises(posenc.PosencError):
        enc(torch.zeros(7, 16))


def test_all_masked_query_is_an_error():
    need_method("xl")
    att = pt.Attention(8, 2, "xl", same_length=True, mem_len=0)
    with pytest.raises(posenc.PosencError, match="masked"):
        att(torch.zeros(4, 8))


def test_float64_and_double_module():
    att = pt.Attention(8, 2, "none").double()
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    y = att(x)
    assert y.dtype == torch.float64
    y.sum().backward()
    assert x.grad.dtype == torch.float64 and att.wq.grad.dtype == torch.float64


def test_inputs_changed_in_place_before_backward():
    # the library reads q, k, v again in backward (saved = PE_SAVED_INPUTS), as autograd's saved
    # tensors: a change in place between forward and backward is refused, not a wrong gradient
    torch.manual_seed(0)
    q = torch.randn(1, 1, 5, 8, requires_grad=True)
    k, v = torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)
    o = pt.attention(q, k, v, "rope", causal=True)
    v.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.sum().backward()
    q.grad = None
    o = pt.attention(q, k, v, "rope", causal=True)  # unchanged since this forward: a gradient
    o.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_layer_input_changed_in_place_before_backward():
    # the layer reads x again in backward (saved = PE_SAVED_INPUTS): a change in place between
    # forward and backward is refused; under torch.no_grad it keeps nothing, and y is the same
    torch.manual_seed(2)
    att = pt.Attention(16, 2, "rope", causal=True)
    x = torch.randn(2, 7, 16)
    y = att(x)
    x.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x = torch.randn(2, 7, 16, requires_grad=True)
    y = att(x)
    with torch.no_grad():
        assert torch.equal(att(x), y.detach())
    y.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_no_grad_attention_equals_the_graded_one():
    # under torch.no_grad the library keeps nothing for a backward (saved = PE_SAVED_NONE): the
    # same output
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, 6, 8, requires_grad=True), torch.randn(2, 2, 9, 8), torch.randn(2, 2, 9, 8)
    want = pt.attention(q, k, v, "alibi", causal=True)
    with torch.no_grad():
        got = pt.attention(q, k, v, "alibi", causal=True)
    assert not got.requires_grad and torch.equal(got, want.detach())
