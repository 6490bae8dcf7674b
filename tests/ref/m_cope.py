"""CoPE, Contextual Position Encoding (Golovneva et al. 2024), after facebookresearch/RAM
projects/cope/src/cope/context_position.py (ContextPosSelfAttn with its defaults: the gates read
the attention's own keys, and the position logits are added before the division by sqrt(D)).

Gates sigmoid(scale q.k) zeroed where the query may not read the key, positions their suffix
sums over the keys (from key j to the query), clamped at npos_max - 1; the logits of every
integer position q @ pos_emb (pos_emb [D, npos_max], one for all heads) gathered at the floor
and the ceiling of each position and mixed linearly; scores scale (q.k + that). Causal only.
float64; pos_emb gets its gradient by autograd (floor and ceil carry none, the weight does)."""
import torch

BASE_META = {"causal": "true", "npos_max": "4"}  # small enough that the clamp is reached
# generic variants that are not causal (fewer keys than queries, explicitly causal=false)
SKIP_GENERIC = ("proj_fewer_keys",)


def defaults(ctx):
    if "causal" not in ctx.meta:  # causal by default, as the library; causal=false is refused there
        ctx.causal = True


def tensors(meta, H, D, npos):
    return {"pos_emb": (D, int(meta.get("npos_max", 65)))}


def score(ctx, q, k):
    P = ctx.get("npos_max", 65, int)
    E = ctx.t["pos_emb"]
    logits = q @ k.transpose(-1, -2)  # (B, H, T, Tk)
    allowed = ctx.visible().expand(ctx.B, 1, ctx.T, ctx.Tk)
    if "attn_mask" in ctx.t:
        m = ctx.t["attn_mask"]
        allowed = allowed & (m[None] if m.dim() == 2 else m)[:, None]
    gates = torch.sigmoid(ctx.scale * logits) * allowed
    pos = torch.flip(torch.cumsum(torch.flip(gates, [-1]), -1), [-1]).clamp(max=P - 1)
    fixed = q @ E  # (B, H, T, P): the logit of each integer position
    lo, hi = pos.floor().long(), pos.ceil().long()
    w = pos - lo
    between = fixed.gather(-1, hi) * w + fixed.gather(-1, lo) * (1 - w)
    return ctx.scale * (logits + between)


CASES = [
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2),
    dict(name="clamp_one", T=5, H=2, D=4, meta={"npos_max": "1"}),  # every position 0
    dict(name="clamp_long", T=12, H=2, D=4, B=2, meta={"npos_max": "3"}),
    dict(name="default_npos", T=9, H=2, D=4, meta={"npos_max": None}),  # 65: never clamped here
    dict(name="scaled", T=7, H=2, D=4, meta={"scale": "0.9"}),  # the gates use the same scale
]

PROJ_CASES = [
    dict(name="proj_gqa_decode", T=1, Tk=7, H=4, D=8, kv_heads=2, causal=True, positions="offset"),
    dict(name="proj_gqa_mask", T=3, Tk=8, H=4, D=4, kv_heads=2, B=2, mask="random", causal=True),
]
