"""The 16-slot layout (docs/contracts.md) and its platform tables."""

import json
import os

import numpy as np
import pytest

from wantofight.collect import keys


def test_slot_order_is_the_spec_table():
    assert keys.SLOTS == (
        "UP", "DOWN", "LEFT", "RIGHT", "A", "B", "C", "D",
        "X", "Y", "Z", "L", "R", "START", "SELECT", "MODE",
    )  # fmt: skip
    assert keys.mask_of(["UP"]) == 1 and keys.mask_of(["MODE"]) == 1 << 15


@pytest.mark.parametrize("platform", ["Nes", "Genesis", "Snes", "FBNeo"])
def test_every_mask_round_trips_through_the_platform_buttons(platform):
    table = keys.button_table(platform)
    supported = table.supported_mask()
    for mask in range(1 << 16):
        buttons = table.to_buttons(mask)
        assert table.from_buttons(buttons) == mask & supported
    # every supported slot reaches a distinct core button
    indices = [int(np.flatnonzero(table.to_buttons(1 << bit))[0]) for bit in range(16) if supported >> bit & 1]
    assert len(set(indices)) == len(indices)


@pytest.mark.parametrize("platform", ["Nes", "Genesis", "Snes", "FBNeo"])
def test_button_order_matches_stable_retro_core(platform):
    import stable_retro

    cores = os.path.join(os.path.dirname(stable_retro.__file__), "cores")
    found = {}
    for name in os.listdir(cores):
        if name.endswith(".json"):
            for system, info in json.load(open(os.path.join(cores, name))).items():
                found[system] = info["buttons"]
    assert tuple(found[platform]) == keys.button_table(platform).buttons


def test_nes_table_has_the_spec_buttons():
    assert set(keys.button_table("Nes").slots) == {"UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT"}
    assert set(keys.button_table("FBNeo").slots) >= {"A", "B", "C", "D"}


def test_array_and_mask_forms_round_trip():
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 1 << 16, size=(50, 2)).astype(np.uint16)
    arr = keys.masks_to_array(masks)
    assert arr.shape == (50, 2, 16) and arr.dtype == np.float32
    assert arr[0, 0, 3] == (masks[0, 0] >> 3 & 1)
    np.testing.assert_array_equal(keys.array_to_masks(arr), masks)


def test_multiplayer_action_vector_concatenates_players():
    table = keys.button_table("Nes")
    action = table.action([keys.mask_of(["RIGHT", "A"]), keys.mask_of(["B"])], players=2)
    assert action.shape == (18,)
    # NES core order: B, -, SELECT, START, UP, DOWN, LEFT, RIGHT, A
    assert list(np.flatnonzero(action)) == [7, 8, 9]


def test_unknown_key_names_the_valid_ones():
    with pytest.raises(keys.UnknownKey, match="valid keys: UP, DOWN"):
        keys.mask_of(["PUNCH"])


def test_unknown_platform_lists_known_tables():
    with pytest.raises(ValueError, match="known: fbneo, genesis, nes, snes"):
        keys.button_table("Atari2600")
