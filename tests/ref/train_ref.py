"""float64 PyTorch reference of the trainer's small Transformer (train/model.c), for
tests/unit/test_train.c: writes tests/fixtures/train/<name>.safetensors with the weights, a
batch, the mean cross-entropy and the gradient of every tensor.

The model, written from the issue and the methods' references (not from the C code):
    x0 = sqrt(C) wte[tokens]    + P[positions] once, for absolute methods (their embed hook)
    per block:  x = x + attn(LN1(x)),  x = x + proj(gelu_tanh(fc(LN2(x))))
    logits = LN_f(x) wte^T      tied output; loss = mean CE over targets >= 0
The attention is posenc_ref's layer (tests/ref/m_<method>.py hooks), causal. Tensors shared
by layers are one leaf (T5 rel_bias, DeBERTa rel_embeddings after a LayerNorm, every TUPE
tensor, FLOATER's dynamics w1 b1 w2 b2 but not b0); the rest are per layer. complex
(doc/methods.md, "Training"): block 0's attention is m_complex's layer on the token ids (amp
and freq one row per token, no phase, positions as given) and the block adds y + y_imag to the
residual stream (its ln_1 is unused); blocks 1.. run `none`. A case with memory (xl_memory)
also stores `mems`, each layer's attention input (after ln_1) of a previous segment, read as
Transformer-XL's [mems; h] (the trainer's segment recurrence). Names follow train/model.h.

    .venv/bin/python tests/ref/train_ref.py tests/fixtures/train
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import posenc_ref  # noqa: E402
from make_fixtures import write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)

ABSOLUTE = {"none", "sinusoidal", "learned"}
SHARED = {"t5": {"rel_bias"}, "deberta": {"rel_embeddings"},
          "tupe": {"pos_table", "pos_ln_w", "pos_ln_b", "uq", "uq_b", "uk", "uk_b", "rel_bias"},
          "floater": {"floater_w1", "floater_b1", "floater_w2", "floater_b2"}}
IDS = {"complex": {"phase"}}  # complex-valued block 0 on token ids; the optional tensors it leaves out
NORMED = {"deberta": {"rel_embeddings"}}
HEAD_SCALE = {"t5"}  # the trainer sets scale 1/sqrt(D) for these (train/model.c)

# name, method, layer keys, positions ("default" or "shifted": SHAPE-like offsets per sequence)
CASES = [
    ("rope", "rope", {}, "default"),
    ("learned", "learned", {}, "default"),
    ("sinusoidal_shifted", "sinusoidal", {}, "shifted"),
    ("t5", "t5", {"num_buckets": "8", "max_distance": "12"}, "default"),
    ("alibi", "alibi", {}, "default"),
    ("deberta", "deberta", {"position_buckets": "4", "max_relative_positions": "8"}, "default"),
    ("complex_shifted", "complex", {}, "shifted"),
    ("tupe_shifted", "tupe", {"num_buckets": "8", "max_distance": "12"}, "shifted"),
    ("floater_shifted", "floater", {"floater_dt": "0.1", "floater_step": "0.04"}, "shifted"),
    ("xl_memory", "xl", {}, "default"),
]
MEMORY = {"xl_memory": 3}  # cases with a previous segment: mems (LAYERS, B, M, C), no gradient
V, LAYERS, C, H, FF, B, T = 7, 2, 8, 2, 16, 2, 6
MAX_POS = 12  # rows of tables with free rows: MAX_POS + 1


def layer(meta, t, x, pos, mems=None):
    """One causal attention layer through the method's hooks, autograd intact.
    t: name -> tensor (wq.., the method's tensors); x (B, T, C); pos (B, T); mems (B, M, C)
    or None: earlier keys and values, as Transformer-XL's [mems; h]."""
    mod = posenc_ref.method_module(meta["method"])
    Bx, Tx, Cx = x.shape
    M = 0 if mems is None else mems.shape[1]
    Hh = int(meta["heads"])
    D = Cx // Hh
    pos, kpos = posenc_ref.layer_positions(mod, pos, Bx, Tx, M)
    ctx = posenc_ref.Ctx(meta, t, Bx, Tx, M + Tx, Hh, Hh, D, pos, kpos)
    if hasattr(mod, "defaults"):
        mod.defaults(ctx)
    lin = lambda inp, w, b: inp @ t[w].T + t[b]
    kv = x if mems is None else torch.cat([mems, x], 1)
    q = lin(x, "wq", "bq").view(Bx, Tx, Hh, D).transpose(1, 2)
    k = lin(kv, "wk", "bk").view(Bx, M + Tx, Hh, D).transpose(1, 2)
    v = lin(kv, "wv", "bv").view(Bx, M + Tx, Hh, D).transpose(1, 2)
    if hasattr(mod, "project"):
        q, k, v = mod.project(ctx, q, k, v)
    if hasattr(mod, "rotate"):
        q, k = mod.rotate(ctx, q, k)
    s = mod.score(ctx, q, k) if hasattr(mod, "score") else ctx.scale * q @ k.transpose(-1, -2)
    if hasattr(mod, "bias"):
        s = s + mod.bias(ctx)
    mask = torch.arange(M + Tx)[None, :] > torch.arange(Tx)[:, None] + M
    s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, -1)
    o = p @ v
    if hasattr(mod, "value"):
        o = o + mod.value(ctx, p)
    return lin(o.transpose(1, 2).reshape(Bx, Tx, Cx), "wo", "bo")


