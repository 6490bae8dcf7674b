"""NoPE: no hooks, plain attention."""
CASES = [
    dict(name="gqa", T=6, H=4, D=4, kv_heads=2, causal=True),
]

PROJ_CASES = [dict(name="proj_gqa", T=3, Tk=7, H=4, D=4, kv_heads=2, causal=True, positions="gapped", B=2)]
