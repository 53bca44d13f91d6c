#!/usr/bin/env bash
# `atoll data prepare` on inputs as corpora come: the same documents as text files (a directory, a
# glob), JSONL, .jsonl.gz, .jsonl.zst (two frames) and Parquet (row groups of 8) give byte-identical
# shards and text, with bytes and with Llama 3's tokenizer (whose ids are Meta's tokenizer's, a BOS
# before each document); a small --shard-tokens gives numbered shards holding the same tokens, listed
# in MANIFEST.txt, and a re-run into the same directory replaces them; 14 MB of documents give the
# same shards at 1 and 2 encoding threads, and cut short stop with exit 2. Bad input: bad_input.sh.
# Usage: data_inputs.sh ATOLL_BIN PYTHON (PYTHON with pyarrow, zstandard and llama-models: .venv's)
set -uo pipefail
atoll=$1
python=$2
source "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
llama3=$("$python" -c 'import llama_models.llama3, pathlib; print(pathlib.Path(llama_models.llama3.__file__).parent / "tokenizer.model")')

"$python" "$here/data_inputs.py" write "$work/in" || check fail "writing the inputs with json, gzip, zstandard and pyarrow"
# prepare NAME INPUT... [-- FLAGS...]: atoll data prepare --documents into $work/NAME ($threads threads, 2 unless set).
prepare() {
  local name=$1
  shift
  "$atoll" data prepare --documents --val-fraction 0.2 --threads "${threads:-2}" --out "$work/$name" "$@" >"$work/$name.log" 2>&1
}
# same A B: the shards and text of $work/A and $work/B are byte for byte the same.
same() {
  local file
  for file in train.bin val.bin train.txt val.txt; do
    cmp -s "$work/$1/$file" "$work/$2/$file" || return 1
  done
}

# Each format's run, two at a time (most of a run is the process starting), then the checks.
for tokenizer in bytes llama3; do
  model=bytes
  [[ $tokenizer == llama3 ]] && model=$llama3
  inputs="c.jsonl c.jsonl.gz c.jsonl.zst c.parquet"
  [[ $tokenizer == llama3 ]] && inputs="c.jsonl.zst c.parquet"  # the framing is the tokenizer's, not the format's
  prepare "text-$tokenizer" "$work/in/docs" --tokenizer "$model" || check fail "$tokenizer: the text files" "$work/text-$tokenizer.log"
  for input in $inputs; do
    field=text
    [[ $input == c.parquet ]] && field=content
    while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
    { prepare "$input-$tokenizer" "$work/in/$input" --tokenizer "$model" --text-field $field; echo $? >"$work/$input-$tokenizer.status"; } &
  done
  wait
  for input in $inputs; do
    [[ $(cat "$work/$input-$tokenizer.status") == 0 ]] && same "text-$tokenizer" "$input-$tokenizer" &&
      check ok "$tokenizer: $input gives the text files' shards byte for byte" ||
      check fail "$tokenizer: $input gives the text files' shards byte for byte" "$work/$input-$tokenizer.log"
  done
done
prepare glob-bytes "$work/in/docs/0*.txt" && same text-bytes glob-bytes &&
  check ok "a glob (quoted, expanded by atoll) reads the files a directory does, in the same order" ||
  check fail "a glob reads the files a directory does" "$work/glob-bytes.log"
"$python" "$here/data_inputs.py" llama3 "$work/text-llama3" &&
  grep -q "^documents framed: BOS token before each$" "$work/text-llama3/MANIFEST.txt" &&
  check ok "llama3: the train shard is Meta's tokenizer on each document after <|begin_of_text|>" ||
  check fail "llama3: the train shard is Meta's tokenizer on each document" "$work/text-llama3/MANIFEST.txt"

