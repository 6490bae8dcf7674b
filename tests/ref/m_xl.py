"""Transformer-XL relative attention (kimiyoung/transformer-xl, RelPartialLearnableMultiHeadAttn).

Written straight from the formula rather than the reference's pad-and-shift trick, so that the
bidirectional form (causal false, negative distances) is defined everywhere:
    m    = M + i - j            (query i sits at absolute index M + i; keys count the memory)
    m    = min(m, clamp_len)    when clamp_len > 0 (the reference's pos_seq.clamp_(max=...))
    R_m  = [sin(m w) | cos(m w)], w_t = 10000^(-2t/C)   (PositionalEmbedding, C = d_model)
    s    = scale ((q_i + r_w_bias_h).k_j + (q_i + r_r_bias_h).(R_m wr^T)_h)
causal defaults to true; same_length masks j <= M + i - mem_len (mem_len defaults to M), which
is the reference's tril(ones, -mask_shift_len) for every mem_len. Positions are not read."""

import torch

READS_POSITIONS = False  # the layer: queries at M + t, keys at 0 .. M+T-1; projected: i - j


def defaults(ctx):
    if "causal" not in ctx.meta:
        ctx.causal = True


def tensors(meta, H, D, npos):
    return {"r_w_bias": (H, D), "r_r_bias": (H, D), "wr": (H * D, H * D)}


def init(name, shape, rng):
    a = 1.0 if name == "mems" else 0.5
    return (a * (2 * rng.random(shape) - 1)).astype("float32")


def distances(ctx):
    """(B, T, Tk) m = i - j of the positions (the layer's M + i - j), clamped as the reference
    clamps pos_seq."""
    m = ctx.pos[:, :, None] - ctx.kpos[:, None, :]
    clamp = ctx.get("clamp_len", -1, int)
    if clamp > 0:
        m = m.clamp(max=clamp)
    return m


def score(ctx, q, k):
    C, H, D = ctx.C, ctx.H, ctx.D
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, C, 2, dtype=torch.float64) / C)   # (C/2)
    ang = distances(ctx).to(torch.float64)[..., None] * inv_freq                   # (B, T, Tk, C/2)
    R = torch.cat([ang.sin(), ang.cos()], -1)                                      # (B, T, Tk, C)
    Rk = (R @ ctx.t["wr"].T).view(ctx.B, ctx.T, ctx.Tk, H, D)                       # (B, T, Tk, H, D)
    rw = ctx.t["r_w_bias"][None, :, None, :]
    rr = ctx.t["r_r_bias"][None, :, None, :]
    AC = (q + rw) @ k.transpose(-1, -2)                                            # (B, H, T, Tk)
    BD = torch.einsum("bhid,bijhd->bhij", q + rr, Rk)
    s = ctx.scale * (AC + BD)
    if ctx.get("same_length", False, bool):
        mem_len = ctx.get("mem_len", ctx.M, int)
        i = torch.arange(ctx.T)[:, None]
        j = torch.arange(ctx.Tk)[None, :]
        s = s.masked_fill(j <= ctx.M + i - mem_len, float("-inf"))
    return s


def _mems(*shape):
    return {"mems": shape}


CASES = [
    dict(name="mems", T=5, H=2, D=4, tensors=_mems(3, 8)),
    dict(name="mems_batch", T=4, H=2, D=4, B=2, tensors=_mems(2, 3, 8)),
    dict(name="mems_t1", T=1, H=2, D=4, tensors=_mems(4, 8)),
    dict(name="mems_h3", T=4, H=3, D=2, tensors=_mems(5, 6)),
    dict(name="mems_long", T=3, H=2, D=4, tensors=_mems(20, 8)),
    dict(name="mems_batch_h5", T=3, H=5, D=2, B=3, tensors=_mems(3, 2, 10)),
    dict(name="clamp", T=6, H=2, D=4, meta={"clamp_len": "3"}, tensors=_mems(5, 8)),
    dict(name="clamp1", T=4, H=2, D=4, meta={"clamp_len": "1"}, tensors=_mems(2, 8)),
    dict(name="clamp0", T=4, H=2, D=4, meta={"clamp_len": "0"}, tensors=_mems(2, 8)),
    dict(name="clamp_nomem", T=7, H=2, D=4, meta={"clamp_len": "2"}),
    dict(name="bidir", T=6, H=2, D=4, meta={"causal": "false"}),
    dict(name="bidir_mems", T=5, H=2, D=4, meta={"causal": "false"}, tensors=_mems(3, 8)),
    dict(name="bidir_clamp_batch", T=5, H=2, D=4, B=2, meta={"causal": "false", "clamp_len": "2"},
         tensors=_mems(2, 4, 8)),
    dict(name="same_length", T=5, H=2, D=4, meta={"same_length": "true"}, tensors=_mems(4, 8)),
    dict(name="same_length_short", T=5, H=2, D=4, meta={"same_length": "true", "mem_len": "2"},
         tensors=_mems(4, 8)),
    dict(name="same_length_long", T=4, H=2, D=4, meta={"same_length": "true", "mem_len": "5"},
         tensors=_mems(3, 8)),
    dict(name="same_length_beyond", T=4, H=2, D=4, meta={"same_length": "true", "mem_len": "9"},
         tensors=_mems(3, 8)),
    dict(name="same_length_nomem", T=5, H=2, D=4, meta={"same_length": "true", "mem_len": "2"}),
    dict(name="same_length_batch_clamp", T=4, H=2, D=4, B=2,
         meta={"same_length": "true", "clamp_len": "2"}, tensors=_mems(2, 3, 8)),
    dict(name="same_length_bidir", T=4, H=2, D=4,
         meta={"causal": "false", "same_length": "true", "mem_len": "3"}, tensors=_mems(2, 8)),
    dict(name="scaled", T=4, H=2, D=4, meta={"scale": "0.3"}, tensors=_mems(2, 8)),
]

PROJ_CASES = [
    dict(name="proj_same_length", T=3, Tk=8, H=2, D=4, meta={"same_length": "true"}),
    dict(name="proj_same_length_short", T=3, Tk=8, H=2, D=4, meta={"same_length": "true", "mem_len": "2"}),
    dict(name="proj_clamp", T=3, Tk=8, H=2, D=4, meta={"clamp_len": "3"}),
    dict(name="proj_bidir", T=4, Tk=6, H=2, D=4, meta={"causal": "false"}),
]
