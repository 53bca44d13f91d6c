#!/usr/bin/env bash
# The main job, from a fresh machine: install dependencies, build Atoll, fetch and prepare the
# Python documentation corpus, and train a small Llama with 4 data-parallel ranks.
# Usage: bash examples/pydocs/run.sh [--set key=value]...
source "$(dirname "$0")/../setup.sh"
exec build/bin/atoll launch examples/pydocs/llama_dp4.yaml "$@"
