"""wantofight.interrupts: a Ctrl-C held over a short block reaches the handler in place when it ends."""

import signal

import pytest

from wantofight.interrupts import SafeStop, ctrl_c_held


def test_a_ctrl_c_held_in_the_block_raises_when_the_block_ends():
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_held():
            signal.raise_signal(signal.SIGINT)
            reached_the_end = True  # the block itself is not cut short
    assert reached_the_end


def test_one_held_ctrl_c_inside_safe_stop_only_requests_the_stop():
    with SafeStop() as stop:
        with ctrl_c_held():
            signal.raise_signal(signal.SIGINT)
        assert stop.requested


def test_two_held_ctrl_c_inside_safe_stop_stop_at_once_as_two_outside_would():
    """SafeStop's second Ctrl-C means "now": two arriving during one held block must not count as one."""
    with pytest.raises(KeyboardInterrupt):
        with SafeStop():
            with ctrl_c_held():
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
