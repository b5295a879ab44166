#!/usr/bin/env bash
# Multi-process data parallelism on 2 GPUs (mp_check.py): mpirun and
# RANK/WORLD_SIZE launches against one process, and a killed rank under each.
# Skipped (77) with one GPU. Run on the 2-GPU kind:
#   bash scripts/gpu-run-all.sh mp_check
# step-timeout: 540
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd)
logs=$2
mkdir -p "$logs"
source "$here/mpi_env.sh" "$bundle"
python3 "$here/mp_check.py" --bundle "$bundle" --out-dir "$logs" "${@:3}"
