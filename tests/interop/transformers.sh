#!/usr/bin/env bash
# transformers both ways, against the real package: PART models (transformers_models_check.py) or
# tokenizers (transformers_tokenizers_check.py) does the checking; this sets up the corpus and the
# work directory.
# Usage: transformers.sh PART ATOLL_BIN ATOLL_LOGITS_BIN PYTHON (PYTHON: the venv's, with transformers)
set -uo pipefail
here=$(dirname "$0")
source "$here/../cli/lib.sh"
make_corpus "$2" "$work/data"
"$4" "$here/transformers_$1_check.py" --atoll "$2" --logits "$3" --work "$work"
