"""Building the model leaves the process as it found it: no folder left in the temp dir, the root
logger's level untouched, and only open_clip's random-init warning silenced (in a fresh process,
since open_clip registers the tiny tower once per process)."""

from __future__ import annotations

import json
import subprocess
import sys

BUILD = """
import json, logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
from wantofight_model.presets import get_preset
from wantofight_model.player_association import ReferenceEncoder
before = logging.getLogger().level
ReferenceEncoder.from_config(get_preset("tiny"))
logging.warning("still heard")
print(json.dumps({"level_before": before, "level_after": logging.getLogger().level,
                  "tmp": sorted(os.listdir(os.environ["TMPDIR"])), "filters": len(logging.getLogger().filters)}))
"""


def test_building_the_reference_encoder_has_no_side_effects(tmp_path):
    proc = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, check=True,
                          env={**__import__("os").environ, "TMPDIR": str(tmp_path)})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["level_after"] == result["level_before"] == 20
    assert [name for name in result["tmp"] if name.startswith("wtf-")] == [], "our temporary folder was left behind"
    assert result["filters"] == 0
    assert "No pretrained weights loaded" not in proc.stderr
    assert "still heard" in proc.stderr
