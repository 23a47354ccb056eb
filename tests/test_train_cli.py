"""`wtf train stage1` end to end on a dataset recorded by the project's own collector."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from hud_helpers import index_line, title
from wantofight import hud
from wantofight.annotate.curriculum import BuildOptions, build_curriculum
from wantofight.cli import app
from wantofight.inference import checkpoints
from wantofight.train import checkpoint as ckpt
from wantofight.train.metrics import read_metrics


@pytest.fixture(scope="module")
def dataset(recorded, tmp_path_factory):
    """Drills (single- and dual-action clips) and a scripted match (full-match clips), 33-frame clips."""
    drill = recorded(policy="drill", fps=30, episodes=1, max_frames=900)
    match = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1)
    out = tmp_path_factory.mktemp("ds") / "ds"
    build_curriculum([drill, match], out, BuildOptions(clip_frames=33, val_fraction=0.3, shard_size_mb=0.5, seed=3,
                                                       balance=False), workers=2, progress=False)
    return out


FAST = ["--set", "data.frames=9", "--set", "data.batch_size=1", "--set", "checkpoint.every=10",
        "--set", "validation.every=20", "--set", "validation.batches=1", "--set", "validation.video_frames=9",
        "--set", "validation.sample_steps=2", "--no-progress"]


@pytest.mark.slow
def test_cli_trains_20_steps_from_clips_and_writes_checkpoints_metrics_and_a_hud_video(dataset, tmp_path):
    import av

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "stage1", "--preset", "tiny", "--data", str(dataset), "--out", str(run),
                                      "--steps", "20", *FAST])
    assert result.exit_code == 0, result.output
    assert [p.name for p in checkpoints.list_checkpoints(run)] == [ckpt.checkpoint_name(10), ckpt.checkpoint_name(20)]
    saved = checkpoints.read_config(checkpoints.latest_checkpoint(run))
    assert saved["train"]["data"]["frames"] == 9 and saved["preset"] == "tiny" and saved["source"] == "clips"
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(1, 21))
    assert all(r["loss"] > 0 for r in records) and "val_loss" in records[-1]
    video = run / "val" / "step_00000020.mp4"
    assert records[-1]["val_video"] == str(video)
    with av.open(str(video)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 9
    assert frames[0].shape[1] > 2 * 64  # real | generated, each with its key HUD, side by side
    layout = hud.hud_layout(64, 64, 2)
    right = layout.output_shape[1] + hud.PANEL_GAP * 2
    assert {(title(f), title(f, right)) for f in frames} == {("EMULATOR", "GENERATED")}
    for x in (0, right):
        lines = [index_line(f[hud.TITLE_H * 2:, x:x + layout.output_shape[1]], layout) for f in frames]
        assert lines == [f"FRAME {t} OF 9" for t in range(9)]

    again = CliRunner().invoke(app, ["train", "stage1", "--preset", "tiny", "--data", str(dataset), "--out",
                                     str(run), "--steps", "22", "--resume", *FAST])
    assert again.exit_code == 0, again.output
    assert [r["step"] for r in read_metrics(run)] == list(range(1, 23))


def test_cli_errors_are_one_line(dataset, tmp_path):
    runner = CliRunner()
    nothing = runner.invoke(app, ["train", "stage1", "--data", str(dataset), "--out", str(tmp_path / "none"),
                                  "--resume"])
    assert nothing.exit_code == 2 and "holds no complete checkpoint" in nothing.output
    bad_set = runner.invoke(app, ["train", "stage1", "--data", str(dataset), "--out", str(tmp_path / "x"),
                                  "--set", "optim.lr"])
    assert bad_set.exit_code == 2 and "expected key=value" in bad_set.output
    bad_preset = runner.invoke(app, ["train", "stage1", "--preset", "huge", "--data", str(dataset),
                                     "--out", str(tmp_path / "y")])
    assert bad_preset.exit_code == 2 and "valid presets: tiny, wan-1.3b" in bad_preset.output
    no_data = runner.invoke(app, ["train", "stage1", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "z")])
    assert no_data.exit_code == 2 and "does not exist" in no_data.output


@pytest.fixture(scope="module")
def matches_only(recorded, tmp_path_factory):
    """Full-match clips only (what the README's `wtf encode` example holds): no action tiers at all."""
    match = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1)
    out = tmp_path_factory.mktemp("ds") / "full"
    build_curriculum([match], out, BuildOptions(clip_frames=33, tiers=("full-match",), val_fraction=0.3,
                                                shard_size_mb=0.5), workers=1, progress=False)
    return out


