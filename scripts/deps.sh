#!/usr/bin/env bash
# Installs what posenc's build and tests need:
#   1. Debian's packages (only the missing ones): the compiler, OpenBLAS, jansson, cmocka, cairo,
#      Open MPI and Slurm, valgrind, clang for the fuzzers, python3-venv;
#   2. the project's Python environment, .venv in the repository root: every package pinned in
#      python/requirements.txt (PyTorch's PyPI wheel, transformers, gguf, rotary-embedding-torch,
#      x-transformers, numpy, pytest, pillow), installed from PyPI. The environment itself is kept
#      outside the clone, under $POSENC_VENV_HOME (default ~/.cache/posenc), in a folder named by
#      the hash of the requirements and the Python that runs them, and .venv is a link to it: a
#      second clone on the same machine (CI's) links the same environment instead of downloading
#      5 GB again, and a change to the requirements makes a new one.
# scripts/deps.sh --no-venv does step 1 alone (make run: the build and the comparison are C only).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=1
case "${1:-}" in
    --no-venv) venv=0 ;;
    "") ;;
    *) echo "usage: scripts/deps.sh [--no-venv]" >&2; exit 2 ;;
esac

PKGS=(build-essential pkg-config libopenblas-dev libjansson-dev libcmocka-dev
      python3 python3-venv valgrind
      libcairo2-dev libfontconfig-dev fonts-dejavu-core clang libclang-rt-dev
      libopenmpi-dev openmpi-bin slurm-wlm munge)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ $venv -eq 1 ] || exit 0

# --- the Python environment ----------------------------------------------------------------
PY=/usr/bin/python3
REQ=python/requirements.txt
key=$( { cat "$REQ"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
home=${POSENC_VENV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/posenc}
dir=$home/venv-$key
# .venv made by hand (a folder, not our link) is the user's: never replaced
if [ -e .venv ] && [ ! -L .venv ]; then
    echo "scripts/deps.sh: .venv is a folder of its own; move it away so that the pinned environment" \
         "($REQ) can take its place" >&2
    exit 1
fi
mkdir -p "$home"
# one installer at a time per environment (two clones' make test on one machine); a folder
# without its mark is an install that was stopped half-way, made again from nothing
exec 9> "$dir.lock"
flock 9
if [ ! -f "$dir/.posenc-complete" ]; then
    rm -rf "$dir"
    echo "scripts/deps.sh: the Python environment ($REQ) into $dir (about 5 GB from PyPI, a few minutes)"
    "$PY" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-input pip==26.3
    "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$REQ"
    "$dir/bin/python" -W ignore -c "import torch, transformers, gguf, rotary_embedding_torch, x_transformers, numpy, pytest, PIL"
    cp "$REQ" "$dir/.posenc-complete"
fi
flock -u 9
ln -sfn "$dir" .venv
