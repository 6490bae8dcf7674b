"""A small causal LM trained with posenc.torch.Attention against the same model in plain
PyTorch (eager attention: q k^T, mask, softmax, v, RoPE as HF's rotate_half), alternating rounds
in one process so both see the same machine. Prints steps/s of each and `posenc/torch = R`.
Each thread count runs in a process of its own whose OpenMP and OpenBLAS pools have that many
threads too (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS), as torch.set_num_threads alone leaves
posenc's BLAS calls on every core: on a busy machine those idle pools cost either side up to
14x (seen beside two jobs on 2 cores). Its OpenMP threads wait passively (OMP_WAIT_POLICY, unless
the environment sets it): libgomp's default spinning took the cores from OpenBLAS's threads and
left both sides slower on 2 threads than on 1 (posenc 6.5-8.1 steps/s against 17-18 passive,
PyTorch 4.5-4.7 against 7.3-7.7; AMD EPYC, 2 vCPUs; doc/perf.md, item 3).

    python3 bench/torch_lm.py [--threads 1,2] [--method rope] [--steps 8] [--rounds 3]

Model: embedding 256 -> 2 blocks of (LayerNorm, attention width 128 with 4 heads, LayerNorm,
MLP 4x) -> logits; batch 8 x 256 tokens, AdamW. Both models start from the same weights.
"""
import argparse
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import posenc.torch as pt  # noqa: E402

V, C, H, L, T, B = 256, 128, 4, 2, 256, 8


def rope_tables(T, D, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv
    ang = torch.cat([ang, ang], -1)
    return ang.cos().float(), ang.sin().float()


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat([-x2, x1], -1)


class TorchAttention(nn.Module):
    """Plain PyTorch: projections, RoPE (half layout) or ALiBi or nothing, causal softmax."""

    def __init__(self, method):
        super().__init__()
        self.method = method
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(C, C) for _ in range(4))
        cos, sin = rope_tables(T, C // H)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))
        slopes = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)])
        dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()
        self.register_buffer("alibi", -slopes[:, None, None] * dist)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (w(x).view(b, t, H, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        if self.method == "rope":
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
        s = q @ k.transpose(-1, -2) / math.sqrt(C // H)
        if self.method == "alibi":
            s = s + self.alibi
        s = s.masked_fill(self.mask, float("-inf"))
        o = torch.softmax(s, -1) @ v
        return self.wo(o.transpose(1, 2).reshape(b, t, C))


class Block(nn.Module):
    def __init__(self, att):
        super().__init__()
        self.n1, self.n2, self.att = nn.LayerNorm(C), nn.LayerNorm(C), att
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def forward(self, x):
        x = x + self.att(self.n1(x))
        return x + self.mlp(self.n2(x))


class LM(nn.Module):
    def __init__(self, make_att):
        super().__init__()
        self.emb = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(Block(make_att()) for _ in range(L))
        self.head = nn.Linear(C, V)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def copy_weights(src, dst):
    """dst's projections and the rest from src (posenc's Attention names them wq..bo)."""
    with torch.no_grad():
        for bs, bd in zip(src.blocks, dst.blocks):
            for n in ("wq", "wk", "wv", "wo"):
                getattr(bd.att, n).copy_(getattr(bs.att, n).weight)
                getattr(bd.att, "b" + n[1]).copy_(getattr(bs.att, n).bias)
            for part in ("n1", "n2", "mlp"):
                getattr(bd, part).load_state_dict(getattr(bs, part).state_dict())
        dst.emb.load_state_dict(src.emb.state_dict())
        dst.head.load_state_dict(src.head.state_dict())


def steps_per_second(model, data, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        ids = data[i % len(data)]
        loss = loss_fn(model(ids[:, :-1]).reshape(-1, V), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()
    step(0)  # warm-up: allocations, thread pools
    t0 = time.perf_counter()
    for i in range(steps):
        loss = step(i + 1)
    return steps / (time.perf_counter() - t0), loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2", help="thread counts to measure (default 1,2)")
    ap.add_argument("--method", default="rope", choices=("rope", "alibi", "none"))
    ap.add_argument("--steps", type=int, default=8, help="timed steps per round (default 8)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3; the best of each counts)")
    ap.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    counts = [int(v) for v in a.threads.split(",")]
    if len(counts) > 1 or os.environ.get("OMP_NUM_THREADS") != str(counts[0]):
        for i, th in enumerate(counts):  # a process per count, every pool at that count
            env = dict(os.environ, OMP_NUM_THREADS=str(th), OPENBLAS_NUM_THREADS=str(th))
            if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
                env["OMP_WAIT_POLICY"] = "passive"  # read by libgomp when it loads: before torch
            argv = [sys.executable, os.path.abspath(__file__), "--threads", str(th), "--method", a.method,
                    "--steps", str(a.steps), "--rounds", str(a.rounds)] + ([] if i == 0 else ["--no-header"])
            if subprocess.run(argv, env=env).returncode:
                sys.exit(1)
        return
    torch.manual_seed(0)
    data = [torch.randint(0, V, (B, T + 1)) for _ in range(4)]
    ref = LM(lambda: TorchAttention(a.method))
    ours = LM(lambda: pt.Attention(C, H, a.method, causal=True))
    copy_weights(ref, ours)
    with torch.no_grad():  # same weights, same function: the first losses agree
        ids = data[0][:, :-1]
        diff = (ref(ids) - ours(ids)).abs().max().item()
    if not a.no_header:
        print(f"small LM: {L} blocks, width {C}, {H} heads, batch {B} x {T}, method {a.method}, AdamW; "
              f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}; "
              f"max |logits posenc - torch| = {diff:.2e}", flush=True)
    for th in counts:
        torch.set_num_threads(th)
        best = {"posenc": 0.0, "torch": 0.0}
        for _ in range(a.rounds):
            for name, model in (("torch", ref), ("posenc", ours)):
                sps, _ = steps_per_second(model, data, a.steps)
                best[name] = max(best[name], sps)
        print(f"threads {th}: torch {best['torch']:.2f} steps/s, posenc {best['posenc']:.2f} steps/s, "
              f"posenc/torch = {best['posenc'] / best['torch']:.2f}", flush=True)


if __name__ == "__main__":
    main()
