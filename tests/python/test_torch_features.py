"""What a PyTorch user reaches for in posenc.torch.Attention: key_padding_mask
(nn.MultiheadAttention's convention) equal to the attn_mask it stands for, cross-attention
equal to the projected form by hand, KV-cache decoding equal to the full causal forward,
float16 / bfloat16 and autocast computed in float32 and returned in the input's dtype, and a
clear refusal of torch.jit.trace."""
import os

import pytest
import torch
from conftest import ROOT, need_method

import posenc.torch as pt

F32 = torch.float32


def test_key_padding_mask_is_the_attn_mask_it_stands_for():
    need_method("alibi")
    torch.manual_seed(1)
    att = pt.Attention(16, 4, "alibi")
    x = torch.randn(2, 6, 16, dtype=F32, requires_grad=True)
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[1, 4:] = True  # row 1 pads its last two keys
    y1 = att(x, key_padding_mask=kpm)
    y2 = att(x, attn_mask=~kpm[:, None, :].expand(2, 6, 6))
    assert torch.equal(y1, y2)
    # padded keys do not move the other rows' outputs
    x2 = x.detach().clone()
    x2[1, 4:] += 5
    assert torch.allclose(att(x2, key_padding_mask=kpm)[1, :4], y1[1, :4].detach(), atol=1e-5)
    # both together: a window and padding
    win = torch.ones(6, 6, dtype=torch.bool).tril().triu(-2)
    y3 = att(x, attn_mask=win, key_padding_mask=kpm)
    y4 = att(x, attn_mask=win[None] & ~kpm[:, None, :])
    assert torch.equal(y3, y4)
    y3.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_cross_attention_is_the_projected_form():
    need_method("rope")
    torch.manual_seed(2)
    att = pt.Attention(16, 4, "rope", kv_heads=2)
    x, mem = torch.randn(2, 3, 16, dtype=F32), torch.randn(2, 7, 16, dtype=F32)
    y = att(x, context=mem, positions=torch.tensor([7, 8, 9]))
    lin = torch.nn.functional.linear
    q = lin(x, att.wq, att.bq).view(2, 3, 4, 4).transpose(1, 2)
    k = lin(mem, att.wk, att.bk).view(2, 7, 2, 4).transpose(1, 2)
    v = lin(mem, att.wv, att.bv).view(2, 7, 2, 4).transpose(1, 2)
    o = pt.attention(q, k, v, "rope", positions=torch.tensor([7, 8, 9]))
    want = lin(o.transpose(1, 2).reshape(2, 3, 16), att.wo, att.bo)
    assert torch.allclose(y, want, atol=1e-6)
    y.sum().backward()
    assert att.wk.grad is not None and att.wq.grad is not None


@pytest.mark.parametrize("method,keys", [("rope", {"rope_scaling": "dynamic", "rope_factor": 2.0,
                                                   "max_position_embeddings": 4}),
                                         ("alibi", {}), ("t5", {}), ("xpos", {"xpos_scale_base": 8.0}),
                                         ("none", {"attn_temperature_tuning": True, "floor_scale": 3.0})])
