"""examples/ddp_train.py with two processes (gloo on loopback): both ranks end with
identical parameters and the loss falls."""
import os
import subprocess
import sys

import pytest
import torch
from conftest import LIB_METHODS, ROOT


@pytest.mark.parametrize("method,encoder", [("rope", "none"), ("t5", "learned")])
def test_two_process_ddp(method, encoder, tmp_path):
    for m in (method, encoder):
        if m != "none" and m not in LIB_METHODS:
            pytest.skip(f"method {m} is not in this build of the library")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(ROOT, "python"))
    cmd = [sys.executable, os.path.join(ROOT, "examples", "ddp_train.py"), "--world-size", "2",
           "--method", method, "--encoder", encoder, "--steps", "30", "--out", str(tmp_path)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [torch.load(tmp_path / f"rank{i}.pt") for i in range(2)]
    p0, p1 = ranks[0]["params"], ranks[1]["params"]
    assert p0.keys() == p1.keys() and any(k.startswith("att.") for k in p0)
    for k in p0:
        assert torch.equal(p0[k], p1[k]), f"{k} differs between the ranks"
    losses = ranks[0]["losses"]
    assert losses == ranks[1]["losses"]
    assert sum(losses[-5:]) / 5 < 0.7 * losses[0], losses
