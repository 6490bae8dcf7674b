#!/usr/bin/env python3
"""The PyTorch side of `posenc bench --only train`: the small Transformer that `posenc train`
trains (train/model.c), written in plain PyTorch eager the way a user who wants it fast would
write it, trained with the same optimizer, schedule and clipping, so tokens/s can be compared.

The model (train/model.h): token embedding scaled by sqrt(C); `layers` pre-LayerNorm blocks
  x = x + wo(attention(LN_1(x)))            q, k, v, o projections with biases, H heads of D = C/H
  x = x + proj(gelu_tanh(fc(LN_2(x))))      MLP of width F (default 4C), biases
then a final LayerNorm, the output projection tied to the embedding, cross-entropy over every
next token. Attention is causal, softmax(q k^T / sqrt(D) + bias) v with the scores materialised
(torch 1.13 has no scaled_dot_product_attention); q, k and v come from one (3C, C) Linear, the
three projections of posenc's layer side by side (the same function and parameters, one GEMM).
Encodings (--method), each as the trainer uses it:
  none   NoPE: order only through the causal mask
  rope   q, k rotated in the `half` layout (HF's q cos + rotate_half(q) sin, posenc's default),
         base 10000 over all D dims, cos/sin tables built once (HF caches them too)
  alibi  -m_h (i - j) with the reference slopes, fixed, folded into the mask once
  t5     HF T5's relative_position_bucket (causal: unidirectional, 32 buckets, max_distance the
         trainer's max(T/2, 17)), one rel_bias [32, H] shared by every layer (HF T5: the first
         layer's bias reused), gathered once per forward; scale 1/sqrt(D) as the trainer sets
Initialisation as the trainer's distributions (its values come from posenc's own generator):
wte N(0, 1/C), matrices N(0, 0.02), attention and MLP output matrices N(0, 0.02 / sqrt(2 layers)),
rel_bias N(0, 1/C), biases 0, LayerNorm 1 and 0. torch.optim.AdamW (its default loop; foreach=True
measured no faster here) with betas (0.9, 0.95), eps 1e-8, lr 1e-2, decoupled weight decay 0.1 on
matrices and tables (every tensor of two or more dims: wte, the projections, rel_bias), none on
gains and biases; linear warm-up over a tenth of the steps, then cosine decay to a tenth of lr
(train/optim.c); gradients clipped to global norm 1. Denormals are flushed (torch.set_flush_denormal), as `posenc train` sets FTZ/DAZ.
Data: random token batches of the trainer's shape (B sequences of T + 1 tokens, vocabulary 37, the
size of the lm task's generated corpus); their content does not change the speed.

Two ways to run it:
  torch_train.py --method rope --batch 4 --length 64 --steps 200     one JSON line:
      {"tokens_per_s": ..., "steps": ..., "seconds": ..., "loss": ..., "params": ..., ...}
  torch_train.py --serve --threads 1      what `posenc bench` starts: one request per line,
      train METHOD B T C LAYERS HEADS VOCAB STEPS WARMUP  ->  ok TOKENS_PER_S LOSS PARAMS
      (the model of each shape is built once and goes on training from request to request;
      WARMUP untimed steps come first, then STEPS timed ones)
      quit
Threads: --threads N (torch.set_num_threads, and OpenBLAS's own pool, which torch does not size;
default: torch's own). PyTorch reads OPENBLAS_CORETYPE as posenc does (`posenc bench` passes its
own choice on)."""
import argparse
import ctypes
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # posenc bench reads this line instead of "ready"
    print(f"error no torch: {e}", flush=True)
    sys.exit(1)

VOCAB = 37  # distinct characters of the lm task's generated corpus (posenc train: 102464 parameters)


def alibi_slopes(H):
    """The reference's get_slopes: a geometric sequence for a power of two heads, otherwise the
    closest power of two's slopes then every other slope of twice as many."""
    def pow2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    p = 2 ** int(math.floor(math.log2(H)))
    return pow2(p) + (pow2(2 * p)[0::2][: H - p] if p < H else [])


