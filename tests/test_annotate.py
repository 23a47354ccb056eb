"""`wtf annotate`: labels, effective presses and events, frame-exact on key-file recordings whose
outcome game.json predicts (press row + startup = contact row, contact + hitstun = recovery, …)."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from annotate_helpers import INFO, MOVES, annotated, copy_run, episode, keys_run, only, spans
from wantofight.cli import app

PRESS = 6  # key files below start with 5 neutral rows after row 0, so the press is row 6


@pytest.fixture(scope="module")
def keydir(tmp_path_factory):
    return tmp_path_factory.mktemp("keys")


def test_light_punch_hit_labels_effective_and_span(recorded, keydir):
    run = keys_run(recorded, keydir, "punch", ["5 - -", "2 A -", "30 - -"])
    frames, events, ram = annotated(run)
    move = MOVES["light_punch"]
    total = move["startup"] + move["active"] + move["recovery"]
    contact = PRESS + move["startup"]
    recovered = contact + move["hitstun"]

    assert frames["p1_action"][PRESS - 1] == "idle"
    assert frames["p1_action"][PRESS:PRESS + total] == ["attack:light_punch"] * total
    assert frames["p1_action"][PRESS + total] == "idle"
    # The press acts; presses during the move do not; a press on the frame it ends does.
    assert frames["p1_effective"][PRESS] is True
    assert not any(frames["p1_effective"][PRESS + 1:PRESS + total])
    assert frames["p1_effective"][PRESS + total] is True
    # The victim is locked from the row after contact until its stun runs out.
    assert frames["p2_action"][contact:recovered] == ["hitstun"] * move["hitstun"]
    assert frames["p2_action"][recovered] == "idle"
    assert not any(frames["p2_effective"][contact + 1:recovered])
    assert frames["p2_effective"][recovered] is True
    # Key edges: pressed on the press row, released two rows later.
    a_bit = 1 << 4
    assert frames["p1_pressed"][PRESS] == a_bit and frames["p1_keys"][PRESS + 1] == a_bit
    assert frames["p1_pressed"][PRESS + 1] == 0 and frames["p1_released"][PRESS + 2] == a_bit

    hit = only(events, "hit")
    assert (hit["start_frame"], hit["end_frame"]) == (contact, recovered)
    assert (hit["attacker"], hit["victim"], hit["move"], hit["damage"]) == (1, 2, "light_punch", move["damage"])
    assert ram["p2_health"][contact] == INFO["health_max"] - move["damage"]
    assert not spans(events, "block") and not spans(events, "trade") and not spans(events, "ko")


def test_guard_gives_a_block_with_blockstun_span(recorded, keydir):
    # P2 faces left, so holding RIGHT is "away"; held from the press row it guards at once
    # (holding it earlier would walk P2 out of reach).
    run = keys_run(recorded, keydir, "block", ["5 - -", "2 A RIGHT", "30 - RIGHT"])
    frames, events, _ = annotated(run)
    move = MOVES["light_punch"]
    contact = PRESS + move["startup"]
    block = only(events, "block")
    assert (block["start_frame"], block["end_frame"]) == (contact, contact + move["blockstun"])
    assert (block["attacker"], block["victim"], block["move"], block["damage"]) == (1, 2, "light_punch", move["chip"])
    assert frames["p2_action"][PRESS:contact] == ["block_high"] * move["startup"]
    assert frames["p2_action"][contact:contact + move["blockstun"]] == ["blockstun"] * move["blockstun"]
    assert not spans(events, "hit")


def test_forward_jump_over_swaps_sides_and_overlaps(recorded, keydir):
    run = keys_run(recorded, keydir, "jump", ["5 - -", "2 UP+RIGHT -", "50 - -"])
    frames, events, ram = annotated(run)
    airborne = INFO["jump"]["frames"] - 1  # the 32nd air frame lands, already idle
    assert frames["p1_action"][PRESS:PRESS + airborne] == ["jump_forward"] * airborne
    assert frames["p1_action"][PRESS + airborne] == "idle"

    # P1 moves speed_forward px per row from its start x; it passes P2's x on this row.
    gap = ram["p2_x"][0] - ram["p1_x"][0]
    swap_row = PRESS + gap // INFO["jump"]["speed_forward"]
    swap = only(events, "side_swap")
    assert (swap["start_frame"], swap["end_frame"], swap["detail"], swap["players"]) == (
        swap_row, swap_row + 1, "jump_over", [1])
    assert ram["p1_x"][swap_row - 1] < ram["p2_x"][swap_row] < ram["p1_x"][swap_row]

    assert spans(events, "overlap") == reference_overlaps(ram, frames) == [(PRESS + 2, PRESS + 3)]


def reference_overlaps(ram, frames) -> list[tuple[int, int]]:
    """Hurtbox intersection computed row by row, the obvious way, from game.json boxes."""
    boxes = INFO["boxes"]["hurtbox"]
    rows = []
    for t in range(len(ram["p1_x"])):
        rects = []
        for p in (1, 2):
            x, y, action = ram[f"p{p}_x"][t], ram[f"p{p}_y"][t], frames[f"p{p}_action"][t]
            stance = "air" if y < INFO["ground_y"] or action.startswith("jump") else "stand"
            dx, dy, w, h = boxes[stance]
            rects.append((x + dx, y + dy, x + dx + w, y + dy + h))
        (a0, b0, a1, b1), (c0, d0, c1, d1) = rects
        if a0 < c1 and c0 < a1 and b0 < d1 and d0 < b1:
            rows.append(t)
    return [(t, t + 1) for t in rows]  # single rows here; the jump passes quickly


def test_sweep_knocks_down_and_the_victim_acts_again_after_wakeup(recorded, keydir):
    run = keys_run(recorded, keydir, "sweep", ["5 - -", "2 DOWN+B -", "90 - -"])
    frames, events, _ = annotated(run)
    move = MOVES["sweep"]
    contact = PRESS + move["startup"]
    down, up = INFO["knockdown_frames"], INFO["wakeup_frames"]
    knock = only(events, "knockdown")
    assert (knock["start_frame"], knock["end_frame"], knock["players"]) == (contact, contact + down, [2])
    hit = only(events, "hit")
    assert (hit["start_frame"], hit["end_frame"], hit["move"]) == (contact, contact + down + up, "sweep")
    assert frames["p2_action"][contact + down:contact + down + up] == ["wakeup"] * up
    assert not any(frames["p2_effective"][contact + 1:contact + down + up])
    assert frames["p2_effective"][contact + down + up] is True
    assert frames["p1_action"][PRESS] == "attack:sweep"


def test_eight_heavy_kicks_ko_and_end_the_round(recorded, keydir):
    # P2 keeps walking in; P1 heavy-kicks every 40 rows: health_max / damage hits end the round.
    move = MOVES["heavy_kick"]
    lines = ["4 - LEFT"] + ["2 RIGHT+B LEFT", "38 - LEFT"] * 9
    run = keys_run(recorded, keydir, "ko", lines)
    frames, events, ram = annotated(run)
    hits = [e for e in events if e["event"] == "hit"]
    needed = -(-INFO["health_max"] // move["damage"])
    assert len(hits) == needed
    assert [h["start_frame"] for h in hits] == [5 + move["startup"] + 40 * i for i in range(needed)]
    assert all(h["move"] == "heavy_kick" and h["damage"] == move["damage"] for h in hits)
    last = hits[-1]["start_frame"]
    ko = only(events, "ko")
    assert (ko["start_frame"], ko["players"]) == (last, [2])
    end = only(events, "round_end")
    assert (end["start_frame"], end["players"], end["detail"]) == (last, [1], "ko")
    pauses = [e for e in events if e["event"] == "non_gameplay"]
    assert (pauses[0]["detail"], pauses[0]["start_frame"], pauses[0]["end_frame"]) == (
        "ko_pause", last, last + INFO["ko_pause_frames"])
    assert frames["gameplay"][last - 1] and not frames["gameplay"][last]
    assert frames["segment"][last] == -1
    assert not spans(events, "time_out")


def test_round_start_after_the_intro(recorded):
    run = recorded(policy="idle", state="Start", fps=60, episodes=1, max_frames=80)
    frames, events, ram = annotated(run)
    start = only(events, "round_start")
    intro = only(events, "non_gameplay")
    assert intro["detail"] == "intro" and intro["start_frame"] == 0
    assert start["start_frame"] == intro["end_frame"] == frames["gameplay"].index(True)
    assert start["detail"] == f"round {ram['round'][start['start_frame']]}"
    assert not any(frames["p1_effective"][:start["start_frame"]])


def test_imported_game_gets_what_its_ram_allows(recorded):
    run = recorded(game="Airstriker-Genesis", policy="random", episodes=1, max_frames=120, fps=60)
    frames, events, ram = annotated(run)
    meta = json.loads((episode(run) / "annotation.json").read_text())
    missing = {item["what"] for item in meta["not_computed"]}
    assert {"action", "effective", "hit/block/trade", "side_swap", "overlap", "non_gameplay"} <= missing
    assert set(frames["p1_action"]) == {None} and set(frames["p1_effective"]) == {None}
    assert frames["p1_keys"] == ram["p1_keys"]  # key edges are still there
    assert sum(frames["p1_pressed"]) > 0
    assert events == []


def test_annotate_cli_skips_broken_episodes_by_name(recorded, keydir, tmp_path):
    source = keys_run(recorded, keydir, "punch", ["5 - -", "2 A -", "30 - -"])
    run = copy_run(source, tmp_path / "run")
    good = episode(run)
    for name in ("ep000001", "ep000002", "ep000003"):
        copy_run(good, run / "episodes" / name)
    (run / "episodes" / "ep000001" / "meta.json").unlink()
    video = run / "episodes" / "ep000002" / "video.mp4"
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    meta_path = run / "episodes" / "ep000003" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "frame_count": meta["frame_count"] + 1}))

    result = CliRunner().invoke(app, ["annotate", str(run), "--no-progress", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "annotations of 1 of 4" in result.output
    for name in ("ep000001", "ep000002", "ep000003"):
        assert name in result.output
        assert not (run / "episodes" / name / "annotation.json").exists()
    assert (good / "annotation.json").exists()
    assert not [p for p in os.listdir(good) if p.startswith(".tmp-")]
