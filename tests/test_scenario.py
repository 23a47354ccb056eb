"""The recorder's Python `done` check agrees with stable-retro's own."""

import json

import pytest

from wantofight.collect.emulator import make_env
from wantofight.collect.game_registry import resolve_game
from wantofight.collect.scenario import DoneCondition


def test_duel_done_matches_stable_retro():
    game = resolve_game("duel")
    done = DoneCondition.load(game.scenario_path())
    assert done is not None
    env = make_env(game.retro_game, state="Fight")
    try:
        env.reset()
        data = env.data
        for value in (0, 1, 0, 3):
            data.set_value("match_over", value)
            data.update_ram()
            assert done(data.lookup_all()) == data.is_done() == bool(value)
    finally:
        env.close()


@pytest.mark.parametrize(
    "done, values, expected",
    [
        ({"variables": {"lives": {"op": "zero"}}}, {"lives": 0}, True),
        ({"variables": {"lives": {"op": "equal", "reference": 2}}}, {"lives": 3}, False),
        ({"condition": "all", "variables": {"a": {"op": "zero"}, "b": {"op": "less-than", "reference": 5}}},
         {"a": 0, "b": 7}, False),
        ({"condition": "any", "variables": {"a": {"op": "zero"}, "b": {"op": "less-than", "reference": 5}}},
         {"a": 0, "b": 7}, True),
    ],
)
def test_plain_conditions(tmp_path, done, values, expected):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"done": done}))
    assert DoneCondition.load(path)(values) is expected


@pytest.mark.parametrize(
    "done",
    [
        {"variables": {"lives": {"op": "negative", "measurement": "delta"}}},
        {"nodes": {"x": {}}, "variables": {"lives": {"op": "zero"}}},
        {"script": "lua:done"},
        {},
    ],
)
def test_richer_conditions_fall_back_to_stable_retro(tmp_path, done):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"done": done}))
    assert DoneCondition.load(path) is None
