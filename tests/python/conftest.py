"""Shared set-up of the Python package's tests (tests/python, run by `make python-test`).

The package is imported from the source tree (python/); the library is the one of
$POSENC_LIBRARY (the Makefile passes $(BUILD)/libposenc.so) or build/libposenc.so; the tool
for the `posenc attend` comparisons is $POSENC_CLI or build/posenc. Every sweep is driven by
the library's method list and the reference's m_<name>.py modules, never a fixed list.
"""
import glob
import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REF = os.path.join(ROOT, "tests", "ref")
CASES = os.path.join(ROOT, "tests", "conformance", "cases")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, REF)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

import posenc  # noqa: E402
import posenc_ref  # noqa: E402,F401  (sets torch's default dtype to float64, for every test alike)

torch.set_num_threads(1)

LIB_METHODS = posenc.methods()
REF_METHODS = sorted(os.path.basename(p)[2:-3] for p in glob.glob(os.path.join(REF, "m_*.py")))
CLI = os.environ.get("POSENC_CLI", os.path.join(ROOT, "build", "posenc"))


def public_cases():
    """(path, method) of every public conformance case (all methods; tests skip the ones the
    library does not implement)."""
    from read_safetensors import read_safetensors
    out = []
    for p in sorted(glob.glob(os.path.join(CASES, "*.safetensors"))):
        if p.endswith(".expected.safetensors"):
            continue
        out.append((p, read_safetensors(p)[1]["method"]))
    return out


def assert_close(name, a, b, rtol=1e-4, atol=1e-4):
    """The contract's tolerance |a - b| <= atol + rtol |b|, -inf matching -inf."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, f"{name}: shape {a.shape} != {b.shape}"
    fin = np.isfinite(b)
    assert np.array_equal(np.isfinite(a), fin) and np.array_equal(a[~fin], b[~fin]), \
        f"{name}: non-finite entries differ"
    err = np.abs(a[fin] - b[fin]) - (atol + rtol * np.abs(b[fin]))
    assert err.max(initial=-1) <= 0, \
        f"{name}: worst |a - b| {np.abs(a[fin] - b[fin]).max():.3g} beyond tolerance"


def need_method(method):
    if method not in LIB_METHODS:
        pytest.skip(f"method {method} is not in this build of the library")
