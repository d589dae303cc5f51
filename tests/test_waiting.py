"""driftlab.harness.history.waiting.wait_until: the lab's one polling loop."""

from __future__ import annotations

import pytest

from driftlab.harness.history.waiting import because, wait_until


def answers(*replies: object) -> tuple[list[int], object]:
    """A probe giving `replies` in turn (an exception instance is raised), and its call count."""
    calls = [0]

    def probe() -> object:
        reply = replies[min(calls[0], len(replies) - 1)]
        calls[0] += 1
        if isinstance(reply, BaseException):
            raise reply
        return reply

    return calls, probe


def test_the_first_truthy_answer_is_returned() -> None:
    calls, probe = answers(None, 0, "", {"done": 3})
    assert wait_until(probe, 60, interval=0) == {"done": 3}
    assert calls[0] == 4


def test_once_the_timeout_has_passed_it_is_none() -> None:
    calls, probe = answers(None, False)
    assert wait_until(probe, 0, interval=0) is None
    assert calls[0] == 1


def test_an_error_of_the_probe_propagates_at_once() -> None:
    calls, probe = answers(ValueError("a bad answer"), True)
    with pytest.raises(ValueError, match="a bad answer"):
        wait_until(probe, 60, interval=0)
    assert calls[0] == 1


def test_because_names_the_last_error_or_nothing() -> None:
    assert because([]) == ""
    assert because([OSError("refused")]) == "; last error: refused"
