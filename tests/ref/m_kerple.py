"""KERPLE (Chi et al. 2022), float64: d = |i - j| from positions, per head
log: -r1 ln(1 + r2 d); power: -r1 d^r2. No clamping of r1, r2 (the reference's in-place clamp
is a training-time projection). torch's pow gives d^r2 = 0 and a zero r2-gradient at d = 0."""
import torch


def tensors(meta, H, D, npos):
    return {"kerple_r1": (H,), "kerple_r2": (H,)}


def init(name, shape, rng):
    return (0.2 + 1.8 * rng.random(shape)).astype("float32")


def bias(ctx):
    d = ctx.rel().abs().to(torch.float64)[:, None]  # (B, 1, T, T)
    r1 = ctx.t["kerple_r1"][None, :, None, None]
    r2 = ctx.t["kerple_r2"][None, :, None, None]
    if ctx.get("kerple", "log") == "log":
        return -r1 * torch.log(1 + r2 * d)
    return -r1 * d ** r2


CASES = [
    dict(name="power", T=7, H=2, D=4, meta={"kerple": "power"}),
    dict(name="power_causal", T=6, H=3, D=4, meta={"kerple": "power"}, causal=True),
    dict(name="power_t1", T=1, H=2, D=4, meta={"kerple": "power"}),
    dict(name="log_bidir_gapped", T=5, H=2, D=4, B=2, positions="gapped"),
    dict(name="power_gapped_batch", T=5, H=3, D=4, B=2, positions="gapped",
         meta={"kerple": "power"}, causal=True),
    # repeated positions: d = 0 off the diagonal, the power form's r2-gradient at 0^r2
    dict(name="power_d0", T=6, H=2, D=4, positions=[0, 0, 1, 1, 1, 4], meta={"kerple": "power"}),
    dict(name="log_gqa", T=6, H=4, D=4, kv_heads=2, causal=True),
    dict(name="power_gqa", T=6, H=6, D=4, kv_heads=3, meta={"kerple": "power"}),
    dict(name="power_large", T=5, H=2, D=4, positions=[3, 40, 900, 5000, 20000],
         meta={"kerple": "power", "scale": "0.5"}),
]

PROJ_CASES = [dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2)]
