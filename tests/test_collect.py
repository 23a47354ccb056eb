"""`wtf collect` / `wtf replay` / `wtf games` on the real emulator with the built-in game."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from wantofight.cli import app
from wantofight.collect import episode_files
from wantofight.collect.game_registry import resolve_game
from wantofight.collect.keyfile import read_key_file
from wantofight.collect.keys import mask_of
from wantofight.collect.replay import verify_episode
from wantofight.video import VideoWriter, iter_frames, open_video, read_video

runner = CliRunner()
DUEL = resolve_game("duel").info
EPISODE_FILES = {"video.mp4", "frames.parquet", "meta.json", "start.state", "inputs.bk2"}


def episodes(run: Path) -> list[Path]:
    return episode_files.complete_episodes(run / "episodes")


def frames_table(episode: Path) -> dict:
    return pq.read_table(episode / "frames.parquet").to_pydict()


# ---------------------------------------------------------------------------------------------
# Alignment: key-file recordings


def test_keys_recording_matches_the_file_and_presses_act_on_their_row(tmp_path, recorded):
    keyfile = tmp_path / "walk.keys"
    keyfile.write_text("10 - -\n12 RIGHT -\n6 - -\n8 - RIGHT\n")
    run = recorded(policy=f"keys:{keyfile}", state="Fight", fps=60, episodes=1)
    (episode,) = episodes(run)
    rows = frames_table(episode)
    right = mask_of(["RIGHT"])
    assert len(rows["frame_index"]) == 1 + 36  # row 0 + every row of the file
    assert rows["p1_keys"] == [0] * 11 + [right] * 12 + [0] * 14
    assert rows["p2_keys"] == [0] * 29 + [right] * 8
    x1, x2 = np.array(rows["p1_x"]), np.array(rows["p2_x"])
    step = DUEL["walk_speed"]["forward"]
    # P1 faces right at x 96: RIGHT walks toward P2, moving p1_x from the row it is pressed (RAM has no lag).
    assert (x1[:11] == x1[0]).all()
    np.testing.assert_array_equal(np.diff(x1[10:23]), [step] * 12)
    assert (x1[23:] == x1[22]).all()
    # P2 faces left: RIGHT walks away from P1 (walk back), moving only p2_x.
    assert (x2[:29] == x2[0]).all() and x2[29] > x2[28] and x2[-1] > x2[0]
    meta = json.loads((episode / "meta.json").read_text())
    assert meta["ended_by"] == "policy_finished" and meta["frame_count"] == 37
    assert meta["key_layout_version"] == 1 and meta["frame_skip"] == 1


def test_fps30_holds_each_row_for_two_emulator_steps(tmp_path, recorded):
    keyfile = tmp_path / "walk.keys"
    keyfile.write_text("5 - -\n6 RIGHT -\n")
    run = recorded(policy=f"keys:{keyfile}", state="Fight", fps=30, episodes=1)
    (episode,) = episodes(run)
    rows = frames_table(episode)
    x1 = np.array(rows["p1_x"])
    assert rows["p1_keys"] == [0] * 6 + [mask_of(["RIGHT"])] * 6
    np.testing.assert_array_equal(np.diff(x1[5:]), [2 * DUEL["walk_speed"]["forward"]] * 6)
    assert verify_episode(episode).ok


# ---------------------------------------------------------------------------------------------
# Replay


@pytest.mark.parametrize("policy", ["idle", "random", "mash", "scripted", "drill"])
def test_replay_verifies_every_policy(recorded, policy):
    run = recorded(policy=policy, episodes=1, max_frames=240, fps=30)
    (episode,) = episodes(run)
    assert set(p.name for p in episode.iterdir()) == EPISODE_FILES
    result = runner.invoke(app, ["replay", str(episode), "--verify"])
    assert result.exit_code == 0, result.output
    assert "240 rows" in result.output


def test_replay_fails_on_a_tampered_recording(tmp_path, recorded):
    import shutil

    import pyarrow as pa

    source = episodes(recorded(policy="scripted", episodes=1, max_frames=240, fps=30))[0]
    for column, row in (("p1_health", 200), ("p2_keys", 120)):
        episode = tmp_path / column
        shutil.copytree(source, episode)
        table = pq.read_table(episode / "frames.parquet")
        values = table.column(column).to_pylist()
        values[row] = values[row] ^ 1
        index = table.schema.get_field_index(column)
        table = table.set_column(index, column, pa.array(values, type=table.schema.field(column).type))
        pq.write_table(table, episode / "frames.parquet")
        result = runner.invoke(app, ["replay", str(episode), "--verify"])
        assert result.exit_code != 0
        assert f"row {row}" in result.output and column in result.output


def test_replay_rejects_an_incomplete_folder(tmp_path):
    result = runner.invoke(app, ["replay", str(tmp_path), "--verify"])
    assert result.exit_code != 0 and "missing meta.json" in result.output


# ---------------------------------------------------------------------------------------------
# Policies


def key_runs(keys: np.ndarray) -> list[int]:
    """Lengths of the runs of rows with some key held."""
    held = np.concatenate([[False], keys != 0, [False]])
    edges = np.flatnonzero(np.diff(held.astype(np.int8)))
    return list(edges[1::2] - edges[::2])


@pytest.mark.parametrize("fps", [60, 30])
def test_the_drill_holds_its_walk_in_instead_of_pulsing_it(recorded, fps):
    """The README's drill run: before a dual drill both fighters walk in holding the key until in place
    (it used to be pressed only on neutral rows, so the walk flickered on and off every row)."""
    (episode,) = episodes(recorded(policy="drill", fps=fps, episodes=1, max_frames=2000))
    rows = frames_table(episode)
    for player in (1, 2):
        lengths = key_runs(np.array(rows[f"p{player}_keys"]))
        assert lengths and min(lengths) >= 2, f"P{player} key runs of one row: {lengths.count(1)} of {len(lengths)}"


@pytest.mark.parametrize("policies, identical", [
    (["--policy", "keys:{keys}"], True),
    (["--policy", "idle"], True),
    (["--policy", "keys:{keys}", "--p2-policy", "idle"], True),
    (["--policy", "keys:{keys}", "--p2-policy", "random"], False),
    (["--policy", "scripted"], False),
])
def test_a_run_whose_episodes_cannot_differ_says_so_in_one_line(tmp_path, policies, identical):
    """Key files replay as written and idle never varies: two such players record the same episode
    every time, and the run warns (once); a seeded player makes the episodes differ, without a warning."""
    keys = tmp_path / "walk.keys"
    keys.write_text("20 RIGHT LEFT\n4 A -\n")
    args = [a.format(keys=keys) for a in policies]
    result = runner.invoke(app, ["collect", *args, "--state", "Fight", "--max-frames", "40", "--out",
                                 str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    first, second = (frames_table(e) for e in episodes(tmp_path / "run"))
    assert (first == second) is identical
    if identical:
        assert len(warnings) == 1 and "identical" in warnings[0], result.output
    else:
        assert not warnings, result.output


# ---------------------------------------------------------------------------------------------
# Determinism, resume, crashes


def test_same_seed_gives_identical_episodes(tmp_path, recorded):
    first = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=150, seed=7)
    second = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=150, seed=7, workers=2)
    other = recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=150, seed=8)
    for a, b in zip(episodes(first), episodes(second)):
        assert a.name == b.name
        assert frames_table(a) == frames_table(b)
        assert (a / "video.mp4").read_bytes() == (b / "video.mp4").read_bytes()
        assert json.loads((a / "meta.json").read_text()) == json.loads((b / "meta.json").read_text())
    assert frames_table(episodes(first)[0]) != frames_table(episodes(other)[0])


def wtf(*args: str, **kwargs) -> subprocess.Popen:
    command = [sys.executable, "-m", "wantofight.cli", *args, "--no-progress"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            **kwargs)


def wait_for_episode(out: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not episodes(out):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "no episode was published in time"
        time.sleep(0.05)


@pytest.mark.slow
def test_kill_9_leaves_only_complete_episodes_and_resume_completes_the_run(tmp_path, recorded):
    out = tmp_path / "killed"
    args = ["collect", "--policy", "random", "--episodes", "4", "--max-frames", "300", "--fps", "60",
            "--seed", "3", "--out", str(out)]
    proc = wtf(*args)
    wait_for_episode(out, proc)
    time.sleep(0.3)  # let the next episode get half-written
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = episodes(out)
    assert 1 <= len(done) < 4
    for episode in done:
        assert set(p.name for p in episode.iterdir()) == EPISODE_FILES
        meta = json.loads((episode / "meta.json").read_text())
        assert len(frames_table(episode)["frame_index"]) == meta["frame_count"] == 300

    result = runner.invoke(app, ["collect", "--resume", "--episodes", "4", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert [e.name for e in episodes(out)] == [f"ep{i:06d}" for i in range(4)]
    assert not list((out / "episodes").glob(".tmp-*"))
    straight = recorded(policy="random", episodes=4, max_frames=300, fps=60, seed=3)
    for a, b in zip(episodes(out), episodes(straight)):
        assert frames_table(a) == frames_table(b)


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_keeps_finished_episodes(tmp_path):
    out = tmp_path / "interrupted"
    proc = wtf("collect", "--policy", "random", "--episodes", "6", "--max-frames", "300", "--fps", "60",
               "--out", str(out))
    wait_for_episode(out, proc)
    os.killpg(proc.pid, signal.SIGINT)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, output
    assert "--resume" in output
    assert not list((out / "episodes").glob(".tmp-*"))
    assert all(verify_episode(e).ok for e in episodes(out)[:1])


def test_resume_refuses_conflicting_settings_and_plain_rerun_refuses_existing_run(recorded):
    out = recorded(policy="idle", episodes=1, max_frames=30)
    result = runner.invoke(app, ["collect", "--out", str(out), "--policy", "idle", "--episodes", "1"])
    assert result.exit_code != 0 and "already holds a run" in result.output
    result = runner.invoke(app, ["collect", "--out", str(out), "--resume", "--policy", "random"])
    assert result.exit_code != 0 and "policy='random' differs" in result.output


# ---------------------------------------------------------------------------------------------
# Bad input: one line, non-zero exit, nothing written


@pytest.mark.parametrize(
    "args, message",
    [
        (["--game", "tekken"], "unknown game 'tekken'; valid games: duel"),
        (["--policy", "smart"], "unknown policy 'smart'; valid policies: idle, random, mash, scripted, drill, keys:PATH, ppo:CHECKPOINT, ppo-ladder:DIR"),
        (["--state", "Nowhere"], "unknown state 'Nowhere' for duel; valid states:"),
        (["--game", "MortalKombatII-Genesis"], "python -m stable_retro.import PATH"),
        (["--policy", "keys:/nonexistent.keys"], "cannot read key file /nonexistent.keys"),
        (["--fps", "25"], "--fps 25 is not supported; valid: 60, 30"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--game", "Airstriker-Genesis", "--policy", "scripted"], "which Airstriker-Genesis-v0 does not map"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    result = runner.invoke(app, ["collect", *args, "--out", str(out)])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert len(result.output.strip().splitlines()) <= 2  # one message (rich may wrap once)
    assert not out.exists()


def test_a_built_in_key_file_plays_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a folder without the repository's collect/
    result = runner.invoke(app, ["collect", "--policy", "keys:duel/walk-under-a", "--episodes", "1",
                                 "--max-frames", "40", "--out", "run"])
    assert result.exit_code == 0, result.output
    frames = pq.read_table(tmp_path / "run" / "episodes" / "ep000000" / "frames.parquet")
    expected = read_key_file("duel/walk-under-a")
    assert frames.num_rows == 40 and any(frames["p1_keys"].to_pylist())  # rows 31-37 walk in
    assert frames["p1_keys"].to_pylist()[1:] == expected.p1[:39].tolist()
    assert frames["p2_keys"].to_pylist()[1:] == expected.p2[:39].tolist()


def test_bad_key_file_line_is_named(tmp_path):
    keyfile = tmp_path / "bad.keys"
    keyfile.write_text("4 RIGHT -\n2 PUNCH -\n")
    result = runner.invoke(app, ["collect", "--policy", f"keys:{keyfile}", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "bad.keys:2: unknown key 'PUNCH'" in " ".join(result.output.split())


def test_a_full_disk_is_a_clear_error_and_leaves_no_partial_episode(tmp_path):
    """`ulimit -f` makes writes past 200 KiB fail with EFBIG, as a full disk fails with ENOSPC."""
    out = tmp_path / "full"
    command = (f"ulimit -f 200; {sys.executable} -m wantofight.cli collect --policy random --episodes 1 "
               f"--max-frames 600 --fps 60 --no-progress --out {out}")
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"cannot write episodes to {out / 'episodes'}: File too large" in " ".join(proc.stderr.split())
    assert list((out / "episodes").iterdir()) == []


def test_unwritable_out_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = runner.invoke(app, ["collect", "--policy", "idle", "--out", str(blocker / "run")])
    assert result.exit_code == 2 and "cannot write to --out" in result.output


# ---------------------------------------------------------------------------------------------
# Games


def test_games_lists_the_builtin_game():
    result = runner.invoke(app, ["games"])
    assert result.exit_code == 0 and "duel" in result.output and "Nes" in result.output
    result = runner.invoke(app, ["games", "--all"])
    assert "Airstriker-Genesis-v0" in result.output


def test_imported_one_player_game_records_with_p2_keys_zero(recorded):
    run = recorded(game="Airstriker-Genesis", policy="random", episodes=1, max_frames=120, fps=60)
    (episode,) = episodes(run)
    rows = frames_table(episode)
    assert not any(rows["p2_keys"]) and any(rows["p1_keys"])
    meta = json.loads((episode / "meta.json").read_text())
    assert meta["platform"] == "Genesis" and meta["retro_game"] == "Airstriker-Genesis-v0"
    assert verify_episode(episode).ok


def test_video_is_lossless_against_the_emulator(recorded):
    """Decoded frames are bit-identical to the screens (replay compares them row by row)."""
    (episode,) = episodes(recorded(policy="scripted", episodes=1, max_frames=240, fps=30))
    frames = read_video(episode / "video.mp4")
    assert frames.shape[0] == 240 and frames.shape[3] == 3
    assert len(np.unique(frames[-1].reshape(-1, 3), axis=0)) > 4  # a real picture, not a flat screen
    streamed = np.stack(list(iter_frames(episode / "video.mp4")))  # the other decoder (PyAV, in order)
    assert np.array_equal(streamed, frames)
    with open_video(episode / "video.mp4") as reader:  # decord's random access, rows out of order
        assert np.array_equal(reader.get_batch([200, 3, 117]).asnumpy(), frames[[200, 3, 117]])


def test_every_mp4_is_written_by_the_one_writer(tmp_path):
    """`VideoWriter` is the project's only MP4 encoder (no other module opens an encoder stream), and its
    two codecs are the recordings' lossless, bit-exact RGB and a lossy preview a browser plays
    (H.264 yuv420p with the index before the data)."""
    import io

    import av

    root = Path(__file__).resolve().parents[1]
    rooms = ("wantofight", "wantofight_model", "collect", "annotate", "datasets", "inference", "train", "export",
             "benchmark", "play", "bench")
    encoders = [f"{path.relative_to(root)}:{n}" for room in rooms for path in sorted((root / room).rglob("*.py"))
                for n, line in enumerate(path.read_text().splitlines(), 1) if ".add_stream(" in line]
    assert encoders and all(e.startswith("wantofight/video.py:") for e in encoders), encoders
    rng = np.random.default_rng(0)
    frames = (rng.random((6, 32, 64, 3)) * 255).astype(np.uint8)
    lossless = []
    for _ in range(2):
        buffer = io.BytesIO()
        writer = VideoWriter(buffer, 30, 64, 32)
        for frame in frames:
            writer.write(frame)
        writer.close()
        lossless.append(buffer.getvalue())
    assert lossless[0] == lossless[1] and np.array_equal(read_video(lossless[0]), frames)
    preview = tmp_path / "preview.mp4"
    writer = VideoWriter(preview, 30, 64, 32, preview_crf=18)
    for frame in frames:
        writer.write(frame)
    writer.close()
    with av.open(str(preview)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.codec_context.pix_fmt, stream.frames) == ("h264", "yuv420p", 6)
    data = preview.read_bytes()
    assert data.index(b"moov") < data.index(b"mdat")


def test_ctrl_c_while_a_video_opens_prints_no_traceback(monkeypatch, recorded):
    """A KeyboardInterrupt inside decord's VideoReader.__init__ (Ctrl-C at the wrong moment) must not
    leave a half-built reader whose __del__ prints an "Exception ignored" traceback to stderr."""
    import gc

    import decord

    (episode,) = episodes(recorded(policy="scripted", episodes=1, max_frames=240, fps=30))

    def interrupted_init(self, *args, **kwargs):
        raise KeyboardInterrupt

    unraisable = []
    monkeypatch.setattr(decord.VideoReader, "__init__", interrupted_init)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(KeyboardInterrupt):
        read_video(episode / "video.mp4")
    gc.collect()
    assert unraisable == []


# ---------------------------------------------------------------------------------------------
# Packaging


@pytest.mark.parametrize("where", ["elsewhere", "repository root"])
def test_hugging_face_datasets_imports_beside_ours(tmp_path, where):
    """From anywhere, including the repo root where our `datasets/` folder is first on sys.path."""
    code = (
        "import datasets, wantofight.datasets, wantofight.collect, wantofight_model;"
        "assert hasattr(datasets, 'load_dataset'), datasets.__file__;"
        "assert 'site-packages' in datasets.__file__, datasets.__file__;"
        "assert wantofight.datasets.__name__ == 'wantofight.datasets'"
    )
    cwd = tmp_path if where == "elsewhere" else Path(__file__).parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=cwd)


def test_help_is_fast_and_lists_commands():
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "wantofight.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for command in ("collect", "replay", "games"):
        assert command in proc.stdout
    assert time.perf_counter() - started < 10


def test_ctrl_c_while_decord_frees_a_reader_still_stops_the_command(monkeypatch, recorded):
    """decord frees a reader in its __del__, where a KeyboardInterrupt is printed and dropped: the
    command would run on to exit 0 after the user's Ctrl-C (seen once in `wtf benchmark run`). The
    Ctrl-C must come out of read_video, with nothing printed."""
    import decord.video_reader

    (episode,) = episodes(recorded(policy="scripted", episodes=1, max_frames=240, fps=30))
    free = decord.video_reader._CAPI_VideoReaderFree

    def free_then_ctrl_c(handle):
        free(handle)
        signal.raise_signal(signal.SIGINT)  # as a terminal's Ctrl-C landing during the free

    unraisable = []
    monkeypatch.setattr(decord.video_reader, "_CAPI_VideoReaderFree", free_then_ctrl_c)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(KeyboardInterrupt):
        read_video(episode / "video.mp4")
    assert unraisable == []
