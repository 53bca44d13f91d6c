#!/usr/bin/env bash
# What the documentation says against what the binary does:
#   - docs/configuration.md's reference is exactly `atoll config reference --markdown` (regenerate it
#     with scripts/config_reference.sh), and names every key the parser saves;
#   - every example config under examples/ loads and passes its checks with `atoll config show`, and
#     the YAML it shows reads back to itself; a bad one is refused with exit 2;
#   - `atoll --version` names Atoll's version and git description and the versions of LibTorch,
#     CUDA (or "built without CUDA"), NCCL, MPI, protobuf and SentencePiece;
#   - every `bash FILE` and `build/bin/atoll COMMAND` in the README's code blocks exists as written.
# (Links and anchors: tests/docs/check_links.py, CTest entry docs_links.)
# Usage: docs.sh ATOLL
set -u
atoll=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/lib.sh"

# The generated reference, between its markers, against the binary's.
page=$root/docs/configuration.md
sed -n '/^<!-- BEGIN generated/,/^<!-- END generated/p' "$page" | sed '1d;$d' >"$work/reference.md"
"$atoll" config reference --markdown >"$work/generated.md"
keys=$(grep -c '^| `' "$work/generated.md")
saved=$("$atoll" config show "$root/examples/pydocs/llama_dp4.yaml" | grep -c '^  ')
if [[ -s $work/generated.md ]] && diff "$work/generated.md" "$work/reference.md" >"$work/reference.diff" && [[ $keys -eq $saved ]]; then
  check ok "docs/configuration.md holds \`atoll config reference --markdown\` as the binary prints it ($keys keys, every saved one)"
else
  echo "    (regenerate: bash scripts/config_reference.sh; $keys keys in the reference, $saved saved)"
  check fail "docs/configuration.md's reference differs from the binary's" "$work/reference.diff"
fi

# Every example config, shown and read back.
bad=()
count=0
while IFS= read -r config; do
  count=$((count + 1))
  name=${config#"$root"/}
  if ! "$atoll" config show "$config" >"$work/shown.yaml" 2>"$work/show.err" \
      || ! "$atoll" config show "$work/shown.yaml" >"$work/again.yaml" 2>>"$work/show.err" \
      || ! diff <(sed 1d "$work/shown.yaml") <(sed 1d "$work/again.yaml") >/dev/null; then
    bad+=("$name: $(head -1 "$work/show.err")")
  fi
done < <(find "$root/examples" -name '*.yaml' | sort)
if [[ $count -gt 0 && ${#bad[@]} -eq 0 ]]; then
  check ok "atoll config show: all $count example configs load, pass their checks and read back unchanged"
else
  check fail "example configs that do not load with atoll config show ($count): ${bad[*]:-none found}"
fi
"$atoll" config show "$root/examples/pydocs/llama_dp4.yaml" --set parallel.tp=3 >/dev/null 2>"$work/tp3.err"
status=$?
if [[ $status -eq $EXIT_BAD_INPUT ]] && grep -q "^atoll: config: model.heads = 8 is not divisible by parallel.tp = 3" "$work/tp3.err"; then
  check ok "atoll config show: a layout that cannot run is refused in one line naming the fix, exit 2"
else
  check fail "atoll config show of a bad layout (exit $status)" "$work/tp3.err"
fi

# The versions a bug report needs.
"$atoll" --version >"$work/version.txt" 2>&1
status=$?
version='[0-9]+\.[0-9]+'
missing=()
for pattern in "^atoll $version\.[0-9]+ \(git [0-9a-f]{7,}" "^LibTorch $version" "^CUDA ($version|: built without CUDA)" \
    "^NCCL ($version|: built without CUDA)" "^MPI: .*$version" "^protobuf $version" "^SentencePiece $version"; do
  grep -Eq "$pattern" "$work/version.txt" || missing+=("$pattern")
done
if [[ $status -eq 0 && ${#missing[@]} -eq 0 ]]; then
  check ok "atoll --version: $(tr '\n' ';' <"$work/version.txt" | sed 's/;$//; s/;/; /g')"
else
  check fail "atoll --version (exit $status) lacks: ${missing[*]:-}" "$work/version.txt"
fi

# The README's commands as written: scripts and example files exist, atoll's commands are commands.
absent=()
commands=0
while IFS= read -r line; do
  commands=$((commands + 1))
  read -r -a words <<<"$line"
  if [[ ${words[0]} == bash ]]; then
    [[ -f $root/${words[1]} ]] || absent+=("$line")
  elif [[ ${words[0]} == build/bin/atoll ]]; then
    "$atoll" "${words[1]}" --help >/dev/null 2>&1 || absent+=("$line")
    for word in "${words[@]:2}"; do
      [[ $word == examples/* && ! -e $root/$word ]] && absent+=("$line")
    done
  fi
done < <(awk '/^```/{code=!code; next} code && ($1 == "bash" || $1 == "build/bin/atoll")' "$root/README.md")
if [[ $commands -ge 3 && ${#absent[@]} -eq 0 ]]; then
  check ok "README: its $commands bash/build/bin/atoll commands name scripts, files and atoll commands that exist"
else
  check fail "README commands ($commands found) that do not exist as written: ${absent[*]:-}"
fi

finish