# Shards of at most 150 tokens: numbered, together the single shard's tokens, each in the manifest.
prepare sharded "$work/in/c.jsonl.zst" --tokenizer "$llama3" --shard-tokens 150
count=$(ls "$work/sharded"/train-*.bin 2>/dev/null | wc -l)
joined() { for f in "$@"; do tail -c +1025 "$f"; done; }
[[ $count -gt 2 && ! -e $work/sharded/train.bin ]] &&
  cmp -s <(joined "$work/sharded"/train-*.bin) <(joined "$work/text-llama3/train.bin") &&
  cmp -s <(joined "$work/sharded"/val-*.bin) <(joined "$work/text-llama3/val.bin") &&
  [[ $(grep -c "^shard train-000[0-9][0-9].bin: [0-9]* tokens, [0-9]* documents, from $work/in/c.jsonl.zst$" \
    "$work/sharded/MANIFEST.txt") -eq $count ]] &&
  [[ $(($(sed -n 's/^shard train-.* tokens, \([0-9]*\) documents.*/\1/p' "$work/sharded/MANIFEST.txt" | paste -sd+))) -eq \
    $(sed -n 's/^documents kept: .*(train \([0-9]*\),.*/\1/p' "$work/sharded/MANIFEST.txt") ]] &&
  check ok "--shard-tokens 150: $count numbered train shards with the single shard's tokens, each in MANIFEST.txt with its documents" ||
  check fail "--shard-tokens 150: numbered shards with the single shard's tokens" "$work/sharded/MANIFEST.txt"
# Every shard but the last of a side holds exactly 150 tokens (llm.c header's count, bytes 8-11).
full=$(for f in "$work/sharded"/train-*.bin; do od -An -t d4 -j 8 -N 4 "$f"; done | head -n -1 | sort -u | tr -d ' ')
[[ $full == 150 ]] && check ok "every train shard but the last holds --shard-tokens tokens" ||
  check fail "every train shard but the last holds --shard-tokens tokens (saw: $full)"
# Re-run into the same directory with room for all: train.bin again, the numbered shards and an
# interrupted run's partial shard (of a process that is gone) removed.
touch "$work/sharded/train.partial.999999999"
prepare sharded "$work/in/c.jsonl.zst" --tokenizer "$llama3" &&
  [[ -e $work/sharded/train.bin && -z $(ls "$work/sharded"/train-*.bin "$work/sharded"/*.partial.* 2>/dev/null) ]] &&
  same sharded text-llama3 &&
  check ok "a re-run into the same directory replaces the numbered shards with train.bin, drops a stale partial one" ||
  check fail "a re-run into the same directory replaces the numbered shards" "$work/sharded.log"

# 14 MB of JSONL, documents of 64 bytes to 2.4 MB (~1 MB encoding units and longer ones, which later
# units overtake; more than 2 threads hold in flight), at 1 and 2 threads: the tokens come in the
# order the text was read.
for t in 1 2; do
  { threads=$t prepare "large-$t" "$work/in/large.jsonl.zst" --tokenizer "$llama3"; echo $? >"$work/large-$t.status"; } &
done
wait
[[ $(cat "$work/large-1.status") == 0 && $(cat "$work/large-2.status") == 0 ]] && same large-1 large-2 &&
  cmp -s "$work/large-1/MANIFEST.txt" "$work/large-2/MANIFEST.txt" &&
  grep -q "^documents kept: 1500 " "$work/large-2/MANIFEST.txt" &&
  check ok "14 MB of documents, Llama 3's tokenizer: the same shards, text and manifest at --threads 1 and 2" ||
  check fail "the same shards at --threads 1 and 2" "$work/large-2.log"

# The same input cut short, found after megabytes have gone to the encoders: exit 2, nothing left.
head -c $(($(stat -c %s "$work/in/large.jsonl.zst") * 3 / 4)) "$work/in/large.jsonl.zst" >"$work/in/cut.jsonl.zst"
prepare cut "$work/in/cut.jsonl.zst" --tokenizer "$llama3"
status=$?
[[ $status == 2 && ! -e $work/cut ]] && grep -q "ends in the middle of a zstd frame (truncated)" "$work/cut.log" &&
  check ok "a .jsonl.zst cut short while the encoders are busy: one line, exit 2, no output directory left" ||
  check fail "a .jsonl.zst cut short while the encoders are busy (exit $status)" "$work/cut.log"

# --skip-bad-records: the good records of a file with bad ones, and their count.
{ head -n 10 "$work/in/c.jsonl"; echo '{"text": 3}'; echo 'not json'; echo '{"id": 1}'; tail -n +11 "$work/in/c.jsonl"; } >"$work/in/bad.jsonl"
prepare skipped "$work/in/bad.jsonl" --skip-bad-records && same text-bytes skipped &&
  grep -q "3 bad records skipped" "$work/skipped.log" &&
  grep -q "^records read: 60, bad records skipped: 3$" "$work/skipped/MANIFEST.txt" &&
  check ok "--skip-bad-records: 3 bad lines skipped and counted, the other records' shards unchanged" ||
  check fail "--skip-bad-records skips and counts bad lines" "$work/skipped.log"
finish
