#!/usr/bin/env python3
"""Data-parallel training of posenc layers with torch.distributed (gloo, CPU, loopback).

    python3 examples/ddp_train.py [--world-size 2] [--method rope] [--encoder none]
                                  [--steps 40] [--out DIR]

Starts --world-size processes on this machine, each with a replica of a small model, an
optional absolute encoder (posenc.torch.Encoding) and a causal posenc.torch.Attention layer
between two linear maps, wrapped in DistributedDataParallel. Every rank draws its own
batches of a synthetic task that needs positions (predict the input two steps back), DDP
averages the gradients, so every replica takes the same Adam step. Rank 0 prints the loss
(averaged over ranks); with --out every rank writes its final parameters and the loss
history to DIR/rank<r>.pt. Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR set) it runs as
the one rank it is given instead of spawning.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import posenc.torch as pt
except ImportError:  # running from the source tree without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import posenc.torch as pt

LAG = 2


class Model(nn.Module):
    def __init__(self, dim, heads, method, encoder, T):
        super().__init__()
        self.inp = nn.Linear(1, dim)
        self.enc = None
        if encoder != "none":
            self.enc = pt.Encoding(encoder, dim, rows=T) if encoder == "learned" else pt.Encoding(encoder, dim)
        self.att = pt.Attention(dim, heads, method, causal=True, rows=T)
        self.out = nn.Linear(dim, 1)

    def forward(self, u):
        h = self.inp(u)
        if self.enc is not None:
            h = self.enc(h)
        return self.out(h + self.att(h))


def batch(gen, B, T):
    """u [B, T, 1] uniform in [-1, 1]; target: u shifted LAG steps later (0 before)."""
    u = torch.rand(B, T, 1, generator=gen) * 2 - 1
    target = torch.zeros_like(u)
    target[:, LAG:] = u[:, :-LAG]
    return u, target


def train(rank, world, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed + rank)  # different initial replicas: DDP broadcasts rank 0's
    model = DDP(Model(args.dim, args.heads, args.method, args.encoder, args.T))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1000 * args.seed + rank)  # each rank its own data
    losses = []
    for step in range(args.steps):
        u, target = batch(gen, args.batch, args.T)
        loss = nn.functional.mse_loss(model(u), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.5f}", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        state = {n: p.detach().clone() for n, p in model.module.named_parameters()}
        torch.save({"params": state, "losses": losses}, os.path.join(args.out, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--method", default="rope", help="the attention layer's encoding")
    ap.add_argument("--encoder", default="none", help="an absolute encoder before it (none, sinusoidal, learned)")
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--T", type=int, default=12)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write rank<r>.pt (parameters, losses) here")
    args = ap.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    mp.spawn(train, args=(args.world_size, args), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
