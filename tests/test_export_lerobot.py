"""LeRobot's own loader reads every exported frame and action row equal to ours (docs/export.md,
"Checked with LeRobot"). LeRobot 0.4.4 pins an older torch than ours, so `bench/lerobot_check.sh`
runs it in a venv of its own (made once, ~7 GB, kept in ~/.cache); a fresh machine spends minutes
on that install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_lerobot_loads_every_exported_frame_and_action_equal_to_the_recording(tmp_path):
    proc = subprocess.run(["bash", "bench/lerobot_check.sh", str(tmp_path / "check"), "120"], cwd=ROOT,
                          capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("lerobot 0.4.4,") and line.endswith("backends: torchcodec, pyav") for line in lines), \
        proc.stdout
    checked = [line for line in lines if "every frame and action row compared" in line]
    assert len(checked) == 6 and all(line.endswith(": ok") for line in checked), proc.stdout
