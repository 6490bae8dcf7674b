"""Data-dependent ALiBi: the Forgetting Transformer's forget gates as an attention bias, with the
conventions of lucidrains/x-transformers DataDependentAlibi (x_transformers.py).

A Linear of the layer input (forget_gate_w [G, C], forget_gate_b [G]; G = H causal, 2H not)
gives every token G log gates logsigmoid(z) times post_log_scale (the factor after the log),
summed along the row: F. Causal: the bias of (i, j) is F_i - F_j in head h. Not causal: that
on and below the diagonal, and F_j - F_i of the second H gates above it. Token indices, not
positions; masks do not restart the sums. float64, gradients to x, W and b by autograd."""
import torch

PROJECTED = False  # the gates read the layer input x: no projected form


def tensors(meta, H, D, npos):
    G = H if meta.get("causal") == "true" else 2 * H
    return {"forget_gate_w": (G, H * D), "forget_gate_b": (G,)}


def embed(ctx, x):
    ctx.x = x  # the layer input, as it is: the gates read it
    return x


def bias(ctx):
    z = ctx.x @ ctx.t["forget_gate_w"].T + ctx.t["forget_gate_b"]  # (B, T, G)
    logs = torch.nn.functional.logsigmoid(z) * ctx.get("post_log_scale", 1.0, float)
    F = torch.cumsum(logs, 1).transpose(1, 2)  # (B, G, T)
    H = ctx.H
    down = F[:, :H, :, None] - F[:, :H, None, :]  # [b, h, i, j] = F_i - F_j
    if ctx.causal:
        return down
    up = F[:, H:, None, :] - F[:, H:, :, None]  # F_j - F_i of the second gates
    i = torch.arange(ctx.T)[:, None]
    j = torch.arange(ctx.Tk)[None, :]
    return torch.where(j <= i, down, up)


CASES = [
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True, B=2, positions="gapped"),
    dict(name="gqa_bidir", T=5, H=4, D=2, kv_heads=1),
    dict(name="h5_bidir_batch", T=7, H=5, D=2, B=2),
    dict(name="scaled", T=6, H=2, D=4, causal=True, meta={"post_log_scale": "2.5", "bias_init": "1"}),
    dict(name="scaled_negative_bidir", T=6, H=3, D=2, meta={"post_log_scale": "-0.5"}),
    # the reference's start: gates sigmoid(5) (almost no forgetting) over a longer row
    dict(name="bias5_long", T=24, H=2, D=4, causal=True, values={"forget_gate_b": [5.0, 5.0]}),
    # strong forgetting: the bias dwarfs q.k, each query reads its own and the nearest keys
    dict(name="forgetful", T=9, H=2, D=4, B=2, causal=True, values={"forget_gate_b": [-4.0, -2.0]}),
]
