"""driftlab.harness.history.waiting.wait_until: the lab's one polling loop."""

from __future__ import annotations

import threading

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


def test_at_the_deadline_it_is_none_or_the_failure_with_the_last_error() -> None:
    calls, probe = answers(KeyError("not yet"), False)
    assert wait_until(probe, 0, interval=0, retry_on=KeyError) is None
    assert calls[0] == 1
    # The error is kept past the falsy answers after it; a set stop gives up as a deadline.
    stop = threading.Event()
    calls, probe = answers(KeyError("connector x"), False, False)
    with pytest.raises(TimeoutError, match=r"^not RUNNING after 0s; last error: 'connector x'$"):
        wait_until(
            lambda: probe() or (calls[0] == 3 and stop.set()),
            3600,
            interval=0,
            retry_on=KeyError,
            fail=lambda last: TimeoutError(f"not RUNNING after 0s{because(last)}"),
            stop=stop,
        )
    assert calls[0] == 3


def test_an_error_not_retried_propagates_at_once() -> None:
    calls, probe = answers(ValueError("a bad answer"), True)
    with pytest.raises(ValueError, match="a bad answer"):
        wait_until(probe, 60, interval=0, retry_on=KeyError)
    assert calls[0] == 1


def test_retry_on_may_be_a_predicate() -> None:
    calls, probe = answers(OSError("refused"), OSError("refused"), "up")
    assert wait_until(probe, 60, interval=0, retry_on=lambda e: "refused" in str(e)) == "up"
    assert calls[0] == 3
    calls, probe = answers(OSError("no such file"), "up")
    with pytest.raises(OSError, match="no such file"):
        wait_until(probe, 60, interval=0, retry_on=lambda e: "refused" in str(e))
    assert calls[0] == 1


def test_abort_ends_the_wait_before_the_next_probe_with_the_last_error() -> None:
    calls, probe = answers(ConnectionError("refused"), ConnectionError("refused"), True)
    running = iter([True, False])
    with pytest.raises(RuntimeError, match=r"^exited; last error: refused$"):
        wait_until(
            probe,
            60,
            interval=0,
            retry_on=Exception,
            abort=lambda last: None if next(running) else RuntimeError(f"exited{because(last)}"),
        )
    assert calls[0] == 1


def test_a_stop_event_ends_the_wait_early() -> None:
    stop = threading.Event()
    calls, probe = answers(False)
    stop.set()
    assert wait_until(probe, 3600, interval=3600, stop=stop) is None
    assert calls[0] == 1


def test_because_says_nothing_without_an_error() -> None:
    assert because(None) == ""
    assert because(OSError("refused")) == "; last error: refused"
