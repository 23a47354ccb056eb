"""`wtf play`: the key map, the window's rows (taps, pause, quit), and whole sessions under Xvfb driven by
real X key events (xdotool), recorded exactly like `wtf collect` episodes.

CI installs Xvfb and xdotool (`.ci/run`); without them the session tests fail (they do not skip).
"""

from __future__ import annotations

import json
import os
import re
import shutil
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
from wantofight.collect.keys import SLOT_INDEX, SLOTS
from wantofight.collect.replay import verify_episode
from wantofight.play.controls import KeyMap, KeyMapError, controller_mask

ROOT = Path(__file__).resolve().parent.parent
KEYMAP = KeyMap.load()
GAME = json.loads((ROOT / "collect" / "games" / "duel" / "game.json").read_text())
RIGHT, A = 1 << SLOT_INDEX["RIGHT"], 1 << SLOT_INDEX["A"]
runner = CliRunner()


# ---------------------------------------------------------------------------------------------
# The key map


def test_every_player_has_one_key_per_slot_and_no_key_has_two_jobs(window):
    pygame = window.pygame
    for slots in KEYMAP.players:
        assert list(slots) == list(SLOTS)
    names = [k for slots in KEYMAP.players for k in slots.values()] + list(KEYMAP.pause) + list(KEYMAP.quit)
    assert len(set(names)) == len(names)
    assert all(pygame.key.key_code(name) for name in names)  # pygame knows every name


def test_a_key_map_that_gives_a_key_two_jobs_is_refused():
    with pytest.raises(KeyMapError, match="'d' is mapped to both p1 RIGHT and p2 A"):
        KeyMap(({"RIGHT": "d"}, {"A": "d"}), ("p",), ("escape",), ("A",), 0.5)


def test_docs_key_table_is_the_key_map():
    """docs/play.md's table lists each slot's P1 and P2 key as keymap.json has them."""
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| `(.+?)` \| `(.+?)` \|$", (ROOT / "docs" / "play.md").read_text(), re.M)
    expected = [(slot, KEYMAP.players[0][slot], KEYMAP.players[1][slot]) for slot in SLOTS]
    assert [(slot, p1, p2) for slot, _, p1, p2 in rows] == expected


def test_a_controller_reads_its_pad_stick_and_buttons():
    mask = controller_mask([True, False, False, False, False, False, False, True], (1, 0), (0.0, 0.9), KEYMAP)
    assert mask == A | RIGHT | 1 << SLOT_INDEX["DOWN"] | 1 << SLOT_INDEX["START"]
    assert controller_mask([], (0, 0), (-0.3, 0.2), KEYMAP) == 0  # the stick leans less than the threshold


# ---------------------------------------------------------------------------------------------
# The window's rows, on SDL's offscreen driver: taps, pause, quit


@pytest.fixture
def window(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "offscreen")
    from wantofight.play.window import Window

    win = Window("test", (224, 240), KEYMAP, humans=(0, 1), fps=60, scale=1)
    yield win
    win.close()


def press(window, key: str) -> None:
    pg = window.pygame
    window.pygame.event.post(pg.event.Event(pg.KEYDOWN, key=pg.key.key_code(key), mod=0, unicode="", scancode=0))


def test_a_tap_shorter_than_a_row_lands_in_one_row(window):
    frame = np.zeros((224, 240, 3), dtype=np.uint8)
    press(window, KEYMAP.players[0]["RIGHT"])
    press(window, KEYMAP.players[1]["A"])
    assert window.on_row(0, frame, {}, (0, 0)) is False
    assert window.masks == (RIGHT, A)
    window.on_row(1, frame, {}, window.masks)
    assert window.masks == (0, 0)  # released before it was read again


def test_pause_holds_the_row_until_pressed_again_and_escape_quits(window):
    pg = window.pygame
    frame = np.zeros((224, 240, 3), dtype=np.uint8)
    press(window, "p")
    resume = pg.event.Event(pg.KEYDOWN, key=pg.key.key_code("p"), mod=0, unicode="", scancode=0)
    pg.time.set_timer(resume, 300, loops=1)
    started = time.perf_counter()
    assert window.on_row(0, frame, {}, (0, 0)) is False
    assert time.perf_counter() - started >= 0.28
    assert len(window.timing.pauses) == 1 and window.timing.pauses[0][1] >= 0.25
    press(window, "escape")
    assert window.on_row(1, frame, {}, (0, 0)) is True


# ---------------------------------------------------------------------------------------------
# Sessions under Xvfb, driven by X key events


