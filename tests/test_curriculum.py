"""`wtf build-curriculum`: tiers, frame-exact clips, readers, determinism, excludes, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from annotate_helpers import MOVES, copy_run
from wantofight.annotate.curriculum import BuildError, BuildOptions, build_curriculum
from wantofight.annotate.shards import ROW_GROUP_ROWS
from wantofight.annotate.video import decode_mp4
from wantofight.cli import app
from wantofight.collect.keys import mask_of
from wantofight.video import read_video


@pytest.fixture(scope="module")
def runs(recorded):
    drill = recorded(policy="drill", fps=60, episodes=1, max_frames=2000)
    match = recorded(policy="scripted", p2_policy="random", episodes=3, max_frames=500, fps=30, seed=1)
    return [drill, match]


@pytest.fixture(scope="module")
def dataset(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "ds"
    options = BuildOptions(val_fraction=0.3, shard_size_mb=0.5, seed=3, balance=False)
    manifest = build_curriculum(runs, out, options, workers=2, progress=False)
    return out, manifest, options


def rows(out: Path, tier: str | None = None) -> list[dict]:
    files = sorted(out.glob(f"{tier or '*'}/*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def test_every_duel_move_gets_single_action_clips_with_the_right_label(dataset):
    out, manifest, _ = dataset
    singles = rows(out, "single-action")
    for name, move in MOVES.items():
        clips = [c for c in singles if (c["p1_move"] or c["p2_move"]) == name]
        assert clips, f"no single-action clip for {name}"
        for clip in clips:
            actor, watcher = clip["actor"], 3 - clip["actor"]
            assert not any(clip[f"p{watcher}_keys"]), "the other player must give no input"
            actions = clip[f"p{actor}_action"]
            first = actions.index(f"attack:{name}")
            button = mask_of([k for k in move["input"] if k in ("A", "B")])
            assert clip[f"p{actor}_pressed"][first] & button  # the attack starts on its press
            assert actions[0] == "idle" and actions[-1] == "idle"  # neutral to recovery
            assert clip["num_frames"] + clip["pad_before"] + clip["pad_after"] == clip["padded_frames"] == 161
    assert set(manifest["single_action_coverage"]) >= {f"{m}/left" for m in MOVES}


def test_clips_equal_their_source_rows_keys_ram_and_frames(dataset, runs):
    out, _, _ = dataset
    sources = {}
    for tier in ("single-action", "dual-action", "full-match"):
        clips = rows(out, tier)
        assert clips, tier
        for clip in clips[:2] + clips[-1:]:
            meta = json.loads(clip["source_meta"])
            run = next(r for r in runs if r.name == clip["run"])
            path = run / "episodes" / clip["episode_id"]
            if path not in sources:
                sources[path] = (pq.read_table(path / "frames.parquet").to_pydict(), read_video(path / "video.mp4"))
            frames, video = sources[path]
            a, b = clip["start_frame"], clip["start_frame"] + clip["num_frames"]
            assert meta["episode_id"] == clip["episode_id"]
            assert clip["p1_keys"] == frames["p1_keys"][a:b] and clip["p2_keys"] == frames["p2_keys"][a:b]
            for name in ("p1_x", "p2_state", "p1_health", "phase", "round"):
                assert clip[f"ram_{name}"] == frames[name][a:b]
            decoded = decode_mp4(clip["video"])
            assert decoded.shape == (clip["num_frames"], clip["height"], clip["width"], 3)
            assert np.array_equal(decoded, video[a:b])


def test_clips_stay_inside_one_gameplay_segment_and_split_by_episode(dataset, runs):
    out, manifest, _ = dataset
    by_episode: dict[str, set] = {}
    segments = {}
    for clip in rows(out):
        key = (clip["run"], clip["episode_id"])
        if key not in segments:
            run = next(r for r in runs if r.name == clip["run"])
            segments[key] = pq.read_table(run / "episodes" / clip["episode_id"] / "annotations.parquet")["segment"]
        seg = segments[key].to_pylist()[clip["start_frame"]:clip["start_frame"] + clip["num_frames"]]
        assert len(set(seg)) == 1 and seg[0] >= 0 and all(clip["gameplay"])
        by_episode.setdefault(clip["episode_uid"], set()).add(clip["split"])
    assert all(len(splits) == 1 for splits in by_episode.values())
    assert manifest["episodes"]["split"]["val"] and manifest["episodes"]["split"]["train"]
    full = rows(out, "full-match")
    assert all(c["num_frames"] == 161 and c["p1_policy"] == "scripted" for c in full)
    for c in rows(out, "dual-action"):
        assert any(c["p1_keys"]) and any(c["p2_keys"])


def test_manifest_counts_and_shards_match_the_files(dataset):
    out, manifest, _ = dataset
    assert manifest["schema_version"] == 1 and manifest["key_layout_version"] == 1
    total = 0
    for shard in manifest["shards"]:
        table = pq.read_table(out / shard["file"])
        assert table.num_rows == shard["rows"]
        assert set(table["tier"].to_pylist()) == {shard["tier"]} and set(table["split"].to_pylist()) == {shard["split"]}
        assert pq.ParquetFile(out / shard["file"]).metadata.row_group(0).num_rows <= ROW_GROUP_ROWS
        assert table.schema.metadata[b"wantofight.schema_version"] == b"1"
        total += table.num_rows
    assert total == manifest["clips"] == sum(c["train"] + c["val"] for c in manifest["counts"].values())
    assert len([s for s in manifest["shards"] if s["tier"] == "single-action"]) > 1  # 0.5 MB shards roll over
    assert manifest["events"]["hit"] > 0 and manifest["events"]["side_swap"] > 0
    assert not list(out.rglob(".tmp-*")) and not list(out.glob(".parts-*"))


def test_ordinary_tools_read_the_shards(dataset, tmp_path):
    out, manifest, _ = dataset
    import duckdb
    import polars as pl

    counts = dict(duckdb.sql(f"select tier, count(*) from '{out}/*/*.parquet' group by tier").fetchall())
    assert counts == {t: c["train"] + c["val"] for t, c in manifest["counts"].items() if c["train"] + c["val"]}
    frame = pl.read_parquet(f"{out}/single-action/*.parquet")
    assert frame["p1_keys"].dtype == pl.List(pl.UInt16) and frame.height == sum(manifest["counts"]["single-action"].values())
    # Hugging Face `datasets` (run outside the repo, whose datasets/ folder would shadow it).
    code = (
        "import datasets, sys;"
        f"d = datasets.load_dataset('parquet', data_dir='{out}/full-match');"
        "print(sorted((k, v.num_rows) for k, v in d.items()))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    full = manifest["counts"]["full-match"]
    assert f"('train', {full['train']})" in proc.stdout and f"('validation', {full['val']})" in proc.stdout


@pytest.mark.slow
def test_same_inputs_and_seed_give_identical_manifest_and_ids_and_exclude_is_honoured(dataset, runs, tmp_path):
    out, manifest, options = dataset
    again = tmp_path / "again"
    build_curriculum(runs, again, options, workers=1, progress=False)
    assert (again / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()
    ids = sorted(c["clip_id"] for c in rows(out))
    assert sorted(c["clip_id"] for c in rows(again)) == ids

    excluded = ids[:3]
    exclude = tmp_path / "exclude.json"
    exclude.write_text(json.dumps({"version": 1, "clips": [{"clip_id": i, "reason": "blurry"} for i in excluded]}))
    trimmed = tmp_path / "trimmed"
    result = build_curriculum(runs, trimmed, BuildOptions(**{**options.__dict__, "exclude": str(exclude)}),
                              progress=False)
    left = {c["clip_id"] for c in rows(trimmed)}
    assert left == set(ids) - set(excluded)
    assert result["dropped"]["excluded"] == 3


def test_a_killed_build_leaves_no_visible_partial_shard_and_a_rerun_completes(runs, tmp_path, monkeypatch):
    from wantofight.annotate import curriculum, shards

    out = tmp_path / "ds"
    options = BuildOptions(tiers=("single-action",), val_fraction=0.0, shard_size_mb=0.2)
    real_merge = shards.merge_parts

    def dies_midway(parts, out_dir, prefix, schema, shard_bytes):
        real_merge(parts[:0], out_dir, prefix, schema, shard_bytes)
        import pyarrow.parquet as pq_

        pq_.ParquetWriter(shards.temp_name(out_dir / f"{prefix}-00000.parquet"), schema).close()
        raise KeyboardInterrupt  # killed while writing the first shard

    monkeypatch.setattr(curriculum, "merge_parts", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        build_curriculum(runs[:1], out, options, progress=False)
    # Finished per-episode parts stay (hidden, two levels down) for the rerun; no shard is visible.
    assert not list(out.glob("*/*.parquet")) and not (out / "manifest.json").exists()
    assert list(out.glob(".parts-*/single-action/*.parquet"))
    monkeypatch.setattr(curriculum, "merge_parts", real_merge)
    manifest = build_curriculum(runs[:1], out, options, progress=False)
    assert sum(s["rows"] for s in manifest["shards"]) == manifest["counts"]["single-action"]["train"] > 0
    assert not list(out.rglob(".tmp-*"))


def test_bad_episodes_are_skipped_by_name_and_counted_or_fail_with_strict(runs, tmp_path):
    run = copy_run(runs[1], tmp_path / "run")
    (run / "episodes" / "ep000000" / "meta.json").unlink()
    video = run / "episodes" / "ep000001" / "video.mp4"
    video.write_bytes(video.read_bytes()[:1000])
    out = tmp_path / "ds"
    args = ["build-curriculum", str(run), "--out", str(out), "--tiers", "full", "--no-progress", "--val-fraction", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "ep000000" in result.output and "ep000001" in result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["episodes"]["skipped"]) == 2 and manifest["episodes"]["used"] == 1
    assert {json.loads(c["source_meta"])["episode_id"] for c in rows(out)} == {"ep000002"}

    strict = CliRunner().invoke(app, args[:3] + [str(tmp_path / "strict"), *args[4:], "--strict"])
    assert strict.exit_code != 0 and "ep000000" in strict.output


def test_bad_options_fail_with_the_valid_choices(runs, tmp_path):
    result = CliRunner().invoke(app, ["build-curriculum", str(runs[0]), "--out", str(tmp_path / "x"), "--tiers", "solo"])
    assert result.exit_code != 0 and "valid tiers" in result.output
    with pytest.raises(BuildError, match="version"):
        exclude = tmp_path / "bad.json"
        exclude.write_text("{}")
        build_curriculum(runs[:1], tmp_path / "y", BuildOptions(exclude=str(exclude)), progress=False)


def test_split_is_per_run_so_a_one_episode_drill_run_trains(dataset):
    out, manifest, _ = dataset
    counts = manifest["counts"]["single-action"]
    assert counts["train"] > 0  # the drill run has one episode: it must not vanish into val
    assert manifest["episodes"]["split"]["val"]  # the 3-episode match run still gives val


def test_clip_ids_do_not_depend_on_where_a_key_file_lay(tmp_path):
    from wantofight.annotate.episode import load_episode
    from wantofight.collect.run import RunSettings, collect

    ids = []
    for folder in ("a", "b"):
        keyfile = tmp_path / folder / "walk.keys"
        keyfile.parent.mkdir()
        keyfile.write_text("20 RIGHT LEFT\n4 A -\n")
        out = tmp_path / folder / "run"
        collect(RunSettings(policy=f"keys:{keyfile}", state="Fight", episodes=1, fps=60), out, progress=False)
        ids.append(load_episode(out / "episodes" / "ep000000").identity())
    assert ids[0] == ids[1]


def test_no_action_clip_of_the_drill_and_matches_is_a_pulse(dataset):
    """The README's drill + match recipe: every action clip acts for at least its tier's minimum
    (there were 32 dual-action clips of 3-6 frames, each one row of a flickering walk-in)."""
    from wantofight.annotate.clips import MIN_ACTION_FRAMES

    out, manifest, _ = dataset
    for tier in ("single-action", "dual-action"):
        clips = rows(out, tier)
        assert clips, tier
        for clip in clips:
            neutral = [a1 == a2 == "idle" and k1 == k2 == 0 for a1, a2, k1, k2 in
                       zip(clip["p1_action"], clip["p2_action"], clip["p1_keys"], clip["p2_keys"])]
            acting = len(neutral) - sum(neutral)
            assert acting * clip["frame_skip"] >= 8, (tier, clip["num_frames"], clip["p1_move"], clip["p2_move"])
    assert {t: manifest["tiers"][t]["min_action_frames"] for t in MIN_ACTION_FRAMES} == MIN_ACTION_FRAMES
    assert set(MIN_ACTION_FRAMES.values()) == {8}  # as docs/curriculum.md says


def test_a_key_pulse_makes_no_action_clip(tmp_path):
    """One-row presses (a tap, a flickering walk) are shorter than the action tiers' minimum and give no clip;
    a real walk of both players gives a dual-action clip, a real punch a single-action one."""
    from wantofight.collect.run import RunSettings, collect

    keyfile = tmp_path / "pulses.keys"
    keyfile.write_text("10 - -\n1 RIGHT LEFT\n10 - -\n1 RIGHT -\n10 - -\n8 RIGHT LEFT\n10 - -\n2 A -\n30 - -\n")
    run = tmp_path / "run"
    collect(RunSettings(policy=f"keys:{keyfile}", state="Fight", episodes=1, fps=60), run, progress=False)
    out = tmp_path / "ds"
    build_curriculum([run], out, BuildOptions(tiers=("single-action", "dual-action"), val_fraction=0, balance=False),
                     progress=False)
    clips = sorted(rows(out), key=lambda c: c["start_frame"])
    assert [(c["tier"], c["p1_move"], c["p2_move"]) for c in clips] == [
        ("dual-action", "walk_forward", "walk_forward"), ("single-action", "light_punch", None)]


def test_exact_duplicate_episodes_are_used_once_with_a_note(tmp_path):
    """A key-file run of 2 episodes holds the same episode twice (same start state, same keys): the
    build uses it once, says so, and lists the duplicate in the manifest."""
    keyfile = tmp_path / "walk.keys"
    keyfile.write_text("10 - -\n8 RIGHT LEFT\n10 - -\n2 A -\n30 - -\n")
    runner = CliRunner()
    for name, episodes in (("once", 1), ("twice", 2)):
        result = runner.invoke(app, ["collect", "--policy", f"keys:{keyfile}", "--state", "Fight", "--fps", "60",
                                     "--episodes", str(episodes), "--out", str(tmp_path / name), "--no-progress"])
        assert result.exit_code == 0, result.output
    built = {}
    for name in ("once", "twice"):
        out = tmp_path / f"ds-{name}"
        result = runner.invoke(app, ["build-curriculum", str(tmp_path / name), "--out", str(out), "--tiers",
                                     "single,dual", "--val-fraction", "0", "--no-progress"])
        assert result.exit_code == 0, result.output
        built[name] = (result.output, json.loads((out / "manifest.json").read_text()))
    output, manifest = built["twice"]
    assert "ep000001" in output and "same start state and keys as" in output and "ep000000" in output
    assert manifest["episodes"]["used"] == 1
    assert manifest["episodes"]["duplicates"] == [{"path": str(tmp_path / "twice" / "episodes" / "ep000001"),
                                                   "same_as": str(tmp_path / "twice" / "episodes" / "ep000000")}]
    assert manifest["counts"] == built["once"][1]["counts"] and manifest["clips"] == 2