def build(method, keys, rng):
    """The weights (name -> float32 array), as the C model names them."""
    mod = posenc_ref.method_module(method)
    meta = {"method": method, "heads": str(H), "causal": "true", **keys}
    u = lambda *shape, a: (a * (2 * rng.random(shape) - 1)).astype(np.float32)
    w = {"wte": u(V, C, a=0.5), "ln_f.weight": 1 + u(C, a=0.2), "ln_f.bias": u(C, a=0.2)}
    shapes = mod.tensors(meta, H, C // H, MAX_POS) if hasattr(mod, "tensors") else {}
    letters = {"H": H, "D": C // H, "C": C, "Ckv": C}
    shapes = {n: tuple(letters.get(d, d) for d in s) for n, s in shapes.items()}
    if "pos_table" in shapes:
        shapes["pos_table"] = (MAX_POS + 1, C)
    if method in IDS:  # tables per token (V rows); optional tensors absent
        shapes = {n: (V,) + s[1:] for n, s in shapes.items() if n not in IDS[method]}
    for n, s in shapes.items():
        init = getattr(mod, "init", None)
        val = init(n, s, rng) if init else u(*s, a=0.5)
        if method in ABSOLUTE or n in SHARED.get(method, ()):
            w["pe." + n] = val
            if n in NORMED.get(method, ()):
                w[f"pe.{n}.ln.weight"] = 1 + u(s[-1], a=0.2)
                w[f"pe.{n}.ln.bias"] = u(s[-1], a=0.2)
    for l in range(LAYERS):
        p = f"h.{l}."
        w[p + "ln_1.weight"], w[p + "ln_1.bias"] = 1 + u(C, a=0.2), u(C, a=0.2)
        w[p + "ln_2.weight"], w[p + "ln_2.bias"] = 1 + u(C, a=0.2), u(C, a=0.2)
        for m in ("wq", "wk", "wv", "wo"):
            w[p + "attn." + m] = u(C, C, a=1 / math.sqrt(C))
        for b in ("bq", "bk", "bv", "bo"):
            w[p + "attn." + b] = u(C, a=0.1)
        w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"] = u(FF, C, a=1 / math.sqrt(C)), u(FF, a=0.1)
        w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"] = u(C, FF, a=1 / math.sqrt(FF)), u(C, a=0.1)
        if method not in ABSOLUTE and (method not in IDS or l == 0):
            for n, s in shapes.items():
                if n not in SHARED.get(method, ()):
                    init = getattr(mod, "init", None)
                    w[p + "attn." + n] = init(n, s, rng) if init else u(*s, a=0.5)
    return meta, w


def model_loss(method, meta, w, tokens, targets, pos, mems=None):
    """Mean cross-entropy of the model with weights w (name -> leaf tensor); mems: each
    layer's attention input (after ln_1) of the previous segment, or None."""
    x = math.sqrt(C) * w["wte"][tokens]
    mod = posenc_ref.method_module(method)
    if method in ABSOLUTE:
        t = {n[3:]: a for n, a in w.items() if n.startswith("pe.")}
        ctx = posenc_ref.Ctx(meta, t, B, T, T, H, H, C // H, pos, pos)
        if hasattr(mod, "embed"):
            x = mod.embed(ctx, x)
    shared = {}
    for n in SHARED.get(method, ()):
        a = w["pe." + n]
        if n in NORMED.get(method, ()):
            a = F.layer_norm(a, (a.shape[-1],), w[f"pe.{n}.ln.weight"], w[f"pe.{n}.ln.bias"], 1e-5)
        shared[n] = a
    nmeta = {"method": "none", "heads": str(H), "causal": "true"}
    lmeta = dict(nmeta) if method in ABSOLUTE else {**nmeta, **meta}
    if method in HEAD_SCALE:
        lmeta["scale"] = repr(1 / math.sqrt(C // H))
    for l in range(LAYERS):
        p = f"h.{l}."
        t = {n[len(p) + 5:]: a for n, a in w.items() if n.startswith(p + "attn.")}
        t.update(shared)
        if method in IDS and l == 0:  # the complex layer reads the ids, not LN1(x)
            o = mod.forward(t, tokens, pos, H, 1 / math.sqrt(2 * (C // H)), True)
            x = x + o["y"] + o["y_imag"]
        else:
            h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
            x = x + layer(nmeta if method in IDS else lmeta, t, h, pos, None if mems is None else mems[l])
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ w[p + "mlp.fc.weight"].T + w[p + "mlp.fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.proj.weight"].T + w[p + "mlp.proj.bias"]
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    logits = x @ w["wte"].T
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/train"
    os.makedirs(out, exist_ok=True)
    for seed, (name, method, keys, posk) in enumerate(CASES):
        rng = np.random.default_rng(1000 + seed)
        meta, w = build(method, keys, rng)
        tokens = rng.integers(0, V, size=(B, T))
        targets = rng.integers(0, V, size=(B, T))
        targets[0, :2] = -1  # unscored targets
        pos = np.tile(np.arange(T), (B, 1))
        if posk == "shifted":
            pos = pos + rng.integers(0, 5, size=(B, 1))
        mems = None
        if name in MEMORY:
            mems = (2 * rng.random((LAYERS, B, MEMORY[name], C)) - 1).astype(np.float32)
        leaves = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in w.items()}
        loss = model_loss(method, meta, leaves, torch.tensor(tokens), torch.tensor(targets), torch.tensor(pos),
                          None if mems is None else torch.tensor(mems, dtype=torch.float64))
        grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
        t = dict(w)
        for (n, a), g in zip(leaves.items(), grads):
            t["grad." + n] = (torch.zeros_like(a) if g is None else g).numpy().astype(np.float32)
        t["tokens"], t["targets"], t["positions"] = tokens.astype(np.int64), targets.astype(np.int64), pos.astype(np.int64)
        t["loss"] = np.array([loss.item()], dtype=np.float64)
        if mems is not None:
            t["mems"] = mems
        md = {"method": method, "vocab": str(V), "layers": str(LAYERS), "width": str(C), "heads": str(H),
              "mlp": str(FF), "max_pos": str(MAX_POS), "keys": " ".join(f"{k}={v}" for k, v in keys.items())}
        write_safetensors(os.path.join(out, name + ".safetensors"), t, md)
        print(f"{name}: loss {loss.item():.6f}, {len(w)} tensors")


if __name__ == "__main__":
    main()
