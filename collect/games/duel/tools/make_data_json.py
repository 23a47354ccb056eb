"""Write the integration's data.json from the linker's label file.

    python tools/make_data_json.py build/duel.labels integration/Duel-Nes/data.json

The ROM keeps per-player variables as 2-byte arrays (P1 at the label, P2 one byte later), so the
RAM contract follows the assembly with no hand-copied addresses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# name in data.json -> (label in src/duel.s, byte offset, stable-retro type)
VARIABLES = {
    "p1_x": ("p_x", 0, "|u1"), "p2_x": ("p_x", 1, "|u1"),
    "p1_y": ("p_y", 0, "|u1"), "p2_y": ("p_y", 1, "|u1"),
    "p1_facing": ("p_facing", 0, "|u1"), "p2_facing": ("p_facing", 1, "|u1"),
    "p1_health": ("p_health", 0, "|u1"), "p2_health": ("p_health", 1, "|u1"),
    "p1_state": ("p_state", 0, "|u1"), "p2_state": ("p_state", 1, "|u1"),
    "p1_wins": ("p_wins", 0, "|u1"), "p2_wins": ("p_wins", 1, "|u1"),
    "p1_move": ("p_move", 0, "|u1"), "p2_move": ("p_move", 1, "|u1"),
    "p1_stun": ("p_stun", 0, "|u1"), "p2_stun": ("p_stun", 1, "|u1"),
    "round": ("round_no", 0, "|u1"),
    "timer": ("timer", 0, "|u1"),
    "phase": ("phase", 0, "|u1"),
    "match_over": ("match_over", 0, "|u1"),
    "frame": ("frame", 0, "<u2"),
    "cpu_load": ("cpu_load", 0, "|u1"),
    # beyond the RAM names of docs/contracts.md: damage dealt this match, so rewards ignore the refill at round reset
    "p1_dealt": ("p_dealt", 0, "<u2"), "p2_dealt": ("p_dealt", 2, "<u2"),
}


def labels(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()  # "al 00000A .p_x"
        if len(parts) == 3 and parts[0] == "al":
            out[parts[2].lstrip(".")] = int(parts[1], 16)
    return out


def main(label_file: Path, out: Path) -> None:
    addr = labels(label_file)
    info = {name: {"address": addr[label] + off, "type": typ}
            for name, (label, off, typ) in sorted(VARIABLES.items())}
    out.write_text(json.dumps({"info": info}, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
