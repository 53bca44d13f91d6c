#!/usr/bin/env bash
# transformers both ways, against the real package (tests/interop/transformers_check.py does the
# checking; this sets up the corpus and the work directory).
# Usage: transformers.sh ATOLL_BIN ATOLL_LOGITS_BIN PYTHON (PYTHON: the venv's, with transformers)
set -uo pipefail
here=$(dirname "$0")
source "$here/../cli/lib.sh"
make_corpus "$1" "$work/data"
"$3" "$here/transformers_check.py" --atoll "$1" --logits "$2" --work "$work"
