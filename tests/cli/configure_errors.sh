#!/usr/bin/env bash
# Configure-time checks of cmake/AtollTorch.cmake and AtollArrow.cmake: a real `cmake` configure of
# this source tree with ATOLL_TORCH_PYTHON pointing at each thing that can be wrong -- no
# interpreter, one without torch, a torch too old or too new, a pre-C++11-ABI wheel, no pyarrow --
# stops with exactly one "Atoll:" error line
# naming what was found and the command that fixes it. The stand-in interpreters are shell scripts
# that answer the module's one question (version, cmake prefix, ABI, CUDA) as such a torch would.
# Then the real venv configures and prints the LibTorch and the Arrow it uses.
# Usage: configure_errors.sh SOURCE_DIR REAL_PYTHON
set -uo pipefail
source_dir=$1
real_python=$2
source "$(dirname "$0")/lib.sh"

# fake_python NAME VERSION ABI: an interpreter whose torch reports VERSION and ABI (CPU build).
fake_python() {
  cat >"$work/$1" <<EOF
#!/bin/sh
printf '%s\n%s\n%s\n\n' "$2" "$work/no-such-prefix" "$3"
EOF
  chmod +x "$work/$1"
}
fake_python torch_1_13 1.13.1 1
fake_python torch_2_15 2.15.0 1
fake_python torch_old_abi 2.14.1 0
cat >"$work/no_torch" <<'EOF'
#!/bin/sh
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1
EOF
chmod +x "$work/no_torch"

# expect_configure_error NAME PYTHON REGEX [CMAKE_ARG...]: configure fails (CMake's exit 1), REGEX on
# exactly one "Atoll:" line.
expect_configure_error() {
  local name=$1 python=$2 regex=$3
  shift 3
  timeout 120 cmake -S "$source_dir" -B "$work/build-$name" -G Ninja -DATOLL_BUILD_TESTS=OFF \
    -DATOLL_BUILD_BENCH=OFF -DATOLL_TORCH_PYTHON="$python" "$@" >"$work/$name.log" 2>&1
  local status=$? lines count
  lines=$(grep -c "^Atoll: " "$work/$name.log")  # error lines; status lines read "-- Atoll: ..."
  count=$(grep -cE "$regex" "$work/$name.log")
  if [[ $status -eq 1 && $lines -eq 1 && $count -eq 1 ]]; then
    check ok "$name: configure fails with one line: $(grep -oE "Atoll: .*" "$work/$name.log" | cut -c1-140)"
  else
    check fail "$name: exit $status, $lines 'Atoll:' lines, $count matching '$regex'"
    sed 's/^/    /' "$work/$name.log" | tail -8
  fi
}

expect_configure_error no_venv "$work/missing/bin/python" \
  "Atoll: no Python with torch at .*/missing/bin/python; run: bash scripts/install-deps.sh"
expect_configure_error no_torch "$work/no_torch" \
  "Atoll: .*no_torch cannot import torch \(ModuleNotFoundError: No module named 'torch'\); run: bash scripts/install-deps.sh"
expect_configure_error torch_too_old "$work/torch_1_13" \
  "Atoll: .* has torch 1.13.1, outside the supported 2.11-2.14; run: bash scripts/install-deps.sh"
expect_configure_error torch_too_new "$work/torch_2_15" \
  "Atoll: .* has torch 2.15.0, outside the supported 2.11-2.14; run: bash scripts/install-deps.sh"
expect_configure_error pre_cxx11_abi "$work/torch_old_abi" \
  "Atoll: torch 2.14.1 at .* is built with the pre-C\+\+11 ABI .*bash scripts/install-deps.sh"
expect_configure_error cuda_option "$real_python" \
  "Atoll: ATOLL_WITH_CUDA=maybe is not one of AUTO, ON, OFF; pass -DATOLL_WITH_CUDA=AUTO" -DATOLL_WITH_CUDA=maybe

# The real venv's torch, but no pyarrow (whose Arrow and Parquet libraries the build links).
cat >"$work/no_pyarrow" <<EOF
case "\$*" in *"import pyarrow"*) echo "ModuleNotFoundError: No module named 'pyarrow'" >&2; exit 1;; esac
exec "$real_python" "\$@"
EOF
chmod +x "$work/no_pyarrow"
expect_configure_error no_pyarrow "$work/no_pyarrow" \
  "Atoll: .*no_pyarrow cannot import pyarrow \(ModuleNotFoundError: No module named 'pyarrow'\); run: bash scripts/install-deps.sh"

# The real venv: configure succeeds and names the LibTorch (and Arrow) it found.
timeout 300 cmake -S "$source_dir" -B "$work/build-good" -G Ninja -DATOLL_BUILD_TESTS=OFF -DATOLL_BUILD_BENCH=OFF \
  -DATOLL_TORCH_PYTHON="$real_python" >"$work/good.log" 2>&1
status=$?
if [[ $status -eq 0 ]] && grep -qE "Atoll: LibTorch 2\.1[1-4]\.[0-9]+ \((CUDA [0-9.]+|CPU build)\) from " "$work/good.log" &&
  grep -qE "Atoll: Arrow/Parquet [0-9.]+ from " "$work/good.log"; then
  check ok "real venv: $(grep -oE "Atoll: LibTorch .*" "$work/good.log")"
else
  check fail "real venv: exit $status"
  sed 's/^/    /' "$work/good.log" | tail -8
fi

finish
