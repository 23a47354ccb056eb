"""Ctrl-C in long commands: workers leave it to their parent, and a loop can stop at a safe point.

A terminal sends Ctrl-C (SIGINT) to the whole process group, so every worker would raise its own
KeyboardInterrupt and print its own traceback while the parent tries to stop them. Workers started
inside `workers_ignore_ctrl_c()` inherit an ignored SIGINT (spawned or forked alike), so only the
parent sees it and decides: let them finish at a safe point, or end them at once when what they do
is lost anyway. Where a KeyboardInterrupt could strike mid-conversation with workers (a message half
read from a pipe), `SafeStop` turns the first Ctrl-C into a flag the loop checks. `ctrl_c_held()`
holds a Ctrl-C until a short block ends, for C libraries that free their objects in `__del__`
(decord): a KeyboardInterrupt raised inside `__del__` is printed and dropped, and the command would
go on as if it had never been stopped.
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


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Each Ctrl-C inside the block takes effect when the block ends (as KeyboardInterrupt, or through
    whatever handler was in place: `SafeStop`'s flag, an outer `ctrl_c_held`). Keep the block short."""
    if not _main_thread() or signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        yield  # only the main thread gets signals; an ignored or default SIGINT stays as it is
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        for _ in caught:  # each one, as it would have come: SafeStop's second Ctrl-C means "stop now"
            signal.raise_signal(signal.SIGINT)  # the restored handler runs now, outside the block


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
