"""Ctrl-C in long commands: workers leave it to their parent, and a loop can stop at a safe point.

A terminal sends Ctrl-C (SIGINT) to the whole process group, so every worker would raise its own
KeyboardInterrupt and print its own traceback while the parent tries to stop them. Workers started
inside `workers_ignore_ctrl_c()` inherit an ignored SIGINT (spawned or forked alike), so only the
parent sees it and decides: let them finish at a safe point, or end them at once when what they do
is lost anyway. Where a KeyboardInterrupt could strike mid-conversation with workers (a message half
read from a pipe), `SafeStop` turns the first Ctrl-C into a flag the loop checks.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # only it may set signal handlers


@contextmanager
def workers_ignore_ctrl_c() -> Iterator[None]:
    """Processes started in this block ignore SIGINT for life; a Ctrl-C during the block is ignored too."""
    if not _main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class SafeStop:
    """Inside `with stop:` a first Ctrl-C only sets `stop.requested`, for the loop to end at its next
    safe point; a second one raises KeyboardInterrupt at once."""

    def __init__(self):
        self.requested = False
        self.previous = None

    def __enter__(self) -> "SafeStop":
        if _main_thread():
            self.previous = signal.signal(signal.SIGINT, self.request)
        return self

    def request(self, signum=None, frame=None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