def test_decoding_with_the_cache_is_the_full_forward(method, keys):
    need_method(method)
    torch.manual_seed(3)
    att = pt.Attention(16, 4, method, causal=True, **keys)
    x = torch.randn(2, 9, 16, dtype=F32)
    cache = att.kv_cache(batch=2, max_tokens=32)
    # each step equals the full forward of the sequence so far (dynamic NTK's frequencies, xPos's
    # centre follow the length, so the prefix, not the whole sequence, is the reference)
    assert torch.allclose(att.step(x[:, :4], cache), att(x[:, :4]), atol=2e-5)
    for t in range(4, 9):
        assert torch.allclose(att.step(x[:, t:t + 1], cache), att(x[:, :t + 1])[:, -1:], atol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_in_float32(dtype):
    need_method("rope")
    torch.manual_seed(4)
    att = pt.Attention(16, 4, "rope", causal=True)
    x = torch.randn(2, 5, 16, dtype=F32)
    xh = x.to(dtype).requires_grad_()
    y = att(xh)
    assert y.dtype == dtype
    assert torch.allclose(y.float(), att(xh.detach().float()), atol=1e-2)
    y.float().sum().backward()
    assert xh.grad.dtype == dtype and att.wq.grad.dtype == F32


def test_autocast():
    need_method("rope")
    torch.manual_seed(5)
    proj = torch.nn.Linear(16, 16, dtype=F32)
    att = pt.Attention(16, 4, "rope", causal=True)
    x = torch.randn(2, 5, 16, dtype=F32)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        h = proj(x)
        y = att(h)
    assert h.dtype == torch.bfloat16 and y.dtype == torch.bfloat16
    assert torch.allclose(y.float(), att(proj(x)), atol=3e-2)
    y.float().sum().backward()
    assert att.wq.grad is not None and proj.weight.grad is not None


def test_jit_trace_records_the_layer():
    """A trace of Attention records the operator torch.ops.posenc.layer: the traced module
    recomputes on new inputs with the eager module's output and gradients, bit for bit."""
    if not hasattr(torch.ops.posenc, "layer"):
        pytest.skip("this PyTorch has no torch.library")
    need_method("t5")
    torch.manual_seed(4)
    att = pt.Attention(8, 2, "t5", causal=True)
    traced = torch.jit.trace(att, torch.randn(2, 5, 8, dtype=F32))
    assert "posenc::layer" in str(traced.graph)
    x = torch.randn(2, 5, 8, dtype=F32, requires_grad=True)
    eager = att(x)
    eager.square().sum().backward()
    want = [x.grad.clone()] + [p.grad.clone() for p in att.parameters()]
    x.grad = None
    att.zero_grad()
    got = traced(x)
    assert torch.equal(got, eager)
    got.square().sum().backward()
    for a, b in zip([x.grad] + [p.grad for p in att.parameters()], want):
        assert torch.equal(a, b)


def test_jit_script_says_why():
    att = pt.Attention(8, 2, "none")
    with pytest.raises(Exception, match="cannot be scripted"):
        torch.jit.script(att)


def test_dropout_is_reproducible_and_off_in_eval():
    need_method("alibi")
    torch.manual_seed(6)
    att = pt.Attention(16, 4, "alibi", causal=True, dropout=0.3)
    x = torch.randn(2, 12, 16, dtype=F32, requires_grad=True)
    torch.manual_seed(1)
    y1 = att(x)
    torch.manual_seed(1)
    y2 = att(x)
    y3 = att(x)  # the generator moved on: another mask
    assert torch.equal(y1, y2) and not torch.equal(y1, y3)
    y1.sum().backward()
    assert torch.isfinite(x.grad).all()
    att.eval()
    assert torch.equal(att(x), att(x))
    plain = pt.Attention(16, 4, "alibi", causal=True)
    plain.load_state_dict(att.state_dict(), strict=False)
    with torch.no_grad():
        for n, p in att.named_parameters():
            getattr(plain, n).copy_(p)
    assert torch.allclose(att(x), plain(x), atol=1e-6)  # eval: no dropout
    # the probabilities after dropout: zeros at about the rate, the rest divided by 1 - rate
    att.train()
    torch.manual_seed(2)
    _, pd = att(x, need_weights=True)
    att.eval()
    _, p = att(x, need_weights=True)
    kept = pd != 0
    assert torch.allclose(pd[kept], p[kept] / 0.7, rtol=1e-5)
    causal = torch.ones(12, 12).tril().bool().expand_as(p)
    rate = 1 - kept[causal].float().mean().item()
    assert 0.2 < rate < 0.4
    with pytest.raises(ValueError, match="dropout"):
        pt.Attention(16, 4, "alibi", dropout=1.0)


def test_functional_dropout():
    need_method("rope")
    q, k, v = (torch.randn(1, 2, 6, 4, dtype=F32, requires_grad=True) for _ in range(3))
    torch.manual_seed(3)
    o1 = pt.attention(q, k, v, "rope", causal=True, dropout_p=0.5)
    torch.manual_seed(3)
    o2 = pt.attention(q, k, v, "rope", causal=True, dropout_p=0.5)
    assert torch.equal(o1, o2) and not torch.equal(o1, pt.attention(q, k, v, "rope", causal=True))
    o1.sum().backward()
    assert q.grad is not None and v.grad is not None


def test_bench_torch_lm_runs():
    """bench/torch_lm.py (make bench): the same logits on both sides and a ratio per thread count,
    each count in a process of its own (a smoke run: one step, one round)."""
    import re
    import subprocess
    import sys
    script = os.path.join(ROOT, "bench", "torch_lm.py")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # so it starts its process of 1 thread
    r = subprocess.run([sys.executable, script, "--threads", "1", "--steps", "1", "--rounds", "1"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2, r.stdout
    diff = float(re.search(r"max \|logits posenc - torch\| = ([0-9.e+-]+)", lines[0]).group(1))
    assert diff < 1e-4, lines[0]
    want = os.environ.get("OMP_WAIT_POLICY", "unset" if "GOMP_SPINCOUNT" in os.environ else "passive")
    assert f"OMP_WAIT_POLICY {want};" in lines[0], lines[0]
    assert re.fullmatch(r"threads 1: torch [0-9.]+ steps/s, posenc [0-9.]+ steps/s, posenc/torch = [0-9.]+", lines[1])
