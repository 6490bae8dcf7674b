"""HF transformers' own modeling code, executed beside posenc: for each family of posenc's table
that posenc.torch.hf.patch() takes (posenc.torch.hf.CHECKED), a tiny model of that family
(tests/python/hf_tiny.py: its configuration class's own positional defaults) runs as HF runs it
(eager attention, float32) and with posenc as its attention (patch: the settings read from the
model's config by posenc's family table), at position_ids offsets 0, 10^3 and 10^5.

Every attention layer is compared on the same input (the one HF's own run gave it), so that a
family whose router picks experts (MoE) does not carry a small difference of one layer into a
different expert in the next; the logits are compared where no router sits between the layers.
HF forms its rotary angles in float32 (LlamaRotaryEmbedding.forward: position_ids.float() *
inv_freq), whose rounding grows with the position (about p 2^-24 radians at position p), and
posenc in float64: the tolerance is 2e-5 + 1e-7 p of the largest output, the first term float32
arithmetic, the second that rounding of HF's angles (a rope base off by 1% at p = 10^3 is off by
1e-2 here, a hundred times the tolerance)."""
import pytest
import torch

import posenc.torch as pt

transformers = pytest.importorskip("transformers")
import hf_tiny  # noqa: E402

T = 24
OFFSETS = (0, 1_000, 100_000)
# a router between the layers turns a difference of 1e-6 into another expert: layers only
MOE = {"qwen2_moe", "qwen3_moe", "mixtral", "phimoe", "granitemoe", "gpt_oss", "glm4_moe"}


def tolerance(offset):
    return 2e-5 + 1e-7 * (offset + T)


def _attention_modules(model):
    return [m for _, m in pt.hf._attention_modules(model)]


def _record(model, ids, pos):
    """HF's run: each attention module's (args, kwargs, output), and the logits."""
    calls = []

    def pre(mod, args, kwargs):
        calls.append([mod, args, dict(kwargs), None])

    def post(mod, args, kwargs, out):
        calls[-1][3] = out[0].detach().clone()

    hooks = []
    for m in _attention_modules(model):
        hooks.append(m.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(m.register_forward_hook(post, with_kwargs=True))
    try:
        with torch.no_grad():  # no cache: each layer's call is repeated on its own below
            logits = model(ids, position_ids=pos, use_cache=False).logits
    finally:
        for h in hooks:
            h.remove()
    return calls, logits


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


@pytest.mark.parametrize("family", sorted(pt.hf.CHECKED))
def test_patch_matches_hf(family):
    torch.set_num_threads(1)
    model = hf_tiny.model(family)
    patched = pt.hf.patch(hf_tiny.copy_model(model))
    mods = dict(zip(map(id, _attention_modules(model)), _attention_modules(patched)))
    ids = torch.randint(3, 128, (2, T), generator=torch.Generator().manual_seed(1))
    for off in OFFSETS:
        pos = (torch.arange(T) + off)[None].expand(2, T)
        calls, want = _record(model, ids, pos)
        assert calls, f"{family}: no attention module ran"
        tol = tolerance(off)
        for i, (mod, args, kwargs, out) in enumerate(calls):
            with torch.no_grad():
                got = mods[id(mod)](*args, **kwargs)[0]
            err = _rel(got, out)
            assert err <= tol, f"{family} offset {off}: attention layer {i}: {err:.3g} of its largest output (tolerance {tol:.2g})"
        if family not in MOE:
            with torch.no_grad():
                got = patched(ids, position_ids=pos, use_cache=False).logits
            err = _rel(got, want)
            assert err <= 16 * tol, f"{family} offset {off}: logits {err:.3g} of the largest (tolerance {16 * tol:.2g})"


@pytest.mark.parametrize("family", ["llama", "mistral", "cohere2", "gemma3_text"])
def test_patch_generates_with_hf_cache(family):
    """model.generate through HF's cache (unrotated keys in it, posenc rotating them at their
    positions; sliding layers in mistral, cohere2 and gemma3): the same tokens and scores."""
    torch.set_num_threads(1)
    model = hf_tiny.model(family)
    patched = pt.hf.patch(hf_tiny.copy_model(model))
    ids = torch.randint(3, 128, (1, 12), generator=torch.Generator().manual_seed(2))
    kw = dict(max_new_tokens=16, do_sample=False, output_scores=True, return_dict_in_generate=True,
              pad_token_id=0)
    with torch.no_grad():
        a, b = model.generate(ids, **kw), patched.generate(ids, **kw)
    assert torch.equal(a.sequences, b.sequences)
    for s, t in zip(a.scores, b.scores):
        assert _rel(t, s) <= 1e-4


def test_patch_trains():
    """A backward through posenc gives HF's gradients (llama, offset 10^3)."""
    torch.set_num_threads(1)
    model = hf_tiny.model("llama").train()
    patched = pt.hf.patch(hf_tiny.copy_model(model))
    ids = torch.randint(3, 128, (2, T), generator=torch.Generator().manual_seed(3))
    pos = (torch.arange(T) + 1000)[None].expand(2, T)
    for m in (model, patched):
        m(ids, position_ids=pos, labels=ids).loss.backward()
    for (n, p), (_, q) in zip(model.named_parameters(), patched.named_parameters()):
        assert _rel(q.grad, p.grad) <= 1e-3, n


def test_patch_with_another_method():
    """patch(model, method=...): the researcher's swap: ALiBi in a Llama, its slopes parameters of
    the attention modules, trained by backward."""
    torch.set_num_threads(1)
    model = pt.hf.patch(hf_tiny.model("llama").train(), method="alibi", optional="alibi_slopes")
    slopes = [p for n, p in model.named_parameters() if n.endswith("posenc_alibi_slopes")]
    assert len(slopes) == model.config.num_hidden_layers
    ids = torch.randint(3, 128, (2, T), generator=torch.Generator().manual_seed(4))
    loss = model(ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss) and all(s.grad is not None and s.grad.abs().sum() > 0 for s in slopes)


def test_registered_as_attn_implementation():
    """attn_implementation="posenc" is registered; a model not patched says what to do."""
    from transformers import AttentionInterface
    assert "posenc" in AttentionInterface._global_mapping
    model = hf_tiny.model("llama")
    model.set_attn_implementation("posenc")
    with pytest.raises(ValueError, match=r"posenc.torch.hf.patch\(model\)"):
        model(torch.randint(3, 128, (1, 8)))


@pytest.mark.parametrize("family,why", [
    ("gemma2", "soft-capped"),
    ("deepseek_v3", "multi-head latent attention"),
    ("bloom", "has not been run beside"),
])
def test_patch_refuses_by_name(family, why):
    model = hf_tiny.model(family)
    with pytest.raises(Exception, match=why):
        pt.hf.patch(model)
