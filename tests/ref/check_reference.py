#!/usr/bin/env python3
"""Checks posenc's own PyTorch reference against an independent set of cases (the public
conformance cases by default), so the fixtures it writes rest on more than one reading of the
spec. Cases of methods without an m_<name>.py are skipped.

    .venv/bin/python tests/ref/check_reference.py [CASE_DIR]
"""
import glob
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import posenc_ref  # noqa: E402
from read_safetensors import read_safetensors  # noqa: E402


def main():
    case_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "conformance", "cases")
    passed = failed = skipped = 0
    for case in sorted(glob.glob(os.path.join(case_dir, "*.safetensors"))):
        if case.endswith(".expected.safetensors"):
            continue
        t, meta = read_safetensors(case)
        if not os.path.exists(os.path.join(HERE, "m_" + meta["method"] + ".py")):
            skipped += 1
            continue
        exp, _ = read_safetensors(case[:-len(".safetensors")] + ".expected.safetensors")
        try:
            got = posenc_ref.attend(meta, t)
        except NotImplementedError as e:
            print(f"SKIP {os.path.basename(case)}: {e}")
            skipped += 1
            continue
        worst, where = 0.0, ""
        for name, b in exp.items():
            a = got[name].numpy() if name in got else None
            if a is None or a.shape != b.shape:
                worst, where = float("inf"), name + " missing or misshapen"
                break
            fin = np.isfinite(b)
            if not np.array_equal(np.isfinite(a), fin) or not np.array_equal(a[~fin], b[~fin]):
                worst, where = float("inf"), name + " -inf pattern"
                break
            r = (np.abs(a[fin] - b[fin]) / (1e-4 + 1e-4 * np.abs(b[fin]))).max(initial=0)
            if r > worst:
                worst, where = r, name
        ok = worst <= 1.0
        passed += ok
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(case)}: worst {where} {worst:.3g} x tolerance")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
