"""Key files: the format `wtf collect --policy keys:PATH` plays."""

import numpy as np
import pytest

from wantofight.collect.keyfile import KeyFileError, read_key_file, write_key_file
from wantofight.collect.keys import mask_of


def test_segments_expand_to_rows(tmp_path):
    path = tmp_path / "k.txt"
    path.write_text("# warm-up\n3 RIGHT -\n\n2 right+a DOWN+B  # mixed case is fine\n1 - -\n")
    script = read_key_file(path)
    assert len(script) == 6
    assert list(script.p1) == [mask_of(["RIGHT"])] * 3 + [mask_of(["RIGHT", "A"])] * 2 + [0]
    assert list(script.p2) == [0] * 3 + [mask_of(["DOWN", "B"])] * 2 + [0]


@pytest.mark.parametrize(
    "text, message",
    [
        ("3 RIGHT\n", "k.txt:1: expected 'FRAMES P1KEYS P2KEYS'"),
        ("3 RIGHT -\nx A -\n", "k.txt:2: FRAMES must be a positive integer, got 'x'"),
        ("0 A -\n", "k.txt:1: FRAMES must be a positive integer"),
        ("1 - -\n2 A KICK\n", "k.txt:2: unknown key 'KICK'"),
        ("# nothing\n", "no segments"),
    ],
)
def test_bad_lines_are_rejected_with_their_line_number(tmp_path, text, message):
    path = tmp_path / "k.txt"
    path.write_text(text)
    with pytest.raises(KeyFileError, match=message):
        read_key_file(path)


def test_missing_file_is_a_key_file_error(tmp_path):
    with pytest.raises(KeyFileError, match="cannot read key file"):
        read_key_file(tmp_path / "nope.txt")


def test_a_built_in_key_file_reads_by_name_from_any_folder_and_a_path_wins(tmp_path, monkeypatch):
    from wantofight.collect.emulator import GAMES_DIR

    monkeypatch.chdir(tmp_path)  # a folder without the repository's collect/
    packaged = read_key_file(GAMES_DIR / "duel" / "keys" / "walk-under-b.keys")
    by_name = read_key_file("duel/walk-under-b")
    np.testing.assert_array_equal(by_name.p1, packaged.p1)
    np.testing.assert_array_equal(by_name.p2, packaged.p2)
    (tmp_path / "duel").mkdir()
    (tmp_path / "duel" / "walk-under-b").write_text("3 A -\n")  # a file of that name is the user's, not ours
    assert len(read_key_file("duel/walk-under-b")) == 3
    with pytest.raises(KeyFileError, match="duel/walk-under-z: no such file, nor a built-in key file; "
                                           "built-in names: duel/walk-under-a, duel/walk-under-b, duel/walk-under-c$"):
        read_key_file("duel/walk-under-z")


def test_write_then_read_round_trips(tmp_path):
    rng = np.random.default_rng(1)
    p1 = rng.choice([0, mask_of(["A"]), mask_of(["LEFT", "B"])], size=40).astype(np.uint16)
    p2 = rng.choice([0, mask_of(["UP"])], size=40).astype(np.uint16)
    write_key_file(tmp_path / "k.txt", p1, p2)
    script = read_key_file(tmp_path / "k.txt")
    np.testing.assert_array_equal(script.p1, p1)
    np.testing.assert_array_equal(script.p2, p2)
