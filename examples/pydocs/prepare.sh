#!/usr/bin/env bash
# Fetches the Python 3.11 documentation's reStructuredText sources from Debian's python3.11-doc
# package (Python Software Foundation License; the package's copyright file is kept beside the
# text), concatenates the 497 sources (~12 MB of English prose and code examples) in path order
# into OUT_DIR/pydocs.txt, and writes byte-level token shards (vocab 256) OUT_DIR/train.bin and
# val.bin with `atoll data prepare` (the last 5% of the text, the end of the "whatsnew" notes, is
# validation). Idempotent: does nothing but print the summary when both shards exist.
# Usage: bash examples/pydocs/prepare.sh [OUT_DIR=data/pydocs] [ATOLL_BIN=build/bin/atoll]
#        (ATOLL_BIN "none": the text only, OUT_DIR/pydocs.txt, no shards -- as scripts/gpu_deps.sh
#        fetches it for a machine without Debian's mirror)
# Needs apt-get (to download the .deb, without installing it) and dpkg-deb.
set -euo pipefail
out_dir=${1:-data/pydocs}
atoll_bin=${2:-build/bin/atoll}
package=python3.11-doc
# The version every figure in the README was measured on; Debian's mirror keeps only the newest
# point release, so another version is taken (and named) when this one is gone.
pinned_version=3.11.2-6+deb12u9

# Token count from the llm.c header (int32 [2]); the byte-level shards hold one token per byte.
summary() {
  local train val
  train=$(od -An -t d4 -j 8 -N 4 "$out_dir/train.bin" | tr -d ' ')
  val=$(od -An -t d4 -j 8 -N 4 "$out_dir/val.bin" | tr -d ' ')
  echo "prepare: $out_dir/train.bin $train tokens, $out_dir/val.bin $val tokens (bytes, vocab 256; $(cat "$out_dir/SOURCE" 2>/dev/null))"
}

if [[ -s "$out_dir/train.bin" && -s "$out_dir/val.bin" ]]; then
  echo "prepare: $out_dir/train.bin and val.bin exist; nothing to do"
  summary
  exit 0
fi
if [[ $atoll_bin != none && ! -x "$atoll_bin" ]]; then
  echo "prepare: $atoll_bin is not an executable; build Atoll first (bash scripts/build.sh) or pass its path" >&2
  exit 1
fi
mkdir -p "$out_dir"
# The text may already be here (fetched earlier, or carried to a machine without Debian's mirror, as
# scripts/gpu_check.sh does): then only the shards are written.
if [[ -s "$out_dir/pydocs.txt" && -s "$out_dir/SOURCE" ]]; then
  echo "prepare: $out_dir/pydocs.txt is here ($(cat "$out_dir/SOURCE")); writing the shards"
else
  work=$(mktemp -d)
  chmod 755 "$work"  # apt-get downloads as the unprivileged _apt user when it can
  trap 'rm -rf "$work"' EXIT
  echo "prepare: fetching $package from Debian (apt-get download, not installed)"
  if ! (cd "$work" && apt-get download -q=2 "$package=$pinned_version" 2>/dev/null); then
    # The package lists may be missing (a fresh machine) or the pinned point release superseded.
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$work" && { apt-get download -q=2 "$package=$pinned_version" 2>/dev/null || apt-get download -q=2 "$package"; })
  fi
  deb=$(ls "$work"/"$package"_*.deb)
  version=$(dpkg-deb -f "$deb" Version)
  [[ $version == "$pinned_version" ]] ||
    echo "prepare: note: took $package $version, not $pinned_version; the README's loss figures were measured on $pinned_version"
  dpkg-deb -x "$deb" "$work/root"

  sources=$work/root/usr/share/doc/python3.11/html/_sources
  [[ -d $sources ]] || { echo "prepare: $deb has no $sources; the package's layout changed" >&2; exit 1; }
  # Path order under the C locale, so every machine concatenates the same bytes.
  mapfile -t files < <(cd "$sources" && find . -name '*.rst.txt' | LC_ALL=C sort)
  ((${#files[@]} > 0)) || { echo "prepare: no .rst.txt sources in $deb" >&2; exit 1; }
  (cd "$sources" && cat "${files[@]}") >"$out_dir/pydocs.txt.tmp"
  mv "$out_dir/pydocs.txt.tmp" "$out_dir/pydocs.txt"
  cp "$work/root/usr/share/doc/$package/copyright" "$out_dir/COPYRIGHT"
  echo "$package $version, ${#files[@]} files, sha256 $(sha256sum "$out_dir/pydocs.txt" | cut -c1-16)" >"$out_dir/SOURCE"
  echo "prepare: ${#files[@]} reStructuredText files -> $(stat -c %s "$out_dir/pydocs.txt") bytes of text"
fi
[[ $atoll_bin == none ]] && exit 0
"$atoll_bin" data prepare --out "$out_dir" --val-fraction 0.05 "$out_dir/pydocs.txt"
summary
