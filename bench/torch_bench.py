#!/usr/bin/env python3
"""The PyTorch side of `posenc bench`: the same attention layers in PyTorch eager, written as
users write them (scores materialised, softmax, autograd), so posenc's times can be printed as
ratios to PyTorch's.

The layer matches posenc's: y = softmax(scale q k^T + bias, masked) v, projections with biases,
H heads of D dims, width C = H D, one sequence of T tokens; methods
  none   plain scaled dot product
  rope   q, k rotated in the `half` layout (q cos + rotate_half(q) sin, as HF Llama), the
         cos/sin table built in each forward as HF's rotary embedding does
  alibi  -m_h (i - j) when causal, -m_h |i - j| otherwise (reference slopes)
  t5     HF T5's relative_position_bucket (32 buckets, max_distance 128, bidirectional when
         not causal) and the rel_bias gather, each forward; scale 1 as T5
Backward is autograd from y with a random dy; gradients flow to every weight (and rel_bias).

Two ways to run it:
  torch_bench.py --T 512,2048 --methods none,rope,alibi,t5     prints a table
  torch_bench.py --serve                                       what `posenc bench` starts: one
      request per line on stdin, one answer per line on stdout, so both run interleaved
        attn METHOD T CAUSAL REPS  ->  ok FWD_MS BWD_MS PEAK_MIB   (medians; peak RSS growth)
        rope T H D REPS            ->  ok MS                        (q and k, out of place)
        quit
Threads: --threads N (default: torch's own). PyTorch reads OPENBLAS_CORETYPE like posenc."""
import argparse
import ctypes
import math
import statistics
import sys
import time


