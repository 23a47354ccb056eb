#!/usr/bin/env bash
# The prepared device check for the model and stage-1 issues, in one call on the lent GPU machine:
#
#     bash bench/gpu_wheels.sh                                     # here, once: .whl/
#     run(carry=[".whl"], timeout_s=480, command="bash bench/gpu_device.sh")
#
# Installs the package and the carried wheels into /tmp/site (no index: nothing can be fetched
# there), then runs bench/gpu_stream.py (wan-1.3b streaming, eager / pruned decoder / torch.compile)
# and bench/gpu_train.py (wan-1.3b stage-1 step), each under its own time limit so one overrun still
# leaves the other's table. Tables and logs land in $OUT (copy them to bench/results/ here).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
STREAM_S=${STREAM_S:-240}
TRAIN_S=${TRAIN_S:-180}

python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . .whl/*.whl \
    2>&1 | tail -3 || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu_device.log"
python3 -c "import torch, diffusers, open_clip, wantofight_model; print('torch', torch.__version__, 'diffusers', diffusers.__version__)" \
    2>&1 | tee -a "$OUT/gpu_device.log"

status=0
timeout "$STREAM_S" python3 bench/gpu_stream.py --chunks 12 --warmup 3 --out "$OUT/gpu_stream.md" 2>&1 \
    | tee "$OUT/gpu_stream.log" || status=1
timeout "$TRAIN_S" python3 bench/gpu_train.py --steps 4 --warmup 2 --out "$OUT/gpu_train.md" 2>&1 \
    | tee "$OUT/gpu_train.log" || status=1
ls -l "$OUT"
exit $status
