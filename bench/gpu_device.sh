#!/usr/bin/env bash
# The prepared device check for the model and stage-1 issues, in one call on the lent GPU machine:
#
#     bash bench/gpu_wheels.sh                                     # here, once: .whl/
#     run(carry=[".whl"], timeout_s=360, command="bash bench/gpu_device.sh")   # about 5 min: room for a rerun
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
STREAM_S=${STREAM_S:-200}
TRAIN_S=${TRAIN_S:-100}
STREAM_ARGS="--chunks 12 --warmup 3"
TRAIN_ARGS="--steps 4 --warmup 2"
if [ "${SMOKE:-0}" = 1 ]; then  # SMOKE=1: the same call on a CPU machine, tiny preset (tests this script)
    STREAM_ARGS="--preset tiny --device cpu --dtype fp32 --chunks 2 --warmup 1"
    TRAIN_ARGS="--preset tiny --device cpu --frames 17 --steps 2 --warmup 1"
fi

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
if ! python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . ; then
    # an image whose setuptools cannot build it: lay the package-dir mapping of pyproject.toml out as links
    echo "pip could not build the package; linking the checkout into /tmp/site instead"
    mkdir -p /tmp/site/wantofight
    ln -sf "$PWD"/wantofight/*.py /tmp/site/wantofight/
    for part in collect annotate datasets train; do ln -sfn "$PWD/$part" "/tmp/site/wantofight/$part"; done
    ln -sfn "$PWD/wantofight_model" /tmp/site/wantofight_model
fi
export PYTHONPATH=/tmp/site
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi"; } \
    | tee "$OUT/gpu_device.log"
python3 -c "import torch, diffusers, open_clip, wantofight_model; print('torch', torch.__version__, 'diffusers', diffusers.__version__)" \
    2>&1 | tee -a "$OUT/gpu_device.log"

status=0
timeout "$STREAM_S" python3 bench/gpu_stream.py $STREAM_ARGS --out "$OUT/gpu_stream.md" 2>&1 \
    | tee "$OUT/gpu_stream.log" || status=1
timeout "$TRAIN_S" python3 bench/gpu_train.py $TRAIN_ARGS --out "$OUT/gpu_train.md" 2>&1 \
    | tee "$OUT/gpu_train.log" || status=1
ls -l "$OUT"
exit $status
