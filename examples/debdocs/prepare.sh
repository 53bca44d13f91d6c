#!/usr/bin/env bash
# The Debian documentation corpus (issue 55): English text from Debian 12's documentation packages,
# turned into token shards by Atoll's own `atoll data prepare` (HTML to text, duplicate documents and
# repeated boilerplate lines dropped, validation split by document, an 8,192-piece SentencePiece
# vocabulary trained on the training side). About 50M tokens: enough for a 10M-parameter model at 20
# tokens per parameter in about 4 epochs, and small enough (xz: ~0.7 bytes a token) to travel to a
# GPU machine that reaches no package registry (scripts/gpu_islands.sh prepare).
#
# Usage: bash examples/debdocs/prepare.sh [OUT_DIR=data/debdocs] [ATOLL_BIN=build/bin/atoll]
# Writes OUT_DIR/train.bin, val.bin, tokenizer.model (and train.txt, val.txt: the text that was
# tokenized), MANIFEST.txt (documents, duplicates, bytes, tokens), SOURCES.txt (every package, its
# version and its .deb's SHA-256, what was taken from it) and licenses/PACKAGE.copyright (each
# package's copyright file: GCIDE is GPL-3+, the Linux documentation GPL-2, Python's the PSF licence,
# PostgreSQL's its own BSD-style licence, OpenJDK's javadoc GPL-2 with the Classpath exception, Rust's
# MIT/Apache-2.0). Idempotent: does nothing but print the summary when the shards exist.
# The same package versions give the same bytes (checked: SHA256SUMS of two builds from scratch);
# Debian's mirror keeps only the newest point release of a package, so where a pinned version is gone
# the newest is taken and SOURCES.txt names it.
# Needs apt-get (to download the .debs, without installing them), dpkg-deb and gzip.
set -euo pipefail
out_dir=${1:-data/debdocs}
atoll=${2:-build/bin/atoll}
vocab=8192

# PACKAGE=VERSION FIND-PATH-PATTERN: what is taken from each package (HTML pages, or text files as
# named), every file one document. dict-gcide's dictionary is split into documents by its entries.
packages=(
  "dict-gcide=0.48.5+nmu2 -"                                # Webster 1913 with quotations (GCIDE), dictd text
  "linux-doc-6.1=6.1.192-2 */html/*.html"                   # the kernel's Sphinx HTML
  "openjdk-17-doc=17.0.21.1+2-1~deb12u1 */api/*.html"       # the Java SE 17 API's javadoc
  "rust-doc=1.63.0+dfsg1-2 */html/*.html"                   # Rust's books, std and alloc API docs
  "qtbase5-doc-html=5.15.8+dfsg-11+deb12u3 */qt5/doc/*.html" # Qt 5's base modules
  "python3.11-doc=3.11.2-6+deb12u9 */html/*.html"           # Python's Sphinx HTML
  "perl-doc=5.36.0-7+deb12u4 */pod/*.pod"                   # Perl's manual pages, as POD text
  "postgresql-doc-15=15.20-0+deb12u1 */html/*.html"         # PostgreSQL's manual
  "python-django-doc=3:3.2.25-0+deb12u7 */html/*.html"      # Django's Sphinx HTML
  "nodejs-doc=18.20.4+dfsg-1~deb12u3 */api/*.html"          # Node.js's API docs
  "libreoffice-help-en-us=4:7.4.7-1+deb12u14 */en-US/*.html" # LibreOffice's help
  "git-doc=1:2.39.5-0+deb12u3 */git-doc/*.html"             # Git's manual pages and user manual
  "cmake-doc=3.25.1-1 */html/*.html"                        # CMake's Sphinx HTML (licence: cmake-data)
  "octave-doc=7.3.0-2 */octave.html/*.html"                 # GNU Octave's manual
  "gimp-help-en=2.10.34-2 */help/en/*.html"                 # GIMP's user manual (licence: gimp-help-common)
  "debian-handbook=11.20220922 */html/en-US/*.html"         # The Debian Administrator's Handbook, English
  "sqlite3-doc=3.40.1-2+deb12u2 */doc/sqlite3/*.html"       # SQLite's documentation
  "debian-reference-en=2.100 */debian-reference/*.en.html"  # The Debian Reference, English
  "developers-reference=12.18 */developers-reference/*.html" # Debian's Developer's Reference
)
# Packages whose copyright file stands in another package's documentation folder.
declare -A licence_from=([gimp-help-en]=gimp-help-common [cmake-doc]=cmake-data)
licence_versions=("gimp-help-common=2.10.34-2" "cmake-data=3.25.1-1")
# Left out everywhere: generated indexes and search pages, Sphinx's copies of the sources; the
# kernel's translations (not English); rustdoc's source listings and `core` (mostly core::arch's
# thousands of SIMD intrinsic pages; std re-exports the rest with the same text); javadoc's
# index-all and class-use pages (lists of names).
exclude='*/_sources/*|*/genindex*|*/search.html|*/py-modindex.html|*/translations/*|*/html/src/*|*/html/core/*|*/index-files/*|*/class-use/*|*/allclasses*|*/allpackages*|*/help-doc.html|*/overview-tree.html|*/package-tree.html|*/deprecated-list.html|*/serialized-form.html|*/constant-values.html|*/all.html'

