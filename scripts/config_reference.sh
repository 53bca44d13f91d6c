#!/usr/bin/env bash
# Regenerates the reference at the end of docs/configuration.md from the binary:
# `atoll config reference --markdown` between the BEGIN and END markers. tests/cli/docs.sh fails
# when the two differ, so run this after adding or changing a config key.
# Usage: bash scripts/config_reference.sh [ATOLL]   (default build/bin/atoll)
set -euo pipefail
cd "$(dirname "$0")/.."
atoll=${1:-build/bin/atoll}
page=docs/configuration.md
reference=$("$atoll" config reference --markdown)
python3 - "$page" "$reference" <<'PY'
import sys
path, reference = sys.argv[1], sys.argv[2]
text = open(path).read()
begin = text.index("<!-- BEGIN generated")
begin = text.index("\n", begin) + 1
end = text.index("<!-- END generated -->")
open(path, "w").write(text[:begin] + reference + "\n" + text[end:])
PY
echo "$page: $(grep -c '^| `' "$page") keys"
