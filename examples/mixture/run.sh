#!/usr/bin/env bash
# Issue 61's example from a fresh machine: install dependencies and build Atoll as the main job does,
# prepare the two sources with Llama 3's tokenizer (prepare.sh; skipped when prepared), and train a
# small Llama on their blend with 2 data-parallel ranks (train.yaml).
# Usage: bash examples/mixture/run.sh [--set key=value]...
ATOLL_SETUP_PYDOCS=no
source "$(dirname "$0")/../setup.sh"
bash examples/mixture/prepare.sh data/mixture "$atoll"
exec "$atoll" launch examples/mixture/train.yaml "$@"