def test_default_curriculum_trains_on_full_match_data_alone(matches_only, tmp_path):
    """The default curriculum starts with single-action phases; full-match data alone skips them with a note."""
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "stage1", "--preset", "tiny", "--data", str(matches_only), "--out",
                                      str(run), "--steps", "3", *FAST])
    assert result.exit_code == 0, result.output
    assert "single-action" in result.output and "skipped" in result.output
    # the run ends with one line on stdout naming what it wrote (validation ran at the last step)
    assert re.fullmatch(rf"wrote {re.escape(str(run))}: step 3, loss [\d.]+, val loss [\d.]+ \(keys released [\d.]+\)",
                        result.stdout.strip()), result.stdout
    assert all(r["tiers"] == {"full-match": 1} for r in read_metrics(run))


@pytest.mark.parametrize("stage", ["stage1", "stage2", "stage3"])
def test_a_failed_run_leaves_no_out_folder(stage, dataset, tmp_path):
    """Bad --data (missing, or a folder that is no dataset) fails in one line and creates no --out folder."""
    (tmp_path / "empty").mkdir()
    start = {"stage1": [], "stage2": ["--init-from", str(tmp_path / "no-run")], "stage3": ["--teacher", str(tmp_path / "no-run")]}
    for data in (tmp_path / "missing", tmp_path / "empty"):
        out = tmp_path / f"run-{data.name}"
        result = CliRunner().invoke(app, ["train", stage, "--preset", "tiny", "--data", str(data), "--out", str(out),
                                          *start[stage], *FAST])
        assert result.exit_code == 2, result.output
        assert not out.exists(), f"{stage} --data {data.name} left {out}"
    no_init = tmp_path / "run-no-init"
    if stage != "stage1":  # good data, a missing stage-1 run / teacher
        result = CliRunner().invoke(app, ["train", stage, "--preset", "tiny", "--data", str(dataset), "--out",
                                          str(no_init), *start[stage], *FAST])
        assert result.exit_code == 2, result.output
        assert not no_init.exists()


def test_every_set_is_typed_by_its_field_through_every_command(tmp_path, monkeypatch):
    """One `--set` parser for stages 1-3, the VAE and the decoder: `1e-4` (a string to YAML 1.1) is the
    float the field declares, and a word for an integer field is one line naming the field and its type.
    The trainers are stopped as they are built, with the config they were given."""
    from wantofight.train.vae import pruned_decoder
    from wantofight.train.trainer import Trainer, TrainError

    seen = {}

    def capture(self, config, *args, **kwargs):
        seen.update(lr=config.optim.lr, dmd=getattr(self, "dmd", None), vae=getattr(self, "settings", None))
        raise TrainError("stopped before training")

    def capture_decoder(vae, data, out, config, *args, **kwargs):
        seen.update(lr=config.lr)
        raise ValueError("stopped before training")

    monkeypatch.setattr(Trainer, "__init__", capture)
    monkeypatch.setattr(pruned_decoder, "train_decoder", capture_decoder)
    data, source = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    (data / "manifest.json").write_text("{}")  # a curriculum folder to the VAE's check; nothing is read
    source.mkdir()
    commands = {
        "stage1": (["train", "stage1"], "optim.lr", "data.batch_size"),
        "stage2": (["train", "stage2", "--init-from", str(source)], "optim.lr", "data.batch_size"),
        "stage3": (["train", "stage3", "--teacher", str(source)], "optim.lr", "dmd.critic_steps"),
        "vae": (["train", "vae"], "optim.lr", "vae.eval_windows"),
        "decoder": (["train", "decoder"], "decoder.lr", "decoder.seed"),
    }
    runner = CliRunner()
    for name, (command, float_field, int_field) in commands.items():
        args = [*command, "--data", str(data), "--out", str(tmp_path / name)]
        seen.clear()
        typed = runner.invoke(app, [*args, "--set", f"{float_field}=1e-4", "--set", "dmd.critic_lr=2e-4"
                                    if name == "stage3" else f"{float_field}=1e-4"])
        assert "stopped before training" in typed.output, (name, typed.output)
        assert type(seen["lr"]) is float and seen["lr"] == 1e-4, (name, seen)
        if name == "stage3":
            assert type(seen["dmd"].critic_lr) is float and seen["dmd"].critic_lr == 2e-4
        bad = runner.invoke(app, [*args, "--set", f"{int_field}=abc"])
        lines = [line for line in bad.output.splitlines() if line.strip()]
        assert bad.exit_code == 2 and len(lines) == 1, (name, bad.output)
        assert f"{int_field} must be an integer, got 'abc'" in lines[0], (name, bad.output)
