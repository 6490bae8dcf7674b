#!/usr/bin/env bash
# Installs the Debian packages posenc's build, tests and references need (only the missing ones).
set -euo pipefail
PKGS=(build-essential pkg-config libopenblas-dev libjansson-dev libcmocka-dev
      python3 python3-numpy python3-torch python3-pytest
      python3-setuptools python3-wheel python3-pip python3-venv valgrind
      libcairo2-dev libfontconfig-dev fonts-dejavu-core python3-pil clang libclang-rt-dev
      libopenmpi-dev openmpi-bin slurm-wlm munge)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
