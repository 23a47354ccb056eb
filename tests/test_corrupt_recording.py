"""A corrupt recording is one line, whichever command reads it: every command that reads episodes,
given a run whose only video.mp4 is empty (or cut short), exits non-zero with exactly one line, an
error naming the file, and no traceback. The shared check is `video_frame_count` in
wantofight/video.py (docs/recording-format.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wantofight.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def good(recorded) -> Path:
    return recorded(policy="scripted", p2_policy="random", episodes=1, max_frames=120, fps=30, seed=4)


@pytest.fixture(scope="module")
def probe(good, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("probe") / "probe"
    result = runner.invoke(app, ["probe", "train", str(good), "--out", str(out), "--size", "32x32", "--steps", "1",
                                 "--batch-size", "4", "--max-frames", "16", "--val-fraction", "0", "--no-progress"])
    assert result.exit_code == 0, result.output
    return out


def readers(run: Path, episode: Path, probe: Path, tmp: Path) -> dict[str, list[str]]:
    return {
        "replay --verify": ["replay", str(episode), "--verify"],
        "inspect --episode": ["inspect", "--episode", str(episode), "--out", str(tmp / "clip.mp4")],
        "annotate": ["annotate", str(run), "--no-progress"],
        "build-curriculum": ["build-curriculum", str(run), "--out", str(tmp / "ds"), "--no-progress"],
        "probe train": ["probe", "train", str(run), "--out", str(tmp / "probe"), "--steps", "1", "--no-progress"],
        "probe eval": ["probe", "eval", str(probe), str(run)],
        "benchmark build": ["benchmark", "build", str(run), "--out", str(tmp / "suite"), "--no-progress"],
    }


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_every_reader_of_a_corrupt_recording_says_so_in_one_line(damage, good, probe, tmp_path):
    run = Path(shutil.copytree(good, tmp_path / "run"))
    episode = next((run / "episodes").iterdir())
    video = episode / "video.mp4"
    video.write_bytes(b"" if damage == "empty" else video.read_bytes()[:1000])
    for name, args in readers(run, episode, probe, tmp_path).items():
        result = runner.invoke(app, args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2, (name, result.output, result.exception)  # 1 would be an uncaught exception
        assert "Traceback" not in result.output, (name, result.output)
        assert len(lines) == 1 and lines[0].startswith("error: ") and "video.mp4" in lines[0], (name, result.output)
