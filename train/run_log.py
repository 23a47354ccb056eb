"""What a run says while it trains: console notes, the progress bar and one metrics line per step.

`RunLog` is the part of the trainer that writes; only the main rank prints or writes. The metrics file
(`RUN_DIR/metrics.jsonl`, train/metrics.py) opens once the run folder exists, so a run that fails to
start leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path

from wantofight.train.metrics import MetricsWriter


class RunLog:
    def __init__(self, stage: str, *, main: bool, show_progress: bool, log_every: int):
        self.stage, self.main, self.show_progress, self.log_every = stage, main, show_progress, log_every
        self.metrics: MetricsWriter | None = None
        self.latest: dict = {}
        """The last step's record, validation's included: the run's last line quotes it."""

    def print(self, message: str) -> None:
        """A note on stderr (rich markup), from the main rank only."""
        if self.main:
            from rich.console import Console

            Console(stderr=True).print(message, highlight=False, soft_wrap=True)

    def open(self, run_dir: Path, resume_step: int | None) -> None:
        """Start `metrics.jsonl` (cut back to `resume_step` when resuming)."""
        self.metrics = MetricsWriter(run_dir, enabled=self.main, resume_step=resume_step)

    def progress(self, total: int, completed: int):
        """The steps' progress bar (a context manager; hidden with --no-progress and off the main rank)."""
        from wantofight.progress import Progress

        return Progress(self.stage, total, "steps", "{stats}", enabled=self.show_progress and self.main, eta=True,
                        completed=completed, stats="")

    def record(self, record: dict, progress) -> None:
        """Write one step's metrics and, every `log_every` steps, show its loss and speed on the bar."""
        self.metrics.write(record)
        self.latest.update(record)
        if progress is not None and record["step"] % self.log_every == 0:
            progress.update(completed=record["step"],
                            stats=f"loss {record['loss']:.4f}  {record['it_per_s']:.2f} it/s  "
                                  f"{record['samples_per_s']:.2f} samples/s")

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