def rss_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def malloc_measure(on):
    """Large blocks mmapped and returned on free while the peak memory is measured (one step),
    then kept by malloc for the timed steps, as in a steady loop; the same as posenc's side."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        if on:
            libc.malloc_trim(0)
        libc.mallopt(-3, 64 * 1024 if on else 1 << 30)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 128 * 1024 if on else 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def alibi_slopes(H):
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    p = 2 ** int(math.floor(math.log2(H)))
    return pow2(p) + (pow2(2 * p)[0::2][: H - p] if p < H else [])


def t5_bucket(torch, rel, bidirectional, num_buckets=32, max_distance=128):
    """HF T5Attention._relative_position_bucket"""
    ret = 0
    if bidirectional:
        num_buckets //= 2
        ret = (rel > 0).to(torch.long) * num_buckets
        n = torch.abs(rel)
    else:
        n = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return ret + torch.where(is_small, n, large)


class Layer:
    def __init__(self, torch, method, T, causal, H=8, D=64, seed=0):
        self.torch, self.method, self.T, self.causal, self.H, self.D = torch, method, T, causal, H, D
        C = H * D
        g = torch.Generator().manual_seed(seed)
        a = 1.0 / math.sqrt(C)

        def param(*shape, amp):
            return ((torch.rand(*shape, generator=g) * 2 - 1) * amp).requires_grad_(True)
        self.wq, self.wk, self.wv, self.wo = (param(C, C, amp=a) for _ in range(4))
        self.bq, self.bk, self.bv, self.bo = (param(C, amp=0.1) for _ in range(4))
        self.params = [self.wq, self.wk, self.wv, self.wo, self.bq, self.bk, self.bv, self.bo]
        self.scale = 1.0 if method == "t5" else 1.0 / math.sqrt(D)
        if method == "t5":
            self.rel_bias = param(32, H, amp=0.5)
            self.params.append(self.rel_bias)
        self.x = torch.rand(1, T, C, generator=g) * 2 - 1
        self.dy = torch.rand(1, T, C, generator=g) * 2 - 1

    def forward(self):
        torch, F = self.torch, self.torch.nn.functional
        T, H, D = self.T, self.H, self.D
        x = self.x
        q = F.linear(x, self.wq, self.bq).view(1, T, H, D).transpose(1, 2)
        k = F.linear(x, self.wk, self.bk).view(1, T, H, D).transpose(1, 2)
        v = F.linear(x, self.wv, self.bv).view(1, T, H, D).transpose(1, 2)
        pos = torch.arange(T)
        if self.method == "rope":
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
            freqs = pos[:, None].float() * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()

            def rotate_half(t):
                return torch.cat((-t[..., D // 2:], t[..., : D // 2]), dim=-1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        s = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        rel = pos[None, :] - pos[:, None]  # j - i
        if self.method == "alibi":
            m = torch.tensor(alibi_slopes(H))[:, None, None]
            dist = (-rel) if self.causal else rel.abs()
            s = s - m * dist
        elif self.method == "t5":
            bucket = t5_bucket(torch, rel, bidirectional=not self.causal)
            s = s + self.rel_bias[bucket].permute(2, 0, 1)[None]
        if self.causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(1, T, H * D)
        return F.linear(o, self.wo, self.bo)

    def step(self):
        """forward and backward times (s)"""
        for p in self.params:
            p.grad = None
        t0 = time.perf_counter()
        y = self.forward()
        t1 = time.perf_counter()
        y.backward(self.dy)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1


def bench_attn(torch, method, T, causal, reps):
    layer = Layer(torch, method, T, causal)
    malloc_measure(True)
    tracked = peak_reset()
    base = rss_mib("VmRSS")
    layer.step()  # warm-up, and the peak memory of one forward and backward
    peak = rss_mib("VmHWM") - base if tracked else float("nan")
    malloc_measure(False)
    f, b = zip(*(layer.step() for _ in range(reps)))
    del layer
    return statistics.median(f) * 1e3, statistics.median(b) * 1e3, peak


def bench_rope(torch, T, H, D, reps):
    q, k = torch.randn(1, H, T, D), torch.randn(1, H, T, D)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    emb = torch.arange(T).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((emb, emb), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(t):
        return torch.cat((-t[..., D // 2:], t[..., : D // 2]), dim=-1)
    times = []
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        q2 = q * cos + rotate_half(q) * sin
        k2 = k * cos + rotate_half(k) * sin
        times.append(time.perf_counter() - t0)
        del q2, k2
    return statistics.median(times[1:]) * 1e3


def bench_decode(torch, method, Tk, reps, H=32, Hkv=8, D=128):
    """One decode step over a cache of Tk keys: rope on the new q and k (or ALiBi's bias), then
    q @ K^T, softmax, @ V with the query heads of each kv head batched (no repeat of K, V)."""
    g = H // Hkv
    K, V = torch.randn(Hkv, Tk + reps + 2, D), torch.randn(Hkv, Tk + reps + 2, D)
    q, knew = torch.randn(Hkv, g, D), torch.randn(Hkv, 1, D)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    slopes = torch.tensor(alibi_slopes(H), dtype=torch.float32).view(Hkv, g, 1)

    def rotate_half(t):
        return torch.cat((-t[..., D // 2:], t[..., : D // 2]), dim=-1)
    times = []
    with torch.no_grad():
        for r in range(reps + 1):
            n = Tk + r
            t0 = time.perf_counter()
            if method == "rope":
                emb = torch.tensor([float(n)])[:, None] * inv_freq[None, :]
                emb = torch.cat((emb, emb), dim=-1)
                cos, sin = emb.cos(), emb.sin()
                qr = q * cos + rotate_half(q) * sin
                K[:, n: n + 1] = knew * cos + rotate_half(knew) * sin
            else:
                qr = q
                K[:, n: n + 1] = knew
            s = (qr @ K[:, : n + 1].transpose(-1, -2)) / math.sqrt(D)
            if method == "alibi":
                s = s - slopes * (n - torch.arange(n + 1, dtype=torch.float32))
            o = torch.softmax(s, dim=-1) @ V[:, : n + 1]
            times.append(time.perf_counter() - t0)
            del o
    return statistics.median(times[1:]) * 1e3


def blas_core():
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--T", default="512,2048")
    ap.add_argument("--methods", default="none,rope,alibi,t5")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"error no torch: {e}", flush=True)
        return 1
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(True)
    if args.serve:
        print(f"ready torch {torch.__version__} threads {torch.get_num_threads()} blas {blas_core()}", flush=True)
        for line in sys.stdin:
            w = line.split()
            if not w or w[0] == "quit":
                break
            try:
                if w[0] == "attn":
                    f, b, m = bench_attn(torch, w[1], int(w[2]), int(w[3]) != 0, int(w[4]))
                    print(f"ok {f:.3f} {b:.3f} {m:.1f}", flush=True)
                elif w[0] == "decode":
                    print(f"ok {bench_decode(torch, w[1], int(w[2]), int(w[3])):.3f}", flush=True)
                elif w[0] == "rope":
                    print(f"ok {bench_rope(torch, int(w[1]), int(w[2]), int(w[3]), int(w[4])):.3f}", flush=True)
                else:
                    print(f"error unknown request {w[0]}", flush=True)
            except Exception as e:  # noqa: BLE001 - report, keep serving
                print(f"error {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 0
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OpenBLAS core {blas_core()}")
    print("| method | T | causal | forward ms | backward ms | peak MiB |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for T in (int(t) for t in args.T.split(",")):
        for method in args.methods.split(","):
            for causal in (False, True):
                f, b, m = bench_attn(torch, method, T, causal, args.reps)
                print(f"| {method} | {T} | {'yes' if causal else 'no'} | {f:.1f} | {b:.1f} | {m:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
