#!/usr/bin/env bash
# Check `wtf export --format lerobot` with LeRobot's own loader, in an environment of its own
# (LeRobot 0.4.4 is what pip resolves on Python 3.11 and pins torch < 2.11; ours is 2.14.1).
#   bash bench/lerobot_check.sh [WORK_DIR [ROWS]]     (ROWS per recorded episode, default 400)
# Makes the venv once (~7 GB: a CUDA build of torch 2.9.1 from PyPI), and FFmpeg's shared libraries
# for torchcodec (Debian's ffmpeg), then records, exports and compares (bench/lerobot_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)/lerobot-check}
venv=${WTF_LEROBOT_VENV:-$HOME/.cache/wtf-lerobot-0.4.4}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import lerobot" 2>/dev/null; then
    python -m venv "$venv"
    # torchcodec 0.10 is built for torch 2.10 and fails to load beside 2.9; 0.9 is its match.
    "$venv/bin/pip" install -q "lerobot==0.4.4" "torch==2.9.1" "torchvision==0.24.1" "torchcodec==0.9.*"
fi
if ! ldconfig -p | grep -q libavcodec; then
    apt-get install -y -qq ffmpeg >/dev/null
fi
python bench/lerobot_check.py reference "$work" ${2:-400}
PYTHONWARNINGS=ignore "$venv/bin/python" bench/lerobot_check.py verify "$work"