summary() {
  echo "debdocs: $(grep -E "^tokens" "$out_dir/MANIFEST.txt" 2>/dev/null | head -2 | tr '\n' ' ')in $out_dir"
}
if [[ -s $out_dir/train.bin && -s $out_dir/val.bin && -s $out_dir/tokenizer.model ]]; then
  echo "debdocs: $out_dir/train.bin, val.bin and tokenizer.model exist; nothing to do"
  summary
  exit 0
fi
[[ -x $atoll ]] || { echo "debdocs: $atoll is not an executable; build Atoll first (bash scripts/build.sh atoll) or pass its path" >&2; exit 1; }

work=$(mktemp -d)
chmod 755 "$work"  # apt-get downloads as the unprivileged _apt user when it can
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$out_dir/licenses"
chmod 777 "$work/debs"
: >"$work/SOURCES.txt"

# download NAME VERSION: the pinned .deb, else (superseded point release) the newest, into $work/debs.
download() {
  local name=$1 version=$2
  (cd "$work/debs" && apt-get download -q=2 "$name=$version" 2>/dev/null) && return 0
  apt-get update -qq >/dev/null 2>&1 || true
  (cd "$work/debs" && apt-get download -q=2 "$name=$version" 2>/dev/null) && return 0
  echo "debdocs: note: $name $version is gone from the mirror; taking the newest (the figures were measured on $version)"
  (cd "$work/debs" && apt-get download -q=2 "$name")
}

: >"$work/files.txt"
for entry in "${licence_versions[@]}"; do
  download "${entry%%=*}" "${entry#*=}"
  dpkg-deb --fsys-tarfile "$(ls "$work/debs/${entry%%=*}"_*.deb)" |
    tar -xO "./usr/share/doc/${entry%%=*}/copyright" >"$work/${entry%%=*}.copyright"
done
for entry in "${packages[@]}"; do
  read -r pinned pattern <<<"$entry"
  name=${pinned%%=*}
  download "$name" "${pinned#*=}"
  deb=$(ls "$work/debs/${name}"_*.deb)
  root=$work/root/$name
  mkdir -p "$root"
  dpkg-deb -x "$deb" "$root"
  if [[ -n ${licence_from[$name]:-} ]]; then
    cp "$work/${licence_from[$name]}.copyright" "$out_dir/licenses/$name.copyright"
  else
    cp "$root/usr/share/doc/$name/copyright" "$out_dir/licenses/$name.copyright"
  fi
  taken=$work/taken-$name.txt
  if [[ $name == dict-gcide ]]; then
    # The dictionary's entries, 400 to a document (a headword at the start of a line after a blank
    # line begins an entry); the database's own header entries and the lines that only name an
    # entry's source ("[1913 Webster]", "[WordNet 1.5]") left out.
    mkdir -p "$work/gcide"
    gzip -dc "$root/usr/share/dictd/gcide.dict.dz" |
      awk -v dir="$work/gcide" '
        /^00-database-/ { skip = 1; next }
        /^[ \t]*\[[^]]*\][ \t]*$/ { next }
        blank && /^[^ \t]/ { skip = 0; if (entries++ % 400 == 0) { if (file) close(file); file = sprintf("%s/%05d.txt", dir, ++n) } }
        { blank = ($0 ~ /^[ \t]*$/) }
        !skip && file { print > file }'
    find "$work/gcide" -name '*.txt' | LC_ALL=C sort >"$taken"
  else
    find "$root" -type f -path "$pattern" | LC_ALL=C sort |
      awk -v ex="$exclude" 'BEGIN { n = split(ex, p, "|"); for (i = 1; i <= n; i++) { gsub(/\./, "\\.", p[i]); gsub(/\*/, ".*", p[i]); p[i] = "^" p[i] "$" } }
        { for (i = 1; i <= n; i++) if ($0 ~ p[i]) next; print }' >"$taken"
  fi
  cat "$taken" >>"$work/files.txt"
  echo "$name $(dpkg-deb -f "$deb" Version) sha256:$(sha256sum "$deb" | cut -c1-64) documents:$(wc -l <"$taken") $(du -cb --files0-from=<(tr '\n' '\0' <"$taken") | tail -1 | cut -f1) bytes" |
    tee -a "$work/SOURCES.txt"
  rm -f "$deb"
done

echo "debdocs: $(wc -l <"$work/files.txt") documents; atoll data prepare (HTML to text, dedupe, split by document, a $vocab-piece tokenizer)"
# A page that is not UTF-8 is left out and counted (MANIFEST.txt), not tokenized as raw bytes.
"$atoll" data prepare --documents --dedupe --skip-bad-records --tokenizer-vocab "$vocab" --val-fraction 0.02 \
  --out "$out_dir" --files-from "$work/files.txt"
{
  echo "# Debian 12 packages the corpus was made from: name, version, the .deb's SHA-256, documents and bytes taken"
  cat "$work/SOURCES.txt"
  echo "# left out: $exclude"
} >"$out_dir/SOURCES.txt"
(cd "$out_dir" && sha256sum tokenizer.model train.bin val.bin >SHA256SUMS)
summary
