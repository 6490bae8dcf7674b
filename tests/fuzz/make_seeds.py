#!/usr/bin/env python3
"""Writes the seed corpora of the cache, fused and gguf harnesses (tests/fuzz/seeds_cache,
seeds_fused, seeds_gguf): a life of each cache method (appends with and without positions and
lengths, attends with masks and q_lens, a shift, a clear, the whole layer), each fused setting of
tests/unit/test_fused.c in both forms, and the GGUF files of tests/gguf. Deterministic; run
from the repository root."""
import glob, json, os, re, sys

root = os.path.dirname(os.path.abspath(__file__))

def cache_methods():
    src = open(os.path.join(root, "fuzz_cache.c")).read()
    body = src[src.index("SETTINGS[] = {"):src.index("};", src.index("SETTINGS[] = {"))]
    return re.findall(r'"([^"]+)"', body)

def fused_settings():
    src = open(os.path.join(root, "..", "unit", "test_fused.c")).read()
    body = src[src.index("SETTINGS[] = {"):src.index("};", src.index("SETTINGS[] = {"))]
    return re.findall(r'"([^"]+)"', body)

def write(folder, name, data):
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    with open(os.path.join(root, folder, name), "wb") as f:
        f.write(data)

# cache: header (method, rows/heads/dim, gqa/causal/path, max_tokens, seed), then 8-byte records
LIFE = [
    [0, 3, 0, 0, 0, 0, 0, 0],          # append 4 tokens, positions following
    [1, 0, 0, 0, 0, 0, 0, 0],          # attend 1 query
    [0, 1, 1, 5, 1, 1, 0b1101, 0],     # append 2 at given positions, lens
    [1, 2, 5, 0b0110, 3, 0x5a, 0, 0],  # attend 3 queries, q_lens, mask
    [2, 1, 2, 0, 0, 0, 0, 0],          # shift: keep 1, drop 2, delta 2
    [1, 1, 2, 0, 40, 0, 0, 0],         # attend 2 queries at given positions
    [0, 0, 2, 9, 2, 0, 0, 0],          # append 1, batched positions
    [2, 0, 1, 2, 0xfd, 0, 0, 0],       # shift by -3
    [0, 2, 3, 0, 0, 0, 0, 0],          # append at a hostile position (refused)
    [2, 0, 0, 3, 0, 255, 255, 0],      # a hostile shift (refused)
    [1, 0, 0, 0, 0, 0, 0, 0],
    [4, 1, 0, 0, 0, 0, 0, 0],          # the whole layer
    [3, 0, 0, 0, 0, 0, 0, 0],          # clear
    [4, 0, 0, 0, 0, 0, 0, 0],
]
for i, _ in enumerate(cache_methods()):
    for j, (shape, flags) in enumerate([(0b010101, 0b011), (0b100010, 0b110)]):
        write("seeds_cache", "m%02d_%d" % (i, j), bytes([i, shape, flags, 24, 7 + j]) + bytes(sum(LIFE, [])))

# fused: header (method 0: none, overridden by the text; form and flags; T; Tk extra; heads; D;
# seed; lengths), then the settings as lines
# and the methods the fused path does not compute (fuzz_fused compares their reference path with
# itself: errors, finite results, determinism)
REFERENCE_ONLY = ["method=cope causal=true npos_max=4", "method=cope causal=true npos_max=2 scale=0.8",
                  "method=xl clamp_len=3", "method=xl same_length=true mem_len=2",
                  "method=deberta position_buckets=4 max_relative_positions=8",
                  "method=tupe num_buckets=8 max_distance=12", "method=tupe num_buckets=8 max_distance=12 tupe_cls=false"]
for i, setting in enumerate(fused_settings() + REFERENCE_ONLY):
    words = [w for w in setting.split() if not w.startswith("-")]
    text = "\n".join(words).encode()
    for j, (flags, T, extra, heads, D) in enumerate([(0b100001, 70, 0, 0b0101, 7),
                                                    (0b111110, 33, 20, 0b0010, 15),
                                                    (0b000000, 1, 0, 0, 3)]):
        write("seeds_fused", "s%02d_%d" % (i, j), bytes([0, flags, T - 1, extra, heads, D, i, 0x35]) + text)

# gguf: the files of tests/gguf's specs (header and tensor data), as tests/gguf/write_gguf.py writes them
sys.path.insert(0, os.path.join(root, "..", "gguf"))
import write_gguf  # noqa: E402
for spec in sorted(glob.glob(os.path.join(root, "..", "gguf", "*.json"))):
    g = json.load(open(spec))
    write("seeds_gguf", os.path.basename(spec)[:-5], write_gguf.header(g["kv"], g.get("tensors", []), g.get("version", 3)))
