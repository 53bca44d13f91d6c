#!/usr/bin/env bash
# Installs every Debian package Atoll needs to build, test and run its examples.
# Idempotent: packages already present are skipped, so a second run is a quick no-op.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libopenblas0-openmp python3-torch
  openmpi-bin libopenmpi-dev
  libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libgtest-dev libgmock-dev
  nodejs npm
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
# npm may come from a non-Debian install (e.g. a preinstalled Node.js); accept it.
if command -v npm >/dev/null 2>&1; then
  filtered=()
  for pkg in "${missing[@]}"; do [[ "$pkg" == nodejs || "$pkg" == npm ]] || filtered+=("$pkg"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
