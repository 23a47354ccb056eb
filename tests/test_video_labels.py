"""The benchmark's side-by-side videos name their panels (emulator | generated) and count frames in
words a reader understands, like `wtf generate --hud` and the validation videos (tests there)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from hud_helpers import index_line, title
from wantofight import hud
from wantofight.annotate.video import decode_mp4


def test_benchmark_side_by_side_names_emulator_and_generated(tmp_path):
    from wantofight.benchmark.run import write_side_by_side

    rng = np.random.default_rng(0)
    real, fake = (rng.integers(0, 255, (9, 32, 40, 3), dtype=np.uint8) for _ in range(2))
    case = SimpleNamespace(keys=np.zeros((9, 2), np.uint16), rows=9)
    write_side_by_side(tmp_path / "case.mp4", [(0, real[:5], fake[:5]), (5, real[5:], fake[5:])], case, fps=30)  # two pieces, one video
    video = decode_mp4((tmp_path / "case.mp4").read_bytes())  # H.264 yuv420p: the reader allows for it
    generated_x = (40 + 2) * 3 * 2  # the emulator's panel, the 2 px gap, at 3x then the HUD's 2x
    assert {(title(f), title(f, generated_x)) for f in video} == {("EMULATOR", "GENERATED")}
    layout = hud.hud_layout(32 * 3, (2 * 40 + 2) * 3, 2)
    assert [index_line(f[hud.TITLE_H * 2:], layout) for f in video] == [f"FRAME {t} OF 9" for t in range(9)]