def t5_buckets(T, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket, unidirectional (causal), of j - i: (T, T)."""
    rel = torch.arange(T)[None, :] - torch.arange(T)[:, None]
    n = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return torch.where(n < max_exact, n, large)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, C, H, Fw, method):
        super().__init__()
        self.C, self.H, self.D, self.method = C, H, C // H, method
        self.ln_1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)  # wq, wk, wv stacked (with bq, bk, bv)
        self.wo = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, Fw)
        self.proj = nn.Linear(Fw, C)

    def forward(self, x, bias, cos, sin):
        B, T, C = x.shape
        H, D = self.H, self.D
        q, k, v = self.qkv(self.ln_1(x)).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # each (B, H, T, D)
        if cos is not None:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(D)) + bias  # bias holds the mask
        o = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(B, T, C)
        x = x + self.wo(o)
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class LM(nn.Module):
    def __init__(self, method, V, T, C, layers, H, Fw, num_buckets=32, max_distance=None):
        super().__init__()
        self.method, self.V, self.C = method, V, C
        self.wte = nn.Embedding(V, C)
        self.h = nn.ModuleList(Block(C, H, Fw, method) for _ in range(layers))
        self.ln_f = nn.LayerNorm(C)
        mask = torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        cos = sin = None
        if method == "rope":
            D = C // H
            inv_freq = 1.0 / 10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
            ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
            ang = torch.cat((ang, ang), dim=-1)
            cos, sin = ang.cos().float(), ang.sin().float()
        elif method == "alibi":
            dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()  # i - j
            mask = mask - torch.tensor(alibi_slopes(H))[:, None, None] * dist    # (H, T, T)
        elif method == "t5":
            if max_distance is None:  # the trainer's: half the training length, above the exact buckets
                max_distance = max(T // 2, num_buckets // 2 + 1)
            self.rel_bias = nn.Parameter(torch.empty(num_buckets, H))
            self.register_buffer("bucket", t5_buckets(T, num_buckets, max_distance))
        elif method != "none":
            raise ValueError(f"method {method}: none, rope, alibi or t5")
        self.register_buffer("mask", mask)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        layers_ = len(self.h)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:  # LayerNorm gains 1, every bias 0
                    p.fill_(1.0) if name.endswith("weight") else p.zero_()
                elif name == "wte.weight" or name == "rel_bias":
                    p.normal_(0.0, 1.0 / math.sqrt(C))
                elif name.endswith("wo.weight") or name.endswith("proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2.0 * layers_))
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, idx, tgt):
        x = self.wte(idx) * math.sqrt(self.C)
        bias = self.mask
        if self.method == "t5":  # computed once, shared by the layers (HF T5's position_bias)
            bias = self.rel_bias[self.bucket].permute(2, 0, 1) + self.mask
        for block in self.h:
            x = block(x, bias, self.cos, self.sin)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output projection
        return F.cross_entropy(logits.view(-1, self.V), tgt.reshape(-1))


def lr_at(step, total, warmup, lr, min_frac):
    """train/optim.c's tr_lr_at: linear warm-up, then cosine decay to lr * min_frac."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if total <= warmup:
        return lr
    progress = min(1.0, (step - warmup) / (total - warmup))
    return lr * (min_frac + (1.0 - min_frac) * 0.5 * (1.0 + math.cos(math.pi * progress)))


class Run:
    """One model, its optimizer and its batches; step() as train/trainer.c's tr_run_step."""

    def __init__(self, method, B, T, C, layers, H, Fw=None, V=VOCAB, total_steps=1500, seed=1,
                 lr=1e-2, min_lr=0.1, weight_decay=0.1, clip=1.0):
        torch.manual_seed(seed)
        self.model = LM(method, V, T, C, layers, H, Fw or 4 * C)
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        rest = [p for p in self.model.parameters() if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=lr, betas=(0.9, 0.95), eps=1e-8)
        self.params = list(self.model.parameters())
        self.lr, self.min_lr, self.clip, self.total = lr, min_lr, clip, total_steps
        self.warmup = max(1, total_steps // 10)
        self.data = torch.randint(0, V, (8, B, T + 1))
        self.B, self.T, self.step_no = B, T, 0

    def numel(self):
        return sum(p.numel() for p in self.params)

    def step(self):
        batch = self.data[self.step_no % len(self.data)]
        for group in self.opt.param_groups:
            group["lr"] = lr_at(self.step_no, self.total, self.warmup, self.lr, self.min_lr)
        self.opt.zero_grad(set_to_none=True)
        loss = self.model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        if self.clip > 0:
            nn.utils.clip_grad_norm_(self.params, self.clip)
        self.opt.step()
        self.step_no += 1
        return loss

    def timed(self, steps, warmup):
        """tokens/s over `steps` steps after `warmup` untimed ones, and the last loss."""
        loss = None
        for _ in range(warmup):
            loss = self.step()
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = self.step()
        el = time.perf_counter() - t0
        return (steps * self.B * self.T / el if steps else float("nan")), el, (loss.item() if loss is not None else float("nan"))


def openblas():
    """Debian's libblas.so.3, which torch calls, forwards to this library: one instance."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib
    except (OSError, AttributeError):
        return None


def blas_core():
    lib = openblas()
    return lib.openblas_get_corename().decode() if lib else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", action="store_true", help="answer requests on stdin (posenc bench)")
    ap.add_argument("--method", default="rope", choices=("none", "rope", "alibi", "t5"))
    ap.add_argument("--batch", type=int, default=4, help="sequences per step (default 4, as posenc train)")
    ap.add_argument("--length", type=int, default=64, help="tokens per sequence (default 64)")
    ap.add_argument("--width", type=int, default=64, help="model width C (default 64)")
    ap.add_argument("--layers", type=int, default=2, help="blocks (default 2)")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    ap.add_argument("--vocab", type=int, default=VOCAB, help=f"vocabulary (default {VOCAB}, posenc's lm task)")
    ap.add_argument("--steps", type=int, default=200, help="timed optimizer steps (default 200)")
    ap.add_argument("--warmup-steps", type=int, default=5, help="untimed steps before them (default 5)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's own)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
        if openblas():
            openblas().openblas_set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    info = f"torch {torch.__version__} threads {torch.get_num_threads()} blas {blas_core()}"
    if a.serve:
        print(f"ready {info}", flush=True)
        runs = {}
        for line in sys.stdin:
            w = line.split()
            if not w or w[0] == "quit":
                break
            try:
                if w[0] != "train" or len(w) != 10:
                    raise ValueError("expected: train METHOD B T C LAYERS HEADS VOCAB STEPS WARMUP")
                key = (w[1],) + tuple(int(v) for v in w[2:8])
                if key not in runs:
                    m, B, T, C, L, H, V = key
                    runs[key] = Run(m, B, T, C, L, H, V=V)
                tps, _, loss = runs[key].timed(int(w[8]), int(w[9]))
                print(f"ok {tps:.1f} {loss:.4f} {runs[key].numel()}", flush=True)
            except Exception as e:  # noqa: BLE001 - report, keep serving
                print(f"error {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 0
    run = Run(a.method, a.batch, a.length, a.width, a.layers, a.heads, V=a.vocab,
              total_steps=max(1, a.steps + a.warmup_steps))
    tps, el, loss = run.timed(a.steps, a.warmup_steps)
    print(json.dumps({"method": a.method, "batch": a.batch, "length": a.length, "width": a.width,
                      "layers": a.layers, "heads": a.heads, "vocab": a.vocab, "params": run.numel(), "steps": a.steps,
                      "warmup_steps": a.warmup_steps, "seconds": round(el, 4), "tokens_per_s": round(tps, 1),
                      "loss": round(loss, 4), "threads": torch.get_num_threads(), "blas": blas_core(),
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
