"""The built-in DUEL ROM in the real emulator: determinism, each mechanic, both pads equal."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from duel_helpers import (GAME, GAME_DIR, INTEGRATION, MOVES, STATE, load, mirrors, run,
                          swap_players)

@pytest.fixture(scope="module")
def env():
    from wantofight.collect.emulator import make_env

    e = make_env("Duel-Nes", state="Start")
    e.reset()
    yield e
    e.close()


def both_ways(env, state, script):
    """Run `script` as given and with the pads swapped from the mirrored start."""
    start = load(env, state)
    a = run(env, script)
    assert mirrors([load(env, state)], [start])  # every shipped start is mirror-symmetric
    b = run(env, swap_players(script))
    return start, a, b


def first(rams, pred):
    return next(i for i, r in enumerate(rams) if pred(r))


# ------------------------------------------------------------------------------------------
# integration


def test_integration_files_match_rom():
    rom = (INTEGRATION / "rom.nes").read_bytes()
    assert rom[:4] == b"NES\x1a" and len(rom) == 16 + 32768 + 8192
    assert (INTEGRATION / "rom.sha").read_text().strip() == hashlib.sha1(rom[16:]).hexdigest()
    info = json.loads((INTEGRATION / "data.json").read_text())["info"]
    for name in ("p1_x p2_x p1_y p2_y p1_facing p2_facing p1_health p2_health p1_state p2_state "
                 "p1_wins p2_wins round timer phase match_over p1_move p2_move p1_stun p2_stun "
                 "frame cpu_load").split():
        assert name in info, name
    for state in GAME["states"]:
        assert (INTEGRATION / f"{state}.state").exists(), state


def test_start_state_is_round_one_intro(env):
    ram = load(env, "Start")
    assert (ram["phase"], ram["round"], ram["match_over"]) == (0, 1, 0)
    assert ram["p1_health"] == ram["p2_health"] == GAME["health_max"]
    assert ram["timer"] == GAME["round_time_seconds"]
    assert (ram["p1_x"], ram["p2_x"]) == tuple(GAME["start_x"])
    rams = run(env, [([], [], GAME["intro_frames"])])
    # `frame` counts logic frames since power-on, and the intro began at power-on
    assert first(rams, lambda r: r["phase"] == 1) == GAME["intro_frames"] - ram["frame"] - 1


# ------------------------------------------------------------------------------------------
# determinism and timing


def test_same_state_and_inputs_give_identical_frames_and_ram(env):
    rng = np.random.default_rng(0)
    script = [(list(rng.choice(["toward", "away", "UP", "DOWN", "A", "B"], size=rng.integers(0, 3),
                               replace=False)),
               list(rng.choice(["toward", "away", "UP", "DOWN", "A", "B"], size=rng.integers(0, 3),
                               replace=False)), int(rng.integers(1, 12))) for _ in range(60)]
    outs = []
    for _ in range(2):
        load(env, "Start")
        rams, screens = run(env, script, frames=True)
        outs.append((rams, np.stack(screens), env.get_ram().copy()))
    assert outs[0][0] == outs[1][0]
    assert np.array_equal(outs[0][1], outs[1][1])
    assert np.array_equal(outs[0][2], outs[1][2])
    assert outs[0][0][-1]["frame"] - outs[0][0][0]["frame"] == len(outs[0][0]) - 1


def test_screen_lags_ram_by_the_documented_frames(env):
    load(env, "Fight")
    base_rams, base_screens = run(env, [([], [], 8)], frames=True)
    load(env, "Fight")
    rams, screens = run(env, [(["toward"], [], 8)], frames=True)
    ram_step = first(range(8), lambda i: rams[i]["p1_x"] != base_rams[i]["p1_x"])
    screen_step = first(range(8), lambda i: not np.array_equal(screens[i], base_screens[i]))
    assert screen_step - ram_step == GAME["screen_ram_lag_frames"] == 1
    assert screens[0].shape == (224, 240, 3)


def test_logic_never_overruns_a_frame(env):
    """`frame` counts logic updates: one per emulated frame means no frame was dropped."""
    load(env, "Close")
    script = [(["toward", "A"], ["away", "DOWN", "B"], 3), (["UP", "toward"], ["B"], 5),
              (["A"], ["UP", "away"], 7), (["DOWN", "B"], ["A"], 9)] * 10
    rams = run(env, script)
    assert [r["frame"] for r in rams] == list(range(rams[0]["frame"], rams[0]["frame"] + len(rams)))
    assert max(r["cpu_load"] for r in rams) < 60


# ------------------------------------------------------------------------------------------
# movement


@pytest.mark.parametrize("state", ["Fight", "Swapped"])
def test_walking_toward_moves_only_the_walker(env, state):
    script = [(["toward"], [], 20)]
    start, a, b = both_ways(env, state, script)
    step = GAME["walk_speed"]["forward"] * 20
    toward1 = 1 if start["p1_facing"] == GAME["facing"]["right"] else -1
    assert a[-1]["p1_x"] - start["p1_x"] == toward1 * step and a[-1]["p2_x"] == start["p2_x"]
    assert b[-1]["p2_x"] - start["p2_x"] == -toward1 * step and b[-1]["p1_x"] == start["p1_x"]
    assert a[-1]["p1_state"] == STATE["walk_forward"] == b[-1]["p2_state"]
    assert [r["p1_y"] for r in a] == [GAME["ground_y"]] * 20


def test_walking_back_and_crouch(env):
    load(env, "Fight")
    rams = run(env, [(["away"], [], 10), (["DOWN"], [], 5)])
    assert rams[9]["p1_x"] == 96 - 10 * GAME["walk_speed"]["back"]
    assert rams[9]["p1_state"] == STATE["walk_back"]
    assert rams[-1]["p1_state"] == STATE["crouch"] and rams[-1]["p1_x"] == rams[9]["p1_x"]


def test_forward_jump_from_close_range_swaps_sides(env):
    script = [(["UP", "toward"], [], 1), ([], [], GAME["jump"]["frames"] + 4)]
    start, a, b = both_ways(env, "Close", script)
    for rams in (a, b):
        end = rams[-1]
        assert np.sign(end["p1_x"] - end["p2_x"]) == -np.sign(start["p1_x"] - start["p2_x"])
        assert end["p1_facing"] != start["p1_facing"] and end["p2_facing"] != start["p2_facing"]
        assert min(min(r["p1_y"], r["p2_y"]) for r in rams) < GAME["ground_y"] - 40
        assert end["p1_y"] == end["p2_y"] == GAME["ground_y"]
    assert mirrors(a, b)


def test_screen_edges_hold(env):
    load(env, "Fight")
    rams = run(env, [(["away"], ["away"], 120)])
    assert (rams[-1]["p1_x"], rams[-1]["p2_x"]) == tuple(GAME["stage_x"])


def test_fighters_cannot_walk_through_each_other(env):
    load(env, "Close")
    rams = run(env, [(["toward"], [], 30)])
    assert all(r["p2_x"] - r["p1_x"] >= GAME["boxes"]["body_width"] for r in rams)
    assert rams[-1]["p2_x"] > 138  # the walker pushes the other back


# ------------------------------------------------------------------------------------------
# attacks


GROUND_ATTACKS = {
    "light_punch": ["A"], "light_kick": ["B"], "heavy_punch": ["toward", "A"],
    "heavy_kick": ["toward", "B"], "crouch_punch": ["DOWN", "A"], "sweep": ["DOWN", "B"],
}


@pytest.mark.parametrize("name", list(GROUND_ATTACKS))
def test_each_ground_attack_hits_for_its_table_values(env, name):
    move = MOVES[name]
    total = move["startup"] + move["active"] + move["recovery"]
    script = [(GROUND_ATTACKS[name], [], 1), ([], [], total + 2)]
    start, a, b = both_ways(env, "Close", script)
    assert mirrors(a, b)
    assert a[0]["p1_state"] == STATE["attack"] and a[0]["p1_move"] == move["id"]
    hit = first(a, lambda r: r["p2_health"] != start["p2_health"])
    assert hit == move["startup"]  # press frame = startup frame 1
    assert start["p2_health"] - a[hit]["p2_health"] == move["damage"]
    assert a[hit]["p1_dealt"] == move["damage"]
    if move["knockdown"]:
        assert a[hit]["p2_state"] == STATE["knockdown"]
    else:
        assert a[hit]["p2_state"] == STATE["hitstun"] and a[hit]["p2_stun"] == move["hitstun"]
    assert first(a, lambda r: r["p1_state"] != STATE["attack"]) == total
    assert a[total - 1]["p1_move"] == move["id"] and a[total]["p1_move"] == 0


def test_hitstun_counts_down_to_neutral(env):
    move = MOVES["light_punch"]
    load(env, "Close")
    rams = run(env, [(["A"], [], 1), ([], [], 30)])
    hit = move["startup"]
    stun = [r["p2_stun"] for r in rams[hit:hit + move["hitstun"] + 1]]
    assert stun == list(range(move["hitstun"], 0, -1)) + [0]
    assert rams[hit + move["hitstun"]]["p2_state"] == STATE["idle"]


@pytest.mark.parametrize("name,button", [("jump_punch", "A"), ("jump_kick", "B")])
def test_jump_attacks_hit_on_the_way_down(env, name, button):
    move = MOVES[name]
    script = [(["UP"], [], 1), ([], [], 22), ([button], [], 1), ([], [], 12)]
    start, a, b = both_ways(env, "Close", script)
    assert mirrors(a, b)
    assert any(r["p1_move"] == move["id"] for r in a)
    hit = first(a, lambda r: r["p2_health"] != start["p2_health"])
    assert start["p2_health"] - a[hit]["p2_health"] == move["damage"]
    assert a[hit]["p2_state"] == STATE["hitstun"] and a[hit]["p2_stun"] == move["hitstun"]
    assert a[-1]["p1_state"] == STATE["idle"] and a[-1]["p1_y"] == GAME["ground_y"]


def test_sweep_knocks_down_then_wakes_up(env):
    sweep = MOVES["sweep"]
    load(env, "Close")
    rams = run(env, [(["DOWN", "B"], [], 1), ([], [], 80)])
    hit = sweep["startup"]
    down = [r["p2_state"] for r in rams[hit:]]
    kd, wk = GAME["knockdown_frames"], GAME["wakeup_frames"]
    assert down[:kd] == [STATE["knockdown"]] * kd
    assert down[kd:kd + wk] == [STATE["wakeup"]] * wk
    assert down[kd + wk] == STATE["idle"]


def test_no_hit_while_knocked_down(env):
    load(env, "Close")
    rams = run(env, [(["DOWN", "B"], [], 1), ([], [], 20), (["A"], [], 1), ([], [], 10)])
    assert rams[-1]["p2_health"] == GAME["health_max"] - MOVES["sweep"]["damage"]


# ------------------------------------------------------------------------------------------
# blocking


@pytest.mark.parametrize("name,guard,blocked", [
    ("light_punch", ["away"], True), ("heavy_kick", ["away"], True),
    ("crouch_punch", ["away", "DOWN"], True), ("sweep", ["away", "DOWN"], True),
    ("sweep", ["away"], False),
])
def test_blocking(env, name, guard, blocked):
    """Docs: a blocked move costs its 'chip' health and puts the guard in blockstun; the sweep
    must be blocked low."""
    move = MOVES[name]
    script = [(GROUND_ATTACKS[name], guard, 1), ([], guard, move["startup"] + 2)]
    start, a, b = both_ways(env, "Close", script)
    assert mirrors(a, b)
    hit = move["startup"]
    before = a[hit - 1]
    if guard == ["away"]:
        assert before["p2_state"] == STATE["block_high"]
    else:
        assert before["p2_state"] == STATE["block_low"]
    if blocked:
        assert start["p2_health"] - a[hit]["p2_health"] == move["chip"]
        assert a[hit]["p2_state"] == STATE["blockstun"] and a[hit]["p2_stun"] == move["blockstun"]
        assert a[hit]["p2_x"] > start["p2_x"] or a[-1]["p2_x"] > start["p2_x"]  # pushback
    else:
        assert start["p2_health"] - a[hit]["p2_health"] == move["damage"]
        assert a[hit]["p2_state"] == STATE["knockdown"]


def test_jump_attack_must_be_blocked_standing(env):
    def script(guard):  # the defender starts guarding when the kick comes out
        return [(["UP"], [], 1), ([], [], 22), (["B"], guard, 1), ([], guard, 12)]

    load(env, "Close")
    low = run(env, script(["away", "DOWN"]))
    load(env, "Close")
    high = run(env, script(["away"]))
    jk = MOVES["jump_kick"]
    assert GAME["health_max"] - low[-1]["p2_health"] == jk["damage"]
    assert GAME["health_max"] - high[-1]["p2_health"] == jk["chip"]
    assert any(r["p2_state"] == STATE["blockstun"] for r in high)


def test_holding_away_guards_only_against_an_attack(env):
    load(env, "Fight")
    rams = run(env, [([], ["away"], 2), (["A"], ["away"], 1), ([], ["away"], 3)])
    assert rams[1]["p2_state"] == STATE["walk_back"]
    assert rams[2]["p2_state"] == STATE["block_high"]
    assert rams[2]["p2_x"] == rams[1]["p2_x"]  # guarding stands still


# ------------------------------------------------------------------------------------------
# rounds


def ko_round(env, attacker: int):
    """From the fighting phase: put the fighters close, leave the defender 3 health, punch."""
    me, you = (1, 2) if attacker == 1 else (2, 1)
    info = env.data.lookup_all()
    env.data.set_value(f"p{you}_health", 3)
    side = 1 if info[f"p{me}_facing"] == GAME["facing"]["right"] else -1
    env.data.set_value(f"p{you}_x", info[f"p{me}_x"] + side * 20)
    punch = (["A"], []) if attacker == 1 else ([], ["A"])
    return run(env, [(*punch, 1),
                     ([], [], MOVES["light_punch"]["startup"] + GAME["round_over_frames"] + 2)])


@pytest.mark.parametrize("attacker", [1, 2])
def test_ko_ends_the_round_and_best_of_three_ends_the_match(env, attacker):
    me, you = (1, 2) if attacker == 1 else (2, 1)
    load(env, "Fight")
    rams = ko_round(env, attacker)
    ko = first(rams, lambda r: r["phase"] == 2)
    assert ko == MOVES["light_punch"]["startup"]
    assert rams[ko][f"p{you}_health"] == 0 and rams[ko][f"p{you}_state"] == STATE["ko"]
    assert (rams[ko][f"p{me}_wins"], rams[ko][f"p{you}_wins"]) == (1, 0)
    # KO pause: nothing moves
    pause = rams[ko:ko + GAME["ko_pause_frames"]]
    assert all(r["p1_x"] == pause[0]["p1_x"] and r["p2_y"] == pause[0]["p2_y"] for r in pause)
    new = first(rams, lambda r: r["round"] == 2)
    assert new == ko + GAME["round_over_frames"]
    r2 = rams[new]
    assert (r2["phase"], r2["p1_health"], r2["p2_health"]) == (0, 96, 96)
    assert (r2["p1_x"], r2["p2_x"], r2["timer"]) == (96, 160, GAME["round_time_seconds"])
    assert r2[f"p{me}_wins"] == 1

    run(env, [([], [], GAME["intro_frames"])])
    assert env.data.lookup_all()["phase"] == 1
    rams = ko_round(env, attacker)
    end = rams[-1]
    assert (end["phase"], end["match_over"], end[f"p{me}_wins"], end[f"p{you}_wins"]) == (3, 1, 2, 0)
    _, _, terminated, _, _ = env.step(np.zeros(18, dtype=np.uint8))
    assert terminated


@pytest.mark.parametrize("health,wins", [((60, 50), (1, 0)), ((40, 70), (0, 1)), ((55, 55), (1, 1))])
def test_time_out_is_decided_by_health(env, health, wins):
    load(env, "Fight")
    env.data.set_value("p1_health", health[0])
    env.data.set_value("p2_health", health[1])
    env.data.set_value("timer", 1)
    rams = run(env, [([], [], 61)])
    over = first(rams, lambda r: r["phase"] == 2)
    assert over == 59 and rams[over]["timer"] == 0
    assert (rams[over]["p1_wins"], rams[over]["p2_wins"]) == wins
    assert rams[over - 1]["phase"] == 1


def test_rewards_are_damage_dealt_minus_taken(env):
    env.multi_rewards = True
    try:
        load(env, "Close")
        a = np.zeros(18, dtype=np.uint8)
        a[8] = 1  # P1 A
        total = np.zeros(2)
        for i in range(12):
            _, rew, _, _, _ = env.step(a if i == 0 else np.zeros(18, dtype=np.uint8))
            total += rew
        dmg = MOVES["light_punch"]["damage"]
        assert total.tolist() == [dmg, -dmg]
    finally:
        env.multi_rewards = False


def test_rom_builds_byte_identically_from_source():
    import shutil
    import subprocess

    if not (shutil.which("ca65") and shutil.which("ld65") and shutil.which("make")):
        pytest.skip("cc65 is not installed (CI installs it and runs `make check`)")
    subprocess.run(["make", "-s", "-C", str(GAME_DIR), "check"], check=True, capture_output=True)


@pytest.mark.slow
def test_random_play_keeps_every_invariant(env):
    """Button mashing on both pads through whole matches: RAM stays inside its documented ranges."""
    rng = np.random.default_rng(1)
    load(env, "Fight")
    ids = set(STATE.values())
    lo, hi = GAME["stage_x"]
    matches, prev = 0, None
    for _ in range(700):
        a = rng.integers(0, 2, 18).astype(np.uint8)
        a[[3, 12]] = 0
        info = env.data.lookup_all()
        if info["phase"] == 1 and rng.random() < 0.04:  # shorten rounds so matches end
            p = f"p{rng.integers(1, 3)}_health"
            env.data.set_value(p, min(info[p], int(rng.integers(1, 12))))
        for _ in range(int(rng.integers(1, 12))):
            _, _, done, _, r = env.step(a)
            assert lo <= r["p1_x"] <= hi and lo <= r["p2_x"] <= hi
            assert GAME["ground_y"] - GAME["jump"]["height"] <= min(r["p1_y"], r["p2_y"])
            assert max(r["p1_y"], r["p2_y"]) <= GAME["ground_y"]
            for p in ("p1", "p2"):
                assert r[f"{p}_state"] in ids and r[f"{p}_health"] <= GAME["health_max"]
                assert (r[f"{p}_move"] != 0) == (r[f"{p}_state"] == STATE["attack"])
                assert r[f"{p}_stun"] <= 20 and r[f"{p}_wins"] <= GAME["rounds_to_win"]
            if r["p1_y"] == r["p2_y"] == GAME["ground_y"] and r["phase"] == 1:
                assert abs(r["p1_x"] - r["p2_x"]) >= GAME["boxes"]["body_width"]
            if prev is not None:
                assert r["frame"] == (prev + 1) & 0xFFFF
            prev = r["frame"]
            if done:
                matches += 1
                load(env, "Fight")
                prev = None
                break
    assert matches >= 1
