#!/usr/bin/env bash
# Installs everything Atoll needs to build, test and run its examples:
#   - Debian packages: compilers, CMake, Ninja, Open MPI, protobuf, yaml-cpp, nlohmann-json, GoogleTest,
#     Gloo's headers (the islands' TCP groups use LibTorch's own Gloo; only the headers come from Debian),
#     OpenSSL (the islands' job secret: HMAC-SHA256), iproute2 (the islands' tests on shaped links
#     between network namespaces: ip, tc), SentencePiece (subword tokenizers: atoll tokenizer),
#     clang 16 with its libFuzzer and sanitizer runtimes and llvm-symbolizer (tests/fuzz/run.sh), zlib and
#     libzstd (`atoll data prepare` reads .jsonl.gz and .jsonl.zst);
#   - .venv/ (git-ignored) with the packages pinned in scripts/requirements.txt: the PyTorch wheel,
#     whose LibTorch the build links (cmake/AtollTorch.cmake finds it there), and the Hugging Face,
#     TensorBoard and SentencePiece packages the interoperability tests check Atoll's files with, and
#     pyarrow, whose Arrow and Parquet C++ libraries the build links (cmake/AtollArrow.cmake).
# Idempotent: what is present is kept, so a second run is a quick no-op.
# ATOLL_PYTHON picks the interpreter the venv is made from (default: python3 on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libgloo-dev libssl-dev iproute2 libsentencepiece-dev
  zlib1g-dev libzstd-dev  # compressed JSONL input of `atoll data prepare`
  clang-16 libclang-rt-16-dev llvm-16
  slurmctld slurmd slurm-client munge  # the private Slurm cluster of tests/cli/slurm.sh
)
python=${ATOLL_PYTHON:-python3}

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
# Debian's own python3 makes venvs only with python3-venv; another python3 (pyenv) brings its own.
if command -v "$python" >/dev/null && ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi
if ! command -v "$python" >/dev/null; then missing+=(python3 python3-venv); python=/usr/bin/python3; fi
if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

# The venv is up to date when it holds what this very requirements.txt asked for (a stamp of its hash).
stamp=.venv/.atoll-requirements
want=$(sha256sum scripts/requirements.txt | cut -d' ' -f1)
if [[ -x .venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "install-deps: .venv has scripts/requirements.txt (torch $(sed -n 's/^torch==//p' scripts/requirements.txt))"
  exit 0
fi
[[ -x .venv/bin/python ]] || "$python" -m venv .venv
echo "install-deps: pip-installing scripts/requirements.txt into .venv"
# This machine's pip configuration names local wheel folders that may not all exist; pip warns for
# each one it skips. Those warnings are dropped, everything else pip prints is kept.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements.txt 2>&1 |
  { grep -v "^WARNING: Location '.*' is ignored" || true; }
echo "$want" >"$stamp"
echo "install-deps: .venv has torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"
