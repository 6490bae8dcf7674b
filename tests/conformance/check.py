#!/usr/bin/env python3
"""posenc conformance checker (numpy only).

    check.py POSENC_BINARY CASE_DIR [--only METHOD] [-v] [--timeout SECONDS]
    check.py --selftest

For every CASE_DIR/NAME.safetensors that has a NAME.expected.safetensors beside it, runs
`POSENC_BINARY attend CASE -o OUT` and compares every expected tensor with the output:
|a - b| <= 1e-4 + 1e-4 * |b| elementwise, -inf only matches -inf (doc/spec/conformance.md,
"Tolerance").  Prints PASS/FAIL per case and ends with the line "N passed, M failed"; the exit
status is 0 only when no case failed (and at least one ran).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # a python3 without numpy first on PATH: the repository's .venv has it
    _alt = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".venv", "bin", "python")
    if (os.access(_alt, os.X_OK) and os.path.realpath(sys.executable) != os.path.realpath(_alt)
            and not os.environ.get("POSENC_CHECK_REEXEC")):
        os.environ["POSENC_CHECK_REEXEC"] = "1"
        os.execv(_alt, [_alt, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit("check.py needs numpy: run scripts/deps.sh (it makes .venv), then .venv/bin/python check.py ...")

ATOL = 1e-4
RTOL = 1e-4
_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"),
           "I8": np.dtype("i1"), "U8": np.dtype("u1"), "I16": np.dtype("<i2"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}


class BadFile(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# safetensors
# ------------------------------------------------------------------------------------------------
def read_safetensors(path):
    """Returns ({name: (dtype_code, array)}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise BadFile("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise BadFile(f"header length {n} runs past the end of the file ({len(raw)} bytes)")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BadFile(f"header is not JSON: {e}")
    if not isinstance(header, dict):
        raise BadFile("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        try:
            code = info["dtype"]
            dt = _DTYPES[code]
            shape = tuple(int(s) for s in info["shape"])
            b, e = (int(v) for v in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise BadFile(f"tensor '{name}': bad or unsupported header entry {info!r}")
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= b <= e <= len(data)) or e - b != count * dt.itemsize:
            raise BadFile(f"tensor '{name}': data_offsets [{b}, {e}] do not fit {code} {list(shape)}")
        out[name] = (code, np.frombuffer(data[b:e], dtype=dt).reshape(shape))
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: array}; each array keeps its dtype (float32 -> F32, float64 -> F64,
    int32 -> I32, int64 -> I64)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        code = {"f4": "F32", "f8": "F64", "i4": "I32", "i8": "I64"}[a.dtype.str[1:]]
        buf = np.ascontiguousarray(a, dtype=_DTYPES[code]).tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(buf)]}
        blobs.append(buf)
        off += len(buf)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


