"""One progress display for every long command: a rich bar on a terminal, plain lines otherwise.

    with Progress("encode", total=40, unit="windows") as bar:
        bar.advance()                                  # or bar.update(completed=n, rate=...)

Without a terminal (a log file, CI, `| tee`) a rich bar prints nothing until it ends, so a long
command would look hung: there the same progress is printed as one line every
`WTF_PROGRESS_SECONDS` seconds (default 5), plus a last line if any was printed. Both go to stderr,
so stdout keeps only results. `enabled=False` (`--no-progress`) prints nothing.
"""

from __future__ import annotations

import os
import time

DEFAULT_SECONDS = 5.0


class Progress:
    """A counted task: `label`, `completed` of `total` `unit`s, and a `detail` format string over
    the fields given to `update()` (e.g. "{frames:,} frames")."""

    def __init__(self, label: str, total: int | None = None, unit: str = "", detail: str = "",
                 enabled: bool = True, transient: bool = False, eta: bool = False, completed: int = 0, **fields):
        self.label, self.total, self.unit, self.detail = label, total, unit, detail
        self.enabled, self.transient, self.eta = enabled, transient, eta
        self.fields = fields
        self.completed = self.first = completed  # a resumed run starts part-way
        self.bar = None
        self.lines = 0
        self.shown = None
        """The count and detail of the last line printed."""

    # ------------------------------------------------------------------------------------------

    def __enter__(self) -> "Progress":
        if not self.enabled:
            return self
        from rich.console import Console

        console = Console(stderr=True)
        self.started = self.last_line = time.perf_counter()
        self.every = float(os.environ.get("WTF_PROGRESS_SECONDS", DEFAULT_SECONDS))
        if console.is_terminal:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.bar = Bar(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("{task.fields[text]}"),
                           TimeRemainingColumn() if self.eta else TimeElapsedColumn(),
                           console=console, transient=self.transient)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total, completed=self.completed, text=self._text())
        else:
            self.console = console
        return self

    def __exit__(self, kind, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
        elif self.enabled and self.lines and kind is None and self._state() != self.shown:
            self._line()  # the last state, unless the last line already showed it

    def update(self, completed: int | None = None, advance: int = 0, total: int | None = None, **fields) -> None:
        """Set or advance the count, the total and the detail fields; shows them (or prints a line when due)."""
        if completed is not None:
            self.completed = completed
        self.completed += advance
        if total is not None:
            self.total = total
        self.fields.update(fields)
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(self.task, completed=self.completed, total=self.total, text=self._text())
        elif time.perf_counter() - self.last_line >= self.every and self._state() != self.shown:
            self._line()  # a line that would repeat the last one says nothing new

    def advance(self, n: int = 1, **fields) -> None:
        self.update(advance=n, **fields)

    # ------------------------------------------------------------------------------------------

    def _state(self) -> tuple:
        return self.completed, self.total, self._text()

    def _text(self) -> str:
        detail = self.detail.format(**self.fields) if self.detail else ""
        return " · ".join(part for part in (self.unit, detail) if part)

    def _line(self) -> None:
        now = time.perf_counter()
        count = f"{self.completed:,}" if self.total is None else f"{self.completed:,}/{self.total:,}"
        parts = [f"{self.label}: {count} {self.unit}".rstrip()]
        if self.total:
            parts[0] += f" ({self.completed / self.total:.0%})"
        if self.detail:
            parts.append(self.detail.format(**self.fields))
        parts.append(f"{_clock(now - self.started)} elapsed")
        if self.eta and self.total and self.completed > self.first:
            rate = (self.completed - self.first) / max(now - self.started, 1e-9)
            parts.append(f"{_clock((self.total - self.completed) / rate)} left")
        self.console.print(" · ".join(parts), markup=False, highlight=False, soft_wrap=True)
        self.last_line, self.lines, self.shown = now, self.lines + 1, self._state()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
