"""FLOATER (Liu et al. 2020, xuanqing94/FLOATER): q, k, v biases that follow a neural ODE,
dB/dt = W2 [relu(W1 [B; t] + b1); t] + b2 row by row from B(0) = floater_b0, solved with a plain
classic RK4 loop in float64 on the grid n * floater_step; position p samples B(p * floater_dt),
with one partial RK4 step from the grid point below when that time is between grid points.

The grid index is exact: p * dt / step in rational arithmetic from the decimal text of the keys
(so dt 0.01, step 0.002 gives exactly 5p steps); autograd through every step gives the gradient
of the discrete solution."""
from fractions import Fraction

import numpy as np
import torch

NAMES = ("floater_b0", "floater_w1", "floater_b1", "floater_w2", "floater_b2")


def tensors(meta, H, D, npos):
    C = H * D
    return {"floater_b0": (3, C), "floater_w1": (C, C + 1), "floater_b1": (C,),
            "floater_w2": (C, C + 1), "floater_b2": (C,)}


def init(name, shape, rng):
    # weights ~ 0.5/sqrt(fan-in) keep the flow tame over the long times of the large cases
    a = {"floater_b0": 0.5, "floater_b1": 0.2, "floater_b2": 0.2}.get(name, 0.5 / np.sqrt(shape[-1]))
    return (a * (2 * rng.random(shape) - 1)).astype(np.float32)


def grid(p, dt_text, step_text):
    """(n, r): t = p dt = n step + r with 0 <= r < step, exactly; r as float."""
    t, step = Fraction(dt_text) * p, Fraction(step_text)
    n = t // step
    return int(n), float(t - n * step)


def rk4(f, t0, h, y):
    k1 = f(t0, y)
    k2 = f(t0 + h / 2, y + h / 2 * k1)
    k3 = f(t0 + h / 2, y + h / 2 * k2)
    k4 = f(t0 + h, y + h * k3)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def biases(t, pos, dt_text, step_text):
    """B(p dt) for every entry of pos (any shape): (..., 3, C)."""
    b0, w1, b1, w2, b2 = (t[n] for n in NAMES)
    step = float(Fraction(step_text))

    def f(time, b):  # b (3, C)
        tt = torch.full((b.shape[0], 1), time)
        a = torch.relu(torch.cat([b, tt], 1) @ w1.T + b1)
        return torch.cat([a, tt], 1) @ w2.T + b2

    want = sorted(set(int(p) for p in pos.flatten().tolist()))
    if want and want[0] < 0:
        raise ValueError(f"floater: negative position {want[0]}")
    rows, y, n = {}, b0, 0
    for p in want:
        g, r = grid(p, dt_text, step_text)
        while n < g:
            y = rk4(f, n * step, step, y)
            n += 1
        rows[p] = rk4(f, g * step, r, y) if r > 0 else y
    flat = torch.stack([rows[int(p)] for p in pos.flatten().tolist()])
    return flat.view(*pos.shape, 3, b0.shape[1])


def project(ctx, q, k, v):
    dt, step = ctx.meta.get("floater_dt", "0.01"), ctx.meta.get("floater_step", "0.002")
    qrows = biases(ctx.t, ctx.pos, dt, step)   # (B, T, 3, C) at the query positions
    krows = biases(ctx.t, ctx.kpos, dt, step)  # (B, Tk, 3, C) at the key positions

    def add(x, rows, i):  # rows (B, n, 3, C) -> (B, H, n, D)
        return x + rows[:, :, i].reshape(ctx.B, rows.shape[1], ctx.H, ctx.D).transpose(1, 2)

    return add(q, qrows, 0), add(k, krows, 1), add(v, krows, 2)


CASES = [
    # times between grid points: partial steps (dt 0.003 on step 0.002)
    dict(name="offgrid", T=6, H=2, D=4, meta={"floater_dt": "0.003"}, positions=[0, 1, 2, 3, 5, 8]),
    # steps longer than dt: every position but multiples of 5 is a partial step from below
    dict(name="coarse", T=7, H=2, D=4, meta={"floater_dt": "0.1", "floater_step": "0.25"},
         positions=[0, 1, 2, 3, 5, 7, 10], causal=True),
    # one full step per position, t up to 3
    dict(name="one_step", T=5, H=3, D=2, meta={"floater_dt": "0.5", "floater_step": "0.5"},
         positions=[0, 1, 2, 4, 6]),
    # p dt / step an integer that float64 puts just below it (dt 0.03 = 3 steps of 0.01:
    # 0.03 * p / 0.01 < 3p in float64 for p = 11, 15, 19, 22, 27) and just above it (dt 0.1,
    # step 0.02: p = 3, 6, 12, 17, 23)
    dict(name="grid_rounding_below", T=6, H=2, D=4, meta={"floater_dt": "0.03", "floater_step": "0.01"},
         positions=[0, 11, 15, 19, 22, 27]),
    dict(name="grid_rounding_above", T=5, H=2, D=4, meta={"floater_dt": "0.1", "floater_step": "0.02"},
         positions=[3, 6, 12, 17, 23]),
    # large positions: 10235 steps, to t = 20.47 (the flow grows) and to t = 2.047 (finer grid)
    dict(name="large", T=5, H=2, D=4, positions=[0, 1, 511, 1024, 2047], causal=True),
    dict(name="large_fine", T=5, H=2, D=4, positions=[0, 3, 1000, 2046, 2047],
         meta={"floater_dt": "0.001", "floater_step": "0.0002"}),
    dict(name="batch_offset", T=4, H=2, D=3, B=3, positions="gapped",
         meta={"floater_dt": "0.05", "scale": "0.3"}),
]
