"""The package installs offline with pip (--no-build-isolation, the system's setuptools) and
finds the library next to itself, in its install prefix, through POSENC_LIBRARY, or in the
source tree's build/."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

import posenc

PROBE = "import posenc, posenc.torch; print(posenc.library_path); print(len(posenc.methods()))"


def _run(env_extra, cwd, drop=("POSENC_LIBRARY", "PYTHONPATH")):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(importlib.util.find_spec("pip") is None, reason="pip is not installed")
def test_pip_install_offline_bundles_the_library(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    env = dict(os.environ, POSENC_LIBRARY=posenc.library_path, PIP_NO_INDEX="1")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", str(target), str(src)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _run({"PYTHONPATH": str(target)}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == str(target / "posenc" / "libposenc.so")
    assert int(r.stdout.split()[1]) == len(posenc.methods())


def test_found_in_the_install_prefix(tmp_path):
    # PREFIX/lib/libposenc.so (make install) and the package under PREFIX/lib/python3/...
    lib = tmp_path / "prefix" / "lib"
    site = lib / "python3" / "dist-packages"
    shutil.copytree(os.path.join(ROOT, "python", "posenc"), site / "posenc",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copyfile(posenc.library_path, lib / "libposenc.so")
    r = _run({"PYTHONPATH": str(site)}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == str(lib / "libposenc.so")


def test_posenc_library_overrides(tmp_path):
    r = _run({"PYTHONPATH": os.path.join(ROOT, "python"), "POSENC_LIBRARY": posenc.library_path},
             cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.split()[0] == os.path.abspath(posenc.library_path)
    r = _run({"PYTHONPATH": os.path.join(ROOT, "python"),
              "POSENC_LIBRARY": str(tmp_path / "missing.so")}, cwd=tmp_path)
    assert r.returncode != 0 and "POSENC_LIBRARY" in r.stderr and "no such file" in r.stderr


def test_source_tree_after_the_build(tmp_path):
    built = os.path.join(ROOT, "build", "libposenc.so")
    if not os.path.exists(built):
        pytest.skip("build/libposenc.so not built (make)")
    r = _run({"PYTHONPATH": os.path.join(ROOT, "python")}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.path.samefile(r.stdout.split()[0], built)


@pytest.mark.skipif(importlib.util.find_spec("pip") is None or importlib.util.find_spec("wheel") is None,
                    reason="pip or wheel is not installed")
def test_wheel_is_tagged_pure_python(tmp_path):
    """ctypes loads the library: no CPython ABI in the tag, the platform only when it is bundled."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, POSENC_LIBRARY=posenc.library_path, PIP_NO_INDEX="1")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                        "--no-index", "-w", str(tmp_path / "out"), str(src)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = os.listdir(tmp_path / "out")
    assert whl.startswith("posenc-") and "-py3-none-" in whl and not whl.endswith("-any.whl"), whl