# ------------------------------------------------------------------------------------------------
# comparison
# ------------------------------------------------------------------------------------------------
def compare_tensor(a, b):
    """Returns (ok, max_abs_err, worst_ratio, index_of_worst, note). a: candidate, b: expected.
    ratio = |a - b| / (ATOL + RTOL |b|); a non-finite mismatch counts as ratio inf."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    if a.shape != b.shape:
        return False, float("inf"), float("inf"), None, f"shape {list(a.shape)}, expected {list(b.shape)}"
    if a.size == 0:
        return True, 0.0, 0.0, None, ""
    fin_b = np.isfinite(b)
    bad_inf = (~fin_b) & (a != b)               # -inf must be -inf (NaN never matches)
    fin = fin_b & np.isfinite(a)
    bad_fin = fin_b & ~np.isfinite(a)           # NaN/inf where a finite value was expected
    err = np.zeros(a.shape)
    err[fin] = np.abs(a[fin] - b[fin])
    ratio = np.zeros(a.shape)
    ratio[fin] = err[fin] / (ATOL + RTOL * np.abs(b[fin]))
    ratio[bad_inf | bad_fin] = np.inf
    k = int(np.argmax(ratio))
    idx = tuple(int(i) for i in np.unravel_index(k, a.shape))
    worst = float(ratio.flat[k])
    max_err = float(err.max()) if not (bad_inf | bad_fin).any() else float("inf")
    note = ""
    if (bad_inf | bad_fin).any():
        note = f"{int((bad_inf | bad_fin).sum())} non-finite mismatches, e.g. got {a[idx]} expected {b[idx]} at {list(idx)}"
    return worst <= 1.0, max_err, worst, idx, note


def compare_files(out_path, exp_path):
    """Returns (ok, one-line summary, per-tensor detail lines)."""
    exp, _ = read_safetensors(exp_path)
    try:
        got, _ = read_safetensors(out_path)
    except (OSError, BadFile) as e:
        return False, f"output unreadable: {e}", []
    rows = []          # (ratio, name, ok, text)
    for name in sorted(exp):
        b = exp[name][1]
        if name not in got:
            rows.append((float("inf"), name, False, "missing from the output"))
            continue
        code, a = got[name]
        if code != "F32":
            rows.append((float("inf"), name, False, f"dtype {code}, expected F32"))
            continue
        ok, err, ratio, idx, note = compare_tensor(a, b)
        text = f"max|a-b|={err:.3e} ({ratio:.3g} x tolerance)"
        if not ok and idx is not None and np.isfinite(ratio):
            text += f" at {list(idx)}: got {float(a[idx]):.7g}, expected {float(b[idx]):.7g}"
        if note:
            text += "; " + note
        rows.append((ratio, name, ok, text))
    details = [f"    {n:16s} {'ok  ' if ok else 'FAIL'} {t}" for _, n, ok, t in rows]
    extra = sorted(set(got) - set(exp))
    if extra:
        details.append(f"    (the output also has {', '.join(extra)}: not checked)")
    if not rows:
        return True, "no expected tensors", details
    ratio, name, _, text = max(rows, key=lambda r: r[0])
    bad = [n for _, n, ok, _ in rows if not ok]
    head = f"worst {name} {text}"
    if bad:
        head = (f"{len(bad)} of {len(rows)} tensors out of tolerance "
                f"({', '.join(bad[:6])}{', ...' if len(bad) > 6 else ''}); " + head)
    return not bad, head, details


# ------------------------------------------------------------------------------------------------
# running the binary
# ------------------------------------------------------------------------------------------------
def find_cases(case_dir, only=None):
    cases = []
    for fn in sorted(os.listdir(case_dir)):
        if not fn.endswith(".safetensors") or fn.endswith(".expected.safetensors"):
            continue
        name = fn[:-len(".safetensors")]
        exp = os.path.join(case_dir, name + ".expected.safetensors")
        if not os.path.exists(exp):
            continue
        case = os.path.join(case_dir, fn)
        if only:
            try:
                _, meta = read_safetensors(case)
            except BadFile:
                meta = {}
            if meta.get("method") != only:
                continue
        cases.append((name, case, exp))
    return cases


def tail(text, n=6):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-n:]


def run_cases(binary, case_dir, only=None, verbose=False, timeout=300, out=sys.stdout):
    cases = find_cases(case_dir, only)
    passed = failed = 0
    tmp = tempfile.mkdtemp(prefix="posenc-check-")
    try:
        for name, case, exp in cases:
            out_path = os.path.join(tmp, name + ".out.safetensors")
            cmd = [binary, "attend", case, "-o", out_path]
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=timeout)
                rc, so, se = r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
            except subprocess.TimeoutExpired:
                rc, so, se = None, "", f"timed out after {timeout} s"
            except OSError as e:
                rc, so, se = None, "", f"cannot run {binary}: {e}"
            if rc != 0:
                failed += 1
                status = "did not finish" if rc is None else f"exit status {rc}"
                print(f"FAIL {name}: {status}", file=out)
                for ln in tail(se or so):
                    print(f"    | {ln}", file=out)
                continue
            if not os.path.exists(out_path):
                failed += 1
                print(f"FAIL {name}: exit status 0 but no output file written", file=out)
                continue
            ok, head, details = compare_files(out_path, exp)
            if ok:
                passed += 1
            else:
                failed += 1
            print(f"{'PASS' if ok else 'FAIL'} {name}: {head}", file=out)
            for ln in details:
                if verbose or " FAIL " in ln:
                    print(ln, file=out)
            os.remove(out_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return passed, failed


# ------------------------------------------------------------------------------------------------
# selftest: checks of the checker itself, without posenc or any reference implementation
# ------------------------------------------------------------------------------------------------
FAKE = r'''
import os, shutil, sys
args = sys.argv[1:]
case, out = args[1], args[3]
name = os.path.basename(case)[:-len(".safetensors")]
mode = os.environ.get("FAKE_MODE_" + name, "copy")
if mode == "error":
    print("posenc: tensor 'wq': expected shape [8, 8], got [8, 4]", file=sys.stderr)
    sys.exit(2)
if mode == "nofile":
    sys.exit(0)
exp = case[:-len(".safetensors")] + ".expected.safetensors"
sys.path.insert(0, os.environ["CHECK_DIR"])
import check
t, meta = check.read_safetensors(exp)
arrs = {k: a.copy() for k, (c, a) in t.items()}
if mode == "perturb":
    arrs["y"].flat[0] += 1e-3
elif mode == "drop":
    del arrs["probs"]
elif mode == "within":
    arrs["y"] = arrs["y"] + (0.5e-4 + 0.5e-4 * abs(arrs["y"])).astype(arrs["y"].dtype)
check.write_safetensors(out, arrs)
'''


def selftest():
    results = []

    def expect(label, cond):
        results.append(bool(cond))
        print(f"{'ok  ' if cond else 'FAIL'} {label}")

    rng = np.random.default_rng(0)
    tmp = tempfile.mkdtemp(prefix="posenc-selftest-")
    try:
        y = rng.standard_normal((2, 3, 4)).astype(np.float32)
        s = rng.standard_normal((2, 3, 3)).astype(np.float32)
        s[:, 0, 1:] = -np.inf
        pos = np.arange(3, dtype=np.int64)
        path = os.path.join(tmp, "a.safetensors")
        write_safetensors(path, {"y": y, "scores": s, "positions": pos}, {"method": "none"})
        t, meta = read_safetensors(path)
        expect("round trip keeps values, dtypes and metadata",
               np.array_equal(t["y"][1], y) and t["y"][0] == "F32" and t["positions"][0] == "I64"
               and np.array_equal(t["scores"][1], s) and meta == {"method": "none"})
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
        expect("header is padded to 8 bytes", n % 8 == 0)

        expect("identical tensors pass", compare_tensor(y, y)[0])
        expect("-inf matches -inf", compare_tensor(s, s)[0])
        s2 = s.copy(); s2[0, 0, 1] = -1e30
        expect("a large finite value does not match -inf", not compare_tensor(s2, s)[0])
        s3 = s.copy(); s3[1, 1, 1] = np.nan
        expect("NaN never matches", not compare_tensor(s3, s)[0])
        b = np.array([0.0, 1.0, -100.0, 1e4])
        tol = ATOL + RTOL * np.abs(b)
        expect("just inside the tolerance passes", compare_tensor(b + 0.99 * tol, b)[0])
        expect("just outside the tolerance fails", not compare_tensor(b + np.array([0, 0, 0, 1.01]) * tol, b)[0])
        expect("tolerance is relative to the expected value",
               compare_tensor(np.array([1e4 + 0.9]), np.array([1e4]))[0]
               and not compare_tensor(np.array([1e4]), np.array([1e4 + 1.2]))[0])
        expect("shape mismatch fails", not compare_tensor(y[:1], y)[0])

        # files
        exp = os.path.join(tmp, "e.safetensors")
        write_safetensors(exp, {"y": y, "scores": s})
        expect("an expected file matches itself", compare_files(exp, exp)[0])
        bad = os.path.join(tmp, "f64.safetensors")
        write_safetensors(bad, {"y": y.astype(np.float64), "scores": s})
        expect("F64 output is rejected", not compare_files(bad, exp)[0])
        miss = os.path.join(tmp, "miss.safetensors")
        write_safetensors(miss, {"y": y})
        expect("a missing tensor fails", not compare_files(miss, exp)[0])
        junk = os.path.join(tmp, "junk.safetensors")
        with open(junk, "wb") as f:
            f.write(struct.pack("<Q", 1000) + b"{}")
        expect("a malformed output fails", not compare_files(junk, exp)[0])
        try:
            read_safetensors(junk)
            expect("reader rejects a header longer than the file", False)
        except BadFile:
            expect("reader rejects a header longer than the file", True)

        # end to end with a fake binary that copies or spoils the expectations
        cdir = os.path.join(tmp, "cases")
        os.makedirs(cdir)
        modes = {"a_good": "copy", "b_within": "within", "c_perturb": "perturb",
                 "d_error": "error", "e_nofile": "nofile", "f_drop": "drop"}
        for name in modes:
            write_safetensors(os.path.join(cdir, name + ".safetensors"), {"x": y},
                              {"method": "none" if name != "a_good" else "rope", "heads": "1"})
            write_safetensors(os.path.join(cdir, name + ".expected.safetensors"),
                              {"y": y, "scores": s, "probs": s})
        write_safetensors(os.path.join(cdir, "z_no_expectation.safetensors"), {"x": y})
        fake = os.path.join(tmp, "fake_posenc")
        with open(fake, "w") as f:
            f.write("#!" + sys.executable + "\n" + FAKE)
        os.chmod(fake, 0o755)
        env = dict(os.environ)
        os.environ["CHECK_DIR"] = os.path.dirname(os.path.abspath(__file__))
        for name, mode in modes.items():
            os.environ["FAKE_MODE_" + name] = mode
        import io
        buf = io.StringIO()
        p, m = run_cases(fake, cdir, out=buf)
        text = buf.getvalue()
        os.environ.clear()
        os.environ.update(env)
        expect("fake run: 2 passed, 4 failed", (p, m) == (2, 4))
        expect("a failing exit status is reported with its message",
               "FAIL d_error: exit status 2" in text and "expected shape" in text)
        expect("a missing output file is reported", "FAIL e_nofile" in text)
        expect("a perturbed output names the tensor", "FAIL c_perturb" in text and "y max|a-b|" in text)
        expect("a case without expectations is skipped", "z_no_expectation" not in text)
        buf = io.StringIO()
        os.environ["CHECK_DIR"] = os.path.dirname(os.path.abspath(__file__))
        p, m = run_cases(fake, cdir, only="rope", out=buf)
        os.environ.clear()
        os.environ.update(env)
        expect("--only selects cases by their method", (p, m) == (1, 0))
        buf = io.StringIO()
        p, m = run_cases(os.path.join(tmp, "no_such_binary"), cdir, out=buf)
        expect("a missing binary fails every case", (p, m) == (0, 6))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_ok = sum(results)
    print(f"{n_ok} passed, {len(results) - n_ok} failed")
    return 0 if n_ok == len(results) else 1


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Run posenc on every conformance case and compare with the expectations.")
    ap.add_argument("binary", nargs="?", help="the posenc executable")
    ap.add_argument("case_dir", nargs="?", help="folder of NAME.safetensors + NAME.expected.safetensors")
    ap.add_argument("--only", metavar="METHOD", help="only cases whose metadata method is METHOD")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every tensor's error")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per case (default 300)")
    ap.add_argument("--selftest", action="store_true", help="test the checker itself and exit")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if not a.binary or not a.case_dir:
        ap.error("POSENC_BINARY and CASE_DIR are required (or --selftest)")
    if not os.path.isdir(a.case_dir):
        print(f"check.py: {a.case_dir}: not a folder", file=sys.stderr)
        print("0 passed, 0 failed")
        return 2
    binary = a.binary
    if os.sep not in binary and not os.path.exists(binary):
        binary = shutil.which(binary) or binary
    elif os.path.exists(binary):
        binary = os.path.abspath(binary)
    p, m = run_cases(binary, a.case_dir, a.only, a.verbose, a.timeout)
    if p + m == 0:
        print(f"check.py: no cases found in {a.case_dir}"
              + (f" for method {a.only}" if a.only else ""), file=sys.stderr)
    print(f"{p} passed, {m} failed")
    return 0 if m == 0 and p > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
