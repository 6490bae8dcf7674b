"""Complex-order embeddings (Wang et al. 2020, iclr-complex-order/complex-order, translation
model), a layer of its own: token ids replace x, re = amp cos(freq p + phase) and
im = amp sin(freq p + phase) (angles in float64), the same real projections (with biases) on
both parts, s = scale |Qre Kre^T - Qim Kim^T + i (Qre Kim^T + Qim Kre^T)| with scale
1/sqrt(2 D), one softmax for both value streams, y = o_re wo^T + bo, y_imag = o_im wo^T + bo.
The gradient of |S| at S = 0 is taken as 0 (sqrt behind a where, so no NaN)."""
PROJECTED = False  # acts on token ids: no projected form
import math

import numpy as np
import torch

V = 11  # rows of the tables in the generated cases


def tensors(meta, H, D, npos):
    C = H * D
    return {"amp": (V, C), "freq": (V, C), "phase": (V, C)}


def init(name, shape, rng):
    if name == "freq":  # the reference initialises frequencies positive and small
        return (0.05 + 0.6 * rng.random(shape)).astype(np.float32)
    if name == "phase":
        return (2 * math.pi * rng.random(shape)).astype(np.float32)
    return (2 * rng.random(shape) - 1).astype(np.float32)


def edit_inputs(t, spec, rng):
    """ids in place of x; dy_imag beside dy; per-case variants."""
    x = t.pop("x")
    t["ids"] = rng.integers(0, V, size=x.shape[:-1]).astype(np.int64)
    t["dy_imag"] = (2 * rng.random(x.shape) - 1).astype(np.float32)
    for name in spec.get("drop", ()):
        t.pop(name)
    if spec.get("ids_i32"):
        t["ids"] = t["ids"].astype(np.int32)
    if spec.get("zero"):  # every score 0: |S| at 0 must give finite gradients
        for name in ("amp", "bq", "bk"):
            t[name] = np.zeros_like(t[name])


def attend(meta, tensors):
    t = {}
    for name, a in tensors.items():
        if a.dtype.kind == "f":
            t[name] = torch.tensor(a, dtype=torch.float64, requires_grad=name not in ("dy", "dy_imag"))
        elif name == "attn_mask":
            t[name] = torch.tensor(a.astype(bool))
        else:
            t[name] = torch.tensor(a.astype("int64"))
    ids = t["ids"]
    batched = ids.dim() == 2
    if not batched:
        ids = ids[None]
    B, T = ids.shape
    pos = t["positions"] if "positions" in t else torch.arange(T)
    pos = pos.expand(B, T) if pos.dim() == 1 else pos
    D = t["wq"].shape[1] // int(meta["heads"])
    scale = float(meta["scale"]) if "scale" in meta else 1.0 / math.sqrt(2 * D)
    mask = t.get("attn_mask")
    if mask is not None and mask.dim() == 2:
        mask = mask.expand(B, T, T)
    if meta.get("window"):  # the window as a mask (the causal part stays forward's)
        import posenc_ref
        w = posenc_ref.visible(meta, T, T, False).expand(B, T, T)
        mask = w if mask is None else mask & w
    res = forward(t, ids, pos, int(meta["heads"]), scale, meta.get("causal", "false") == "true", mask)
    if not batched:
        res = {n: a[0] for n, a in res.items()}
    if "dy" in t or "dy_imag" in t:
        loss = sum((res[n] * t["d" + n]).sum() for n in ("y", "y_imag") if "d" + n in t)
        names = [n for n, a in t.items() if a.dtype == torch.float64 and n not in ("dy", "dy_imag")]
        gs = torch.autograd.grad(loss, [t[n] for n in names], allow_unused=True)
        for n, g in zip(names, gs):
            res["d" + n] = torch.zeros_like(t[n]) if g is None else g
    return {n: a.detach() for n, a in res.items()}


def forward(t, ids, pos, H, scale, causal, mask=None):
    """The layer with autograd intact: t name -> float64 tensor, ids and pos (B, T), mask
    (B, T, T) bool (True takes part) or None. Returns y, y_imag (B, T, C), scores and probs
    (B, H, T, T)."""
    B, T = ids.shape
    C = t["wq"].shape[1]
    D = C // H
    ang = t["freq"][ids] * pos.to(torch.float64)[..., None]
    if "phase" in t:
        ang = ang + t["phase"][ids]
    amp = t["amp"][ids]
    re, im = amp * torch.cos(ang), amp * torch.sin(ang)

    def lin(inp, w, b):
        y = inp @ t[w].T
        return y + t[b] if b in t else y

    def heads(a):
        return a.view(B, T, H, D).transpose(1, 2)

    qr, kr, vr = (heads(lin(re, "w" + n, "b" + n)) for n in "qkv")
    qi, ki, vi = (heads(lin(im, "w" + n, "b" + n)) for n in "qkv")
    sre = qr @ kr.transpose(-1, -2) - qi @ ki.transpose(-1, -2)
    sim = qr @ ki.transpose(-1, -2) + qi @ kr.transpose(-1, -2)
    m2 = sre * sre + sim * sim
    s = scale * torch.where(m2 > 0, torch.where(m2 > 0, m2, torch.ones_like(m2)).sqrt(), torch.zeros_like(m2))
    if causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask[:, None], float("-inf"))
    p = torch.softmax(s, -1)

    def out(o):
        return lin(o.transpose(1, 2).reshape(B, T, C), "wo", "bo")

    return {"y": out(p @ vr), "y_imag": out(p @ vi), "scores": s, "probs": p}


CASES = [
    dict(name="no_phase", T=6, H=2, D=4, drop=("phase",)),
    dict(name="no_dy_imag", T=5, H=2, D=4, drop=("dy_imag",), causal=True),
    dict(name="only_dy_imag", T=5, H=2, D=4, drop=("dy",)),
    dict(name="ids_i32_batch", T=5, H=2, D=4, B=3, ids_i32=True, positions="gapped"),
    dict(name="reference_positions", T=6, H=2, D=4, drop=("phase",), positions=[1, 2, 3, 4, 5, 6]),
    dict(name="zero_magnitude", T=4, H=2, D=4, zero=True),
    dict(name="scaled_h5", T=5, H=5, D=2, meta={"scale": "0.7"}, causal=True),
    dict(name="million", T=4, H=2, D=4, positions="million"),
]
