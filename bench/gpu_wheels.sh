#!/usr/bin/env bash
# Download, here (where pip reaches the package registries), the wheels that the GPU machine's image
# lacks for bench/gpu_device.sh: the Wan VAE (diffusers) and the reference encoder (open_clip) with
# their missing dependencies. The image already has torch, safetensors, huggingface_hub, timm, regex,
# numpy, pyarrow, rich, typer (../.library/device/KINDS.md). Output: .whl/ (git-ignored; carried).
#
#     bash bench/gpu_wheels.sh        # then: run(carry=[".whl"], command="bash bench/gpu_device.sh")
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .whl \
    "diffusers==0.42.1" "importlib_metadata==10.2.0" "open_clip_torch" "ftfy==6.3.1" "wcwidth==0.7.0"
ls -l .whl
du -sh .whl
