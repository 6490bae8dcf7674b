"""FIRE (Li et al. 2023), float64, as the paper's appendix code: with i the query's position,
u = ln(|c (i - j)| + 1) / (ln(|c max(i, |L init_L|)| + 1) + 1e-6), bias = MLP(u) with
Linear(1, 32) -> relu -> Linear(32, H). torch.max splits the gradient of a tie
(i == |L init_L|) evenly, abs and relu give 0 at 0. fire_L (the paper's L_multiplier, 1 at
initialisation) is drawn from {-1, 1/2, 1, 2}, so |L init_L| is exact and the sign of L is
exercised; the tie cases set fire_L exactly (make_fixtures `values`)."""
import torch

WIDTH = 32


def tensors(meta, H, D, npos):
    return {"fire_w1": (WIDTH, 1), "fire_b1": (WIDTH,), "fire_w2": (H, WIDTH), "fire_b2": (H,),
            "fire_c": (1,), "fire_L": (1,)}


def init(name, shape, rng):
    if name == "fire_L":
        return rng.choice([-1.0, 0.5, 1.0, 2.0], size=shape).astype("float32")
    if name == "fire_c":
        return (0.05 + 0.9 * rng.random(shape)).astype("float32")
    amp = {"fire_w1": 2.0, "fire_b1": 0.5, "fire_w2": 0.5, "fire_b2": 0.5}[name]
    return (amp * (2 * rng.random(shape) - 1)).astype("float32")


def bias(ctx):
    pos = ctx.pos.to(torch.float64)  # (B, T) the query positions i
    rel = pos[:, :, None] - ctx.kpos.to(torch.float64)[:, None, :]  # (B, T, Tk) i - j
    c, L = ctx.t["fire_c"][0], ctx.t["fire_L"][0]
    threshold = torch.abs(L * ctx.get("fire_init_L", 512.0, float))
    norm = torch.max(pos, threshold)  # (B, T)
    num = torch.log(torch.abs(c * rel) + 1)
    den = torch.log(torch.abs(c * norm) + 1) + 1e-6
    u = num / den[:, :, None]  # (B, T, T)
    hidden = torch.relu(u[..., None] * ctx.t["fire_w1"][:, 0] + ctx.t["fire_b1"])
    out = hidden @ ctx.t["fire_w2"].T + ctx.t["fire_b2"]  # (B, T, T, H)
    return out.permute(0, 3, 1, 2)


# generic cases: threshold |L| 5.5, positions on either side of it, no ties
BASE_META = {"fire_init_L": "5.5"}

CASES = [
    dict(name="default_L", T=7, H=2, D=4, meta={"fire_init_L": "512"}, causal=True),
    dict(name="far_beyond", T=6, H=3, D=4, positions=[50, 300, 1000, 4000, 20000, 100000],
         meta={"fire_init_L": "3.25"}),
    dict(name="small_L", T=6, H=2, D=4, meta={"fire_init_L": "0.75"}, causal=True),
    # ties: the threshold |L init_L| is a position and every other query lies beyond it, so
    # fire_L's gradient is half the tie row's (torch.max splits it), not all or nothing
    dict(name="tie", T=6, H=2, D=4, positions=[4, 5, 6, 8, 9, 12], meta={"fire_init_L": "4"},
         values={"fire_L": [1.0]}),
    dict(name="tie_negative_L", T=5, H=3, D=4, positions=[5, 7, 8, 10, 11],
         meta={"fire_init_L": "10"}, values={"fire_L": [-0.5]}),
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2,
         meta={"fire_init_L": "7.5"}),
    dict(name="h5_batch", T=5, H=5, D=2, B=2, positions="gapped", meta={"fire_init_L": "2.5"}),
    dict(name="million", T=4, H=2, D=4, positions="million", meta={"fire_init_L": "512"},
         causal=True),
]

PROJ_CASES = [dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2)]
