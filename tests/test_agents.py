"""`wtf agents train / eval` and the `ppo:` / `ppo-ladder:` collect policies, on the real emulator."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from wantofight.cli import app
from wantofight.collect import episode_files
from wantofight.collect.fight_env import ACTION_NVEC, EnvConfig, FightEnv, PlayerCodec, Tally, action_mask
from wantofight.collect.game_registry import resolve_game
from wantofight.collect.keys import mask_of
from wantofight.collect.policies import LEFT, RIGHT, PolicyError
from wantofight.collect.replay import verify_episode

runner = CliRunner()
DUEL = resolve_game("duel")
TINY = ["--envs", "2", "--checkpoint-every", "128", "--n-steps", "64", "--batch-size", "64", "--no-progress"]


def one_line(output: str) -> str:
    return " ".join(output.split())


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> Path:
    """A tiny training run: 2 env subprocesses, a few hundred steps, checkpoints every 128; it leaves
    nothing in the temp folder (stable-baselines3's default logger makes an SB3-<date> folder per run)."""
    import tempfile

    out = tmp_path_factory.mktemp("agents") / "run"
    temp, tempfile.tempdir = tempfile.tempdir, str(tmp_path_factory.mktemp("tmp"))
    try:
        result = runner.invoke(app, ["agents", "train", "--out", str(out), "--steps", "300", *TINY])
        left = list(Path(tempfile.tempdir).glob("SB3-*"))
    finally:
        tempfile.tempdir = temp
    assert result.exit_code == 0, result.output
    assert left == [], left
    return out


def episodes(run: Path) -> list[Path]:
    return episode_files.complete_episodes(run / "episodes")


def collect(out: Path, *args: str) -> list[Path]:
    result = runner.invoke(app, ["collect", *args, "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return episodes(out)


# ---------------------------------------------------------------------------------------------
# Training


def test_short_training_writes_checkpoints_that_load(trained):
    from wantofight.collect.ppo_policy import load_model

    names = sorted(p.name for p in (trained / "checkpoints").glob("*.zip"))
    # 2 envs × 64-step rollouts: 384 steps, a checkpoint each time a multiple of 128 is passed, plus step 0.
    assert names == ["step_0000000.zip", "step_0000128.zip", "step_0000256.zip", "step_0000384.zip"]
    model = load_model(trained / "final.zip")
    assert model.num_timesteps == 384
    assert model.wantofight == {"obs_version": 1, "game": "duel", "player": 1, "opponent": "scripted", "frame_skip": 2}
    assert tuple(model.action_space.nvec) == ACTION_NVEC
    log = [json.loads(line) for line in (trained / "log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 384 and log[-1]["steps_per_s"] > 0


def test_resume_continues_from_the_latest_checkpoint(tmp_path, trained):
    from wantofight.collect.ppo_policy import load_model

    run = tmp_path / "run"
    result = runner.invoke(app, ["agents", "train", "--out", str(run), "--steps", "128", *TINY])
    assert result.exit_code == 0, result.output
    again = runner.invoke(app, ["agents", "train", "--out", str(run), "--steps", "128", *TINY])
    assert again.exit_code == 2 and "add --resume" in one_line(again.output)
    conflict = runner.invoke(app, ["agents", "train", "--out", str(run), "--resume", "--seed", "5", *TINY])
    assert conflict.exit_code == 2 and "--resume: seed=5 differs from the run's 0" in one_line(conflict.output)
    resumed = runner.invoke(app, ["agents", "train", "--out", str(run), "--resume", "--steps", "300", "--no-progress"])
    assert resumed.exit_code == 0, resumed.output
    assert load_model(run / "final.zip").num_timesteps == 384  # 128 + two more 128-step rollouts
    nothing = runner.invoke(app, ["agents", "train", "--out", str(tmp_path / "new"), "--resume", *TINY])
    assert nothing.exit_code == 2 and "holds no training run" in one_line(nothing.output)


def test_resume_continues_from_the_newest_save_even_when_it_is_final_zip(tmp_path):
    """`--minutes` stops between checkpoints and writes final.zip: --resume continues from there."""
    from wantofight.collect.ppo_policy import load_model

    run = tmp_path / "run"
    result = runner.invoke(app, ["agents", "train", "--out", str(run), "--steps", "5000", "--minutes", "0.001", *TINY])
    assert result.exit_code == 0, result.output
    stopped_at = load_model(run / "final.zip").num_timesteps
    assert 0 < stopped_at < 5000
    resumed = runner.invoke(app, ["agents", "train", "--out", str(run), "--resume", "--steps", str(stopped_at + 1),
                                  "--no-progress"])
    assert resumed.exit_code == 0, resumed.output
    assert load_model(run / "final.zip").num_timesteps == stopped_at + 128  # one more 2 x 64-step rollout


@pytest.mark.slow
def test_self_play_refreshes_frozen_snapshots(tmp_path):
    run = tmp_path / "self"
    result = runner.invoke(app, ["agents", "train", "--out", str(run), "--opponent", "self", "--steps", "256", *TINY])
    assert result.exit_code == 0, result.output
    snapshots = sorted(p.name for p in (run / "selfplay").glob("opponent_*.zip"))
    assert snapshots == ["opponent_0000000.zip", "opponent_0000128.zip", "opponent_0000256.zip"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--player", "3"], "--player must be 1 or 2, got 3"),
        (["--opponent", "smart"], "--opponent: unknown policy 'smart'"),
        (["--opponent", "ppo:/nonexistent.zip"], "checkpoint /nonexistent.zip does not exist"),
        (["--game", "Airstriker-Genesis"], "agents train needs the RAM names"),
        (["--envs", "0"], "--envs must be at least 1"),
    ],
)
def test_bad_train_input_is_one_line(tmp_path, args, message):
    out = tmp_path / "run"
    result = runner.invoke(app, ["agents", "train", "--out", str(out), *args])
    assert result.exit_code == 2 and message in one_line(result.output)
    assert len(result.output.strip().splitlines()) <= 2
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# Collecting with learned policies


def test_collect_with_ppo_records_an_episode_that_replays(tmp_path, trained):
    final = trained / "final.zip"
    (episode,) = collect(tmp_path / "data", "--policy", f"ppo:{final}", "--p2-policy", "scripted",
                         "--state", "Close", "--episodes", "1", "--max-frames", "120")
    assert verify_episode(episode).ok
    meta = json.loads((episode / "meta.json").read_text())
    import hashlib

    p1 = meta["policies"]["p1"]
    assert p1["spec"] == f"ppo:{final}" and p1["checkpoint"] == str(final)
    assert p1["checkpoint_sha1"] == hashlib.sha1(final.read_bytes()).hexdigest()
    assert p1["deterministic"] is False and p1["checkpoint_step"] == 384
    assert meta["policies"]["p2"] == {"spec": "scripted"}
    keys = pq.read_table(episode / "frames.parquet").column("p1_keys").to_numpy()
    assert keys[0] == 0 and (keys[1:] != 0).any()
    assert not (keys & mask_of(["START", "SELECT"])).any()


def test_ppo_vs_ppo_is_seeded_and_plays_either_side(tmp_path, trained):
    final = trained / "final.zip"
    args = ["--policy", f"ppo:{final}", "--state", "Swapped", "--episodes", "1", "--max-frames", "80", "--seed", "3"]
    first, second = collect(tmp_path / "a", *args)[0], collect(tmp_path / "b", *args)[0]
    a, b = (pq.read_table(e / "frames.parquet").to_pydict() for e in (first, second))
    assert a["p1_keys"] == b["p1_keys"] and a["p2_keys"] == b["p2_keys"]
    assert any(a["p2_keys"]) and a["p1_keys"] != a["p2_keys"]  # each player samples with its own rng


def test_recorded_keys_are_what_the_policy_computes_from_each_row(tmp_path, trained):
    """Collect-time decisions = PlayerCodec(RAM of row t−1) → model → mask: the training env's path."""
    from wantofight.collect.ppo_policy import choose, load_model

    (episode,) = collect(tmp_path / "d", "--policy", f"ppo:{trained / 'final.zip'}", "--p2-policy", "scripted",
                         "--state", "Close", "--episodes", "1", "--max-frames", "60", "--deterministic")
    meta = json.loads((episode / "meta.json").read_text())
    assert meta["policies"]["p1"]["deterministic"] is True
    rows = pq.read_table(episode / "frames.parquet").to_pylist()
    model, codec = load_model(trained / "final.zip"), PlayerCodec(0, DUEL.info)
    rng = np.random.default_rng(0)
    for prev, row in zip(rows, rows[1:]):
        ram = {k: v for k, v in prev.items() if k not in ("frame_index", "p1_keys", "p2_keys")}
        action = choose(model, codec.observe(ram), rng, deterministic=True)
        assert codec.mask(action, ram) == row["p1_keys"]


def test_ladder_records_the_checkpoint_each_episode_used(tmp_path, trained):
    run = collect(tmp_path / "ladder", "--policy", f"ppo-ladder:{trained}", "--p2-policy", "random",
                  "--state", "Close", "--episodes", "4", "--max-frames", "20", "--workers", "2")
    ladder = sorted(str(p) for p in (trained / "checkpoints").glob("*.zip")) + [str(trained / "final.zip")]
    used = []
    for episode in run:
        p1 = json.loads((episode / "meta.json").read_text())["policies"]["p1"]
        assert p1["spec"] == f"ppo-ladder:{trained}" and p1["ladder"] == str(trained) and p1["ladder_size"] == 5
        assert p1["checkpoint"] in ladder and len(p1["checkpoint_sha1"]) == 40
        used.append(p1["checkpoint"])
    assert len(set(used)) > 1  # drawn per episode with the episode rng


def test_deterministic_ppo_pair_episodes_differ_by_a_seeded_start_and_replay(tmp_path, trained):
    """`--deterministic` PPO vs itself took the same decisions in every episode (byte-identical matches):
    now each player waits a seeded number of fighting rows first, recorded in meta.json, and the
    episodes differ while keeping the alignment contract (row 0 has no keys; replay verifies)."""
    final = trained / "final.zip"
    run = collect(tmp_path / "det", "--policy", f"ppo:{final}", "--deterministic", "--state", "Fight",
                  "--episodes", "4", "--max-frames", "90")
    keys = [tuple(map(tuple, (t["p1_keys"], t["p2_keys"]))) for t in
            (pq.read_table(e / "frames.parquet").to_pydict() for e in run)]
    assert len(set(keys)) == 4, "episodes of a deterministic pair must differ"
    delays = []
    for episode, (p1, p2) in zip(run, keys):
        meta = json.loads((episode / "meta.json").read_text())["policies"]
        delays.append((meta["p1"]["start_delay_rows"], meta["p2"]["start_delay_rows"]))
        assert p1[0] == p2[0] == 0
        for player, delay in zip((p1, p2), delays[-1]):
            assert not any(player[1:delay + 1])  # waits, then plays
        assert verify_episode(episode).ok
    assert len(set(delays)) == 4


def write_corrupt(path: Path) -> Path:
    path.write_bytes(b"PK\x03\x04 this is not really a zip")
    return path


def write_truncated(tmp_path: Path, trained: Path) -> Path:
    data = (trained / "final.zip").read_bytes()
    path = tmp_path / "truncated.zip"
    path.write_bytes(data[: len(data) // 2])
    return path


def write_foreign(tmp_path: Path) -> Path:
    path = tmp_path / "foreign.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "not a model")
    return path


def write_unloadable(tmp_path: Path, trained: Path) -> Path:
    """Right member names, garbage inside."""
    path = tmp_path / "garbage.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", "{not json")
        archive.writestr("policy.pth", b"\x00\x01")
    return path


@pytest.mark.parametrize(
    "make_spec, message",
    [
        (lambda tmp, run: "ppo:/nowhere/final.zip", "checkpoint /nowhere/final.zip does not exist"),
        (lambda tmp, run: f"ppo:{write_corrupt(tmp / 'bad.zip')}", "bad.zip is corrupt: not a stable-baselines3 .zip"),
        (lambda tmp, run: f"ppo:{write_truncated(tmp, run)}", "truncated.zip is corrupt"),
        (lambda tmp, run: f"ppo:{write_foreign(tmp)}", "foreign.zip is not a stable-baselines3 checkpoint"),
        (lambda tmp, run: f"ppo:{write_unloadable(tmp, run)}", "cannot load checkpoint"),
        (lambda tmp, run: "ppo-ladder:/nowhere", "ppo-ladder: /nowhere is not a training run folder"),
        (lambda tmp, run: f"ppo-ladder:{tmp}", "holds no checkpoints"),
    ],
)
def test_corrupt_or_missing_checkpoint_is_a_one_line_error(tmp_path, trained, make_spec, message):
    spec = make_spec(tmp_path, trained)
    out = tmp_path / "out"
    result = runner.invoke(app, ["collect", "--policy", spec, "--out", str(out)])
    assert result.exit_code == 2 and message in one_line(result.output), result.output
    assert len(result.output.strip().splitlines()) <= 3  # one message (rich may wrap long paths)
    assert not out.exists()


def test_missing_stable_baselines3_names_the_extra(monkeypatch):
    import importlib.util

    from wantofight.collect import ppo_policy

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "stable_baselines3" else real(name, *a))
    with pytest.raises(PolicyError, match=r"install the \[ppo\] extra: pip install -e '\.\[ppo\]'"):
        ppo_policy.make("ppo", "final.zip")


# ---------------------------------------------------------------------------------------------
# Evaluation


def test_eval_prints_results_damage_and_move_usage(trained):
    result = runner.invoke(app, ["agents", "eval", "--policy", f"ppo:{trained / 'final.zip'}", "--opponent",
                                 "scripted", "--matches", "1", "--state", "Close", "--max-frames", "600",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "(P1) vs scripted: 1 matches" in one_line(result.output) and "mean damage dealt" in result.output
    assert "move" in result.output and "uses" in result.output
    idle = runner.invoke(app, ["agents", "eval", "--policy", "idle", "--opponent", "scripted", "--player", "2",
                               "--matches", "1", "--state", "Close", "--no-progress", "--json"])
    assert idle.exit_code == 0, idle.output
    summary = json.loads(idle.output)
    assert (summary["wins"], summary["losses"], summary["draws"]) == (0, 1, 0)
    assert summary["mean_damage_dealt"] == 0 and summary["mean_damage_taken"] == 2 * DUEL.info["health_max"]
    assert summary["move_usage"] == {}


def test_bad_eval_input_is_one_line(tmp_path):
    result = runner.invoke(app, ["agents", "eval", "--policy", "ppo:/nowhere.zip", "--no-progress"])
    assert result.exit_code == 2 and "--policy: checkpoint /nowhere.zip does not exist" in one_line(result.output)


# ---------------------------------------------------------------------------------------------
# Observation, action and reward


def ram_row(**values) -> dict[str, int]:
    row = {f"p{p}_{k}": 0 for p in (1, 2) for k in ("x", "y", "facing", "health", "state", "wins", "move", "stun")}
    row.update(phase=1, timer=50, round=1, match_over=0)
    for p in (1, 2):
        row[f"p{p}_y"], row[f"p{p}_health"] = DUEL.info["ground_y"], DUEL.info["health_max"]
    row.update(values)
    return row


def test_observation_is_side_invariant():
    """P1 on the left, the mirrored scene, and P2 in P1's shoes all look the same to the agent."""
    left = ram_row(p1_x=100, p2_x=150, p1_facing=0, p2_facing=1, p1_state=5, p1_move=3, p2_health=40, p2_stun=7)
    mirrored = ram_row(p1_x=156, p2_x=106, p1_facing=1, p2_facing=0, p1_state=5, p1_move=3, p2_health=40, p2_stun=7)
    as_p2 = ram_row(p2_x=100, p1_x=150, p2_facing=0, p1_facing=1, p2_state=5, p2_move=3, p1_health=40, p1_stun=7)
    stage = DUEL.info["stage_x"]
    assert 256 - 100 == stage[0] + stage[1] - 100  # the mirror of x is stage-symmetric
    observations = [PlayerCodec(p, DUEL.info).observe(ram) for p, ram in ((0, left), (0, mirrored), (1, as_p2))]
    np.testing.assert_array_equal(observations[0], observations[1])
    np.testing.assert_array_equal(observations[0], observations[2])
    assert observations[0].shape == (PlayerCodec(0, DUEL.info).size,)


def test_actions_are_relative_to_the_opponent():
    toward_right = action_mask((1, 1), RIGHT, LEFT)  # toward + A, opponent on the right
    assert toward_right == mask_of(["RIGHT", "A"])
    assert action_mask((8, 2), LEFT, RIGHT) == mask_of(["DOWN", "RIGHT", "B"])  # low block + B, opponent left
    assert action_mask((0, 0), RIGHT, LEFT) == 0
    codec = PlayerCodec(1, DUEL.info)  # P2, opponent (P1) on its left
    assert codec.mask((5, 0), ram_row(p1_x=96, p2_x=160)) == mask_of(["UP", "LEFT"])


def test_reward_terms_come_from_ram():
    tally = Tally(0)
    before = ram_row(p1_move=0)
    hit = ram_row(p2_health=90, p1_move=3)
    assert tally.update(before, hit) == (6, 0, 0)
    knocked = ram_row(p2_health=0, p1_health=80, p1_wins=1, p1_move=3)
    assert tally.update(hit, knocked) == (90, 16, 1)
    refill = ram_row(p1_wins=1)  # next round: health back to full is not damage
    assert tally.update(knocked, refill) == (0, 0, 0)
    assert tally.dealt == 96 and tally.taken == 16 and tally.moves == {3: 1}
    assert tally.result(refill) == "win" and tally.result(ram_row(p1_wins=1, p2_wins=1)) == "draw"


def test_fight_env_steps_the_real_emulator_and_reports_the_match():
    env = FightEnv(EnvConfig(opponent="idle", states=("Close",), max_frames=400), seed=1)
    try:
        obs, info = env.reset()
        assert obs.shape == env.observation_space.shape and info == {"state": "Close"}
        total, steps, done, truncated = 0.0, 0, False, False
        while not (done or truncated):
            obs, reward, done, truncated, info = env.step(np.array([1, 1]))  # toward + A, forever
            total, steps = total + reward, steps + 1
        assert env.observation_space.contains(obs)
        assert info["damage_dealt"] > 0 and info["damage_taken"] == 0 and total > 0
        assert info["moves"] and set(info["moves"]) <= {1, 3}  # light and heavy punch only
        assert info["match"] in ("win", "draw")
    finally:
        env.close()
