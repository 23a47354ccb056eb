"""Run metrics: `RUN_DIR/metrics.jsonl` (one JSON object per step, rank 0) and TensorBoard if installed."""

from __future__ import annotations

import json
import math
from pathlib import Path


class MetricsWriter:
    """Appends one JSON line per call; mirrors scalars to TensorBoard when `tensorboard` is importable.

    On resume the file is truncated to the lines before the resumed step, so the log of a resumed
    run equals that of an uninterrupted one.
    """

    def __init__(self, run_dir: Path, enabled: bool = True, resume_step: int | None = None):
        self.enabled = enabled
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = None
        self._tb = None
        if not enabled:
            return
        if resume_step is not None and self.path.exists():
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line).get("step", 0) <= resume_step]
            self.path.write_text("".join(line + "\n" for line in kept))
        elif resume_step is None and self.path.exists():
            self.path.unlink()
        self._file = self.path.open("a", buffering=1)
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(Path(run_dir) / "tensorboard"), purge_step=resume_step)
        except ImportError:
            self._tb = None

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        clean = {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in record.items()}
        self._file.write(json.dumps(clean) + "\n")
        if self._tb is not None:
            step = record["step"]
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self._tb.add_scalar(key, value, step)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
