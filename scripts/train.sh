#!/usr/bin/env bash
# README command 1: install everything, build, and run the main job: DDP
# training on CPU over ringreduce, launched by torchrun on 2 processes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. scripts/python_env.sh
ringreduce_python_env
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "${NPROC:-2}" \
  examples/train_ddp.py "$@"
