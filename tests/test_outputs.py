"""Output folders are never replaced by surprise (docs/contracts.md, "Output folders"): every command
that writes a folder refuses one holding something else in one line naming --overwrite, leaving its
bytes as they were; with --overwrite the new output replaces the old only once complete, so a Ctrl-C
mid-run leaves the old one intact. The helper is wantofight/outputs.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wantofight import outputs
from wantofight.cli import app

runner = CliRunner()
OLD = b"an earlier output the user still wants\n"
TRAIN = ["--preset", "tiny", "--max-steps", "1", "--no-progress", "--set", "data.frames=9", "--set",
         "data.batch_size=1", "--set", "validation.every=0"]


# ---------------------------------------------------------------------------------------------
# The helper


def test_claim_gives_a_new_or_own_folder_and_refuses_anything_else(tmp_path):
    out = tmp_path / "out"
    assert outputs.claim(out) == out  # absent
    out.mkdir()
    assert outputs.claim(out) == out  # empty
    (out / ".parts-1").mkdir()
    assert outputs.claim(out, ours=lambda entry: entry.name.startswith(".parts-")) == out  # its own leftovers
    (out / "keep.txt").write_bytes(OLD)
    with pytest.raises(outputs.OutputExists, match="--overwrite"):
        outputs.claim(out, ours=lambda entry: entry.name.startswith(".parts-"))
    with pytest.raises(outputs.OutputExists, match="--resume"):
        outputs.claim(out, resumable=True)
    staging = outputs.claim(out, overwrite=True)
    assert staging == tmp_path / ".out.partial" and not staging.exists()
    assert (out / "keep.txt").read_bytes() == OLD


def test_swap_in_replaces_the_old_folder_whole(tmp_path):
    out, new = tmp_path / "out", tmp_path / ".out.partial"
    out.mkdir()
    (out / "keep.txt").write_bytes(OLD)
    new.mkdir()
    (new / "manifest.json").write_text("{}")
    outputs.swap_in(new, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in out.iterdir()] == ["manifest.json"]


def test_a_file_written_atomically_is_the_old_one_or_the_whole_new_one_and_leaves_no_temp(tmp_path):
    """A Ctrl-C (KeyboardInterrupt) mid-write keeps the old bytes and removes the temporary file, which
    a later reader globbing `*.json` would otherwise pick up (CI saw one left by a benchmark case)."""
    path = tmp_path / "case.json"
    path.write_bytes(OLD)
    with pytest.raises(KeyboardInterrupt):
        with outputs.written(path) as tmp:
            tmp.write_text('{"half": ')
            raise KeyboardInterrupt
    assert path.read_bytes() == OLD and [p.name for p in tmp_path.iterdir()] == ["case.json"]
    outputs.write_atomic(path, "{}\n")
    assert path.read_text() == "{}\n" and [p.name for p in tmp_path.iterdir()] == ["case.json"]
    assert outputs.is_temporary(tmp) and not outputs.is_temporary(path)


# ---------------------------------------------------------------------------------------------
# Every command that writes a folder


@pytest.fixture(scope="module")
def run(recorded) -> Path:
    return recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=300, fps=30, seed=3)


@pytest.fixture(scope="module")
def made(run, tmp_path_factory):
    """Inputs built once with the commands themselves: a dataset, a stage-1 and a stage-2 run, a probe, a suite."""
    root = tmp_path_factory.mktemp("made")
    steps = {
        "ds": ["build-curriculum", str(run), "--out", str(root / "ds"), "--clip-frames", "9", "--stride", "8",
               "--tiers", "full", "--val-fraction", "0", "--no-progress"],
        "s1": ["train", "stage1", "--data", str(root / "ds"), "--out", str(root / "s1"), *TRAIN],
        "s2": ["train", "stage2", "--init-from", str(root / "s1"), "--data", str(root / "ds"), "--out",
               str(root / "s2"), *TRAIN],
        "probe": ["probe", "train", str(run), "--out", str(root / "probe"), "--size", "32x32", "--steps", "2",
                  "--batch-size", "8", "--max-frames", "64", "--no-progress"],
        "suite": ["benchmark", "build", str(run), "--out", str(root / "suite"), "--per-scenario", "1",
                  "--long-seconds", "2", "--no-progress"],
    }
    for name, args in steps.items():
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (name, result.output)
    return root


def command(name: str, run: Path, made: Path, out: Path) -> tuple[list[str], str]:
    """`wtf ...` writing `out`, and a file its complete output holds."""
    ds = str(made / "ds")
    return {
        "build-curriculum": (["build-curriculum", str(run), "--out", str(out), "--clip-frames", "9", "--stride", "8",
                              "--tiers", "full", "--val-fraction", "0", "--no-progress"], "manifest.json"),
        "encode": (["encode", ds, "--out", str(out), "--vae", "tiny", "--frames", "9", "--size", "16x16",
                    "--batch-size", "8", "--no-progress"], "manifest.json"),
        "probe train": (["probe", "train", str(run), "--out", str(out), "--size", "32x32", "--steps", "2",
                         "--batch-size", "8", "--max-frames", "64", "--no-progress"], "probe.json"),
        "train vae": (["train", "vae", "--data", ds, "--out", str(out), "--size", "16x16", "--max-steps", "1",
                       "--no-progress", "--set", "data.frames=9", "--set", "vae.eval_windows=1", "--set",
                       "vae.stats_windows=1", "--set", "data.batch_size=1", "--set", "vae.crop=0", "--set",
                       "validation.every=0"], "report.json"),
        "train stage1": (["train", "stage1", "--data", ds, "--out", str(out), *TRAIN], "checkpoints/latest"),
        "train stage2": (["train", "stage2", "--init-from", str(made / "s1"), "--data", ds, "--out", str(out),
                          *TRAIN], "checkpoints/latest"),
        "train stage3": (["train", "stage3", "--teacher", str(made / "s2"), "--data", ds, "--out", str(out), *TRAIN],
                         "checkpoints/latest"),
        "train decoder": (["train", "decoder", "--data", ds, "--out", str(out), "--steps", "1", "--frames", "9",
                           "--batch-size", "1", "--size", "16x16"], "pruned_decoder.json"),
        "benchmark build": (["benchmark", "build", str(run), "--out", str(out), "--per-scenario", "1",
                             "--long-seconds", "2", "--no-progress"], "suite.json"),
        "benchmark run": (["benchmark", "run", str(made / "suite"), "--probe", str(made / "probe"), "--out", str(out),
                           "--model", "first-frame", "--max-cases", "1", "--videos", "0", "--no-lpips",
                           "--no-progress"], "report.json"),
        "agents train": (["agents", "train", "--out", str(out), "--steps", "64", "--n-steps", "32", "--batch-size",
                          "32", "--envs", "1", "--checkpoint-every", "64", "--no-progress"], "final.zip"),
    }[name]


COMMANDS = ["build-curriculum", "encode", "probe train", "train vae", "train stage1", "train stage2", "train stage3",
            "train decoder", "benchmark build", "benchmark run", "agents train"]


@pytest.mark.parametrize("name", COMMANDS)
def test_an_existing_output_is_refused_in_one_line_and_replaced_whole_with_overwrite(name, run, made, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_bytes(OLD)
    args, product = command(name, run, made, out)

    refused = runner.invoke(app, args)
    assert refused.exit_code == 2, refused.output
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and "--overwrite" in lines[0] and str(out) in lines[0], refused.output
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_bytes() == OLD

    replaced = runner.invoke(app, [*args, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert (out / product).exists() and not (out / "keep.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder, no old copy left


def test_build_curriculum_refuses_to_rebuild_over_its_own_dataset(run, made, tmp_path):
    """The reported case: a second build into an existing dataset used to replace it with `wrote N clips`."""
    manifest = (made / "ds" / "manifest.json").read_bytes()
    args, _ = command("build-curriculum", run, made, made / "ds")
    result = runner.invoke(app, [*args, "--tiers", "single"])
    assert result.exit_code == 2 and "--overwrite" in result.output, result.output
    assert (made / "ds" / "manifest.json").read_bytes() == manifest


def test_annotate_refuses_annotations_of_another_version(run, tmp_path):
    from annotate_helpers import copy_run

    mine = copy_run(run, tmp_path / "run")
    assert runner.invoke(app, ["annotate", str(mine), "--no-progress"]).exit_code == 0
    meta = sorted(mine.glob("episodes/*/annotation.json"))[0]
    other = json.loads(meta.read_text()) | {"annotation_version": 0}
    meta.write_text(json.dumps(other))
    before = {p: p.read_bytes() for p in meta.parent.iterdir()}

    refused = runner.invoke(app, ["annotate", str(mine), "--no-progress"])
    assert refused.exit_code == 2 and "--overwrite" in refused.output and str(meta) in refused.output, refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in meta.parent.iterdir()} == before

    replaced = runner.invoke(app, ["annotate", str(mine), "--no-progress", "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(meta.read_text())["annotation_version"] != 0


def test_ctrl_c_during_an_overwrite_leaves_the_old_output_intact(run, made, tmp_path):
    """SIGINT to the whole process group, as a terminal sends it, while the new dataset is being cut:
    the old dataset is byte for byte what it was, and the same command run again completes."""
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_bytes(OLD)
    staging = outputs.staging_dir(out)
    # Overlapping 9-frame windows every frame: a few seconds of clip encoding.
    args = ["build-curriculum", str(run), "--out", str(out), "--clip-frames", "9", "--stride", "1", "--tiers",
            "full", "--overwrite", "--workers", "2", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "wantofight.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(staging.glob(".parts-*")) and not any(out.glob(".parts-*")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the build never started cutting clips"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130 and err.startswith("stopped: ") and "Traceback" not in err, err
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_bytes() == OLD

    again = runner.invoke(app, args)  # the same command, without Ctrl-C
    assert again.exit_code == 0, again.output
    assert (out / "manifest.json").is_file() and not (out / "keep.txt").exists() and not staging.exists()