XVFB: dict[str, tuple[subprocess.Popen, Path]] = {}
"""The running Xvfb of each display name, and its log."""


@pytest.fixture(scope="module")
def display(tmp_path_factory):
    """A private Xvfb server in a session of its own (no signal to the test's process group reaches it);
    its display name."""
    for tool in ("Xvfb", "xdotool"):
        if not shutil.which(tool):
            pytest.fail(f"the play tests need {tool}: apt-get install -y xvfb xdotool")
    log = tmp_path_factory.mktemp("xvfb") / "xvfb.log"
    read, write = os.pipe()
    with log.open("w") as err:
        server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x1024x24", "-nolisten",
                                   "tcp"], pass_fds=(write,), stderr=err, start_new_session=True)
    os.close(write)
    with os.fdopen(read) as pipe:
        name = f":{pipe.readline().strip()}"
    XVFB[name] = (server, log)
    yield name
    del XVFB[name]
    server.terminate()
    server.wait(timeout=10)


def check_display(display: str) -> None:
    """The X server is alive and answers, or the test fails saying so (not as a window that did not open)."""
    server, log = XVFB[display]
    assert server.poll() is None, f"Xvfb {display} exited ({server.returncode}): {log.read_text()[-2000:]}"
    probe = subprocess.run(["xdotool", "getmouselocation"], env={**os.environ, "DISPLAY": display},
                           capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0, f"Xvfb {display} does not answer ({probe.stderr.strip()}): {log.read_text()[-2000:]}"


def start_play(display: str, *args: str) -> subprocess.Popen:
    check_display(display)
    env = {**os.environ, "DISPLAY": display}
    env.pop("WAYLAND_DISPLAY", None)
    return subprocess.Popen([sys.executable, "-m", "wantofight.cli", "play", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


X_KEYSYMS = {"escape": "Escape", "pause": "Pause", "up": "Up", "down": "Down", "left": "Left", "right": "Right",
             "[": "bracketleft", "]": "bracketright"}


def keysym(name: str) -> str:
    """A pygame key name of keymap.json → the X keysym xdotool types."""
    return X_KEYSYMS.get(name, name)


def xdotool(display: str, *args: str) -> str:
    out = subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": display}, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout


def wait_for_window(display: str, proc: subprocess.Popen) -> None:
    """Until the play window is mapped; then give it the keyboard focus."""
    deadline = time.monotonic() + 60
    while True:
        # by process: xdotool's --name misses SDL's UTF-8 WM_NAME
        found = subprocess.run(["xdotool", "search", "--onlyvisible", "--pid", str(proc.pid)], capture_output=True,
                               text=True, env={**os.environ, "DISPLAY": display})
        if found.stdout.strip():
            xdotool(display, "windowfocus", "--sync", found.stdout.split()[0])
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no play window after 60 s"
        time.sleep(0.1)


@pytest.mark.slow
def test_two_people_at_one_keyboard_are_recorded_like_collect(display, tmp_path):
    """P1 holds RIGHT for a second, P2 punches, Esc: the recording has the keys, the fighters reacted,
    it replays exactly and goes through annotate and build-curriculum."""
    run = tmp_path / "session"
    # Fight: the savestate of the fighting phase's first frame (Start has a 60-frame intro when nobody acts)
    proc = start_play(display, "--p1", "human", "--p2", "human", "--state", "Fight", "--record", str(run),
                      "--seed", "3")
    try:
        wait_for_window(display, proc)
        time.sleep(1.0)  # the window opens before the first row
        xdotool(display, "keydown", keysym(KEYMAP.players[0]["RIGHT"]))
        time.sleep(1.0)
        xdotool(display, "keyup", keysym(KEYMAP.players[0]["RIGHT"]))
        time.sleep(0.3)
        xdotool(display, "key", keysym(KEYMAP.players[1]["A"]))
        time.sleep(0.5)
        xdotool(display, "key", keysym(KEYMAP.quit[0]))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    episode = run / "episodes" / "ep000000"
    assert f"→ {episode.resolve()}" in out, out

    meta = json.loads((episode / "meta.json").read_text())
    assert meta["ended_by"] == "quit" and meta["fps"] == 60 and meta["seed"] == 3
    assert meta["policies"]["p1"]["spec"] == meta["policies"]["p2"]["spec"] == "human"
    rows = pq.read_table(episode / "frames.parquet").to_pydict()
    p1, p2 = np.array(rows["p1_keys"]), np.array(rows["p2_keys"])
    held = np.flatnonzero(p1 & RIGHT)
    assert np.all(np.diff(held) == 1), held  # one unbroken hold
    rate = float(re.search(r"at ([\d.]+) rows/s", out).group(1))  # 60 unless the machine is too busy
    assert 0.8 * rate <= len(held) <= 1.4 * rate, (len(held), rate)  # a second's rows
    assert not np.any(p1 & ~RIGHT) and not np.any(p2 & ~A)
    x = np.array(rows["p1_x"])
    assert np.all(np.diff(x[held[0] - 1:held[-1] + 1]) >= 1)  # walks (or pushes P2) in every row it is held
    assert np.all(x[:held[0]] == x[0])  # and stood still before
    punch = np.flatnonzero(p2 & A)
    assert len(punch) == 1 and punch[0] > held[-1]
    states, moves = np.array(rows["p2_state"]), np.array(rows["p2_move"])
    light_punch = next(m["id"] for m in GAME["moves"] if m["name"] == "light_punch")
    assert states[punch[0]] == GAME["state_ids"]["attack"] and moves[punch[0]] == light_punch  # acts in its row

    assert verify_episode(episode).ok
    result = runner.invoke(app, ["annotate", str(run), "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["build-curriculum", str(run), "--out", str(tmp_path / "ds"), "--clip-frames", "33",
                                 "--val-fraction", "0", "--no-progress"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["clips"] >= 1 and sum(c["train"] for c in manifest["counts"].values()) == manifest["clips"]


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_recording_and_exits_130(display, tmp_path):
    run = tmp_path / "watched"
    proc = start_play(display, "--p1", "scripted", "--p2", "mash", "--record", str(run))
    try:
        wait_for_window(display, proc)
        time.sleep(1.0)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    assert time.monotonic() - sent < 5
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stopped: ") and "rows are kept" in lines[0], err
    episode = run / "episodes" / "ep000000"
    assert json.loads((episode / "meta.json").read_text())["ended_by"] == "quit"
    assert [p.name for p in (run / "episodes").iterdir()] == ["ep000000"]  # no temporary folder left
    assert verify_episode(episode).ok


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--p2", "boxer"], {}, r"--p2: unknown player 'boxer'; valid: human, idle, .*ppo-ladder:DIR"),
        (["--record", "{full}"], {}, r"--record .*full exists and is not empty; give a new or empty folder"),
        (["--record", "{new}"], {"DISPLAY": None}, r"no display: DISPLAY is not set; .*xvfb-run"),
        (["--record", "{new}", "--scale", "0"], {}, r"--scale must be 1 to 8, got 0"),
    ],
    ids=["unknown-player", "record-dir-not-empty", "no-display", "bad-scale"],
)
def test_bad_input_is_one_line_naming_it_and_writes_nothing(display, tmp_path, args, env, message):
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    args = [a.format(full=full, new=tmp_path / "new") for a in args]
    run_env = {**os.environ, "DISPLAY": display, **{k: v for k, v in env.items() if v is not None}}
    for name in (k for k, v in env.items() if v is None):
        run_env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "wantofight.cli", "play", *args], capture_output=True, text=True,
                          env=run_env, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert len(output.strip().splitlines()) == 1 and re.search(message, output), output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # no --record folder made
    assert [p.name for p in full.iterdir()] == ["notes.txt"]


# ---------------------------------------------------------------------------------------------
# --checkpoint: a tiny stage-2 model's streaming generation on the same keys, the emulator beside it


def test_a_chunk_takes_every_key_read_since_the_last_one():
    from wantofight.play.model import spread

    R = (RIGHT, 0)
    rows = spread([(0, 0)] * 7 + [R] + [(0, 0)] * 8, 8, (0, 0))  # a one-row tap among 16 reads
    assert rows[:, 0].tolist() == [0, 0, 0, RIGHT, 0, 0, 0, 0]
    assert spread([R, (0, A)], 8, (0, 0)).tolist() == [[RIGHT, 0]] * 4 + [[0, A]] * 4  # fewer reads than rows
    assert spread([], 8, (0, A)).tolist() == [[0, A]] * 8  # none (the model outran the window): the keys held


def model_session(display: str, monkeypatch, settings, player, seconds: float = 120):
    """`play_model(settings)` in this process under Xvfb, with `player(until)` in a thread once the window
    has the focus: `until(n)` waits (at most `seconds`) until the model has started its n-th chunk, the
    session's own clock for key presses. Returns the session's ModelPlayResult."""
    import threading

    from wantofight.play import model

    check_display(display)
    monkeypatch.setenv("DISPLAY", display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    taken = []  # one entry per chunk the model started
    take = model.KeyFeed.take
    monkeypatch.setattr(model.KeyFeed, "take", lambda self: taken.append(1) or take(self))

    def until(chunks: int) -> None:
        deadline = time.monotonic() + seconds
        while len(taken) < chunks and time.monotonic() < deadline:
            time.sleep(0.01)

    def run() -> None:
        wait_for_window(display, type("Me", (), {"pid": os.getpid(), "poll": lambda self: None})())
        player(until)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    result = model.play_model(settings)
    thread.join(timeout=60)
    return result


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny stage-2 checkpoint (one step of training on synthetic latents: it draws noise, fast)."""
    from train_helpers import tiny_stage2_checkpoint

    return tiny_stage2_checkpoint(tmp_path_factory.mktemp("ckpt") / "s2")


@pytest.mark.slow
def test_keys_drive_the_models_next_chunks_and_the_emulator_beside_it(display, checkpoint, monkeypatch):
    """In this process under Xvfb: P1 presses RIGHT after the model's second chunk started and lets go after
    its fourth, then Esc. The chunks taken before the press have no RIGHT, the ones taken while it was
    held have it, the emulator beside the model walks P1 right on the rows that hold it, and the window
    kept reading keys and showing rows while the model worked."""
    from wantofight.play import model

    def player(until) -> None:
        until(2)
        xdotool(display, "keydown", keysym(KEYMAP.players[0]["RIGHT"]))
        until(4)
        xdotool(display, "keyup", keysym(KEYMAP.players[0]["RIGHT"]))
        until(5)
        xdotool(display, "key", keysym(KEYMAP.quit[0]))

    result = model_session(display, monkeypatch, model.ModelPlaySettings(
        checkpoint=str(checkpoint), state="Fight", side_by_side=True, steps=1), player)

    right = [bool(np.any(chunk[:, 0] & RIGHT)) for chunk in result.chunks]
    assert len(right) >= 4 and right[:2] == [False, False] and right[2:4] == [True, True], right
    assert np.all(result.chunks[3][:, 0] & RIGHT)  # held during the whole chunk before it: every row
    assert not np.any(np.concatenate(result.chunks)[:, 1])  # P2 pressed nothing
    x = np.array(result.emulator_x)  # row 0, then one entry per generated row shown
    assert len(x) == result.rows + 1
    rows = np.concatenate(result.chunks)[:result.rows, 0]  # generated row r is rows[r - 1]
    held = np.flatnonzero(rows & RIGHT) + 1
    assert len(held) >= 1 and np.all(x[held] > x[held - 1])  # P1 walks right in the emulator on those rows
    assert np.all(x[1:held[0]] == x[0])  # and stood before them
    ticks = np.diff(result.timing.ticks)  # the window's rows, with or without a new generated frame
    assert len(ticks) > result.rows and np.median(ticks) < 0.05  # it kept its 30 rows/s while chunks generated


@pytest.mark.parametrize("fps", [60, 30])
def test_an_episode_prompt_is_the_emulators_row_0_beside_it(recorded, fps):
    """--first-frames EP: the prompt is the episode's row 0 and the emulator beside the model starts
    there, whatever fps the episode was recorded at (the session's rows are at 30)."""
    from wantofight.collect.game_registry import resolve_game
    from wantofight.video import read_video
    from wantofight.play.model import EmulatorPanel, ModelPlaySettings, first_frame

    episode = recorded(policy="random", episodes=1, max_frames=4, fps=fps, seed=2) / "episodes" / "ep000000"
    game = resolve_game("duel")
    frame, start, skip = first_frame(ModelPlaySettings("unused", first_frames=episode), game, game.default_state)
    assert np.array_equal(frame, read_video(episode / "video.mp4")[0])
    panel = EmulatorPanel(game, game.default_state, start, 30, skip)
    try:
        assert np.array_equal(panel.row((0, 0)), frame)
    finally:
        panel.close()


def test_checkpoint_sessions_refuse_what_they_cannot_do(tmp_path):
    for args, message in (
        (["--checkpoint", str(tmp_path / "nothing")], r"no checkpoint at .*nothing .*shipped"),
        (["--checkpoint", "x", "--record", str(tmp_path / "r")], r"--record applies to emulator sessions only"),
        (["--checkpoint", "x", "--p2", "scripted"], r"--p2 scripted: a --checkpoint session has two human players"),
        (["--side-by-side"], r"--side-by-side applies to --checkpoint sessions only"),
    ):
        result = runner.invoke(app, ["play", *args])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1 and re.search(message, result.output), result.output
    assert list(tmp_path.iterdir()) == []
