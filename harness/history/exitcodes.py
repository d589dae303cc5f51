"""The exit status of every driftlab command: one meaning per code, so that CI jobs, the
matrix and the pytest plugin never count a crash of the lab as an anomaly found.

    0    clean, or the verdict the scenario predicts
    1    the verdict only: a forbidden anomaly (run, suite: or a prediction not reproduced);
         for a pipeline file, also a store that did not converge and a process of yours
         that did not start (PipelineFailure) or come back after a fault: your
         pipeline failed, not the lab
    2    bad input: an unknown name, a malformed option, a missing or corrupt run folder
    3    the lab itself failed: a service down or not starting, a port taken, the Spark
         master unreachable, a full disk, a read-only runs folder, an internal error;
         or an inconclusive run (nothing ran, a kind the claim names had no chance,
         a fault window never took effect or had no operation: the claim was not
         tested), or a verdict of `lab failed` (the lab recorded a failure of its own)
    130  interrupted (Ctrl-C, SIGTERM)

An expected failure prints one line naming the problem and the fix; the detail goes to
the run's log. `describe` maps an exception to its code and that line.
"""

from __future__ import annotations

import errno

OK = 0
VERDICT = 1
BAD_INPUT = 2
LAB_FAILED = 3
INTERRUPTED = 130

HELP = (
    "Exit status: 0 clean or as predicted; 1 forbidden anomaly (the verdict only; a "
    "pipeline file's: also a store not converged, a process of yours that did not start); "
    "2 bad input; 3 the lab itself failed (service down, port taken, Spark master "
    "unreachable, disk full, read-only runs folder) or the run is inconclusive; "
    "130 interrupted."
)


class BadInput(Exception):
    """The user's input cannot be used; `str(error)` names the problem and the fix.
    A history that cannot be read (driftlab.harness.history.errors.HistoryError) is one."""


class PipelineFailure(Exception):
    """The user's pipeline failed before it could be judged (a process of theirs that
    did not start); `str(error)` says so in the process's own words. Exit 1: the
    pipeline's outcome, never the lab's."""


class LabFailure(Exception):
    """The lab's own machinery failed (not the system under test); the message names the
    problem and the fix. A service that fails (driftlab.harness.lab.services.base.ServiceError) is
    one."""


def describe(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and one-line message of an expected failure, None for anything else
    (a bug, which deserves its traceback)."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED, "interrupted"
    if isinstance(exc, BadInput):
        return BAD_INPUT, str(exc)
    if isinstance(exc, PipelineFailure):
        return VERDICT, str(exc)
    if isinstance(exc, LabFailure):
        return LAB_FAILED, str(exc)
    if isinstance(exc, OSError):
        message = os_problem(exc)
        if message is not None:
            return LAB_FAILED, message
    return None


def os_problem(exc: OSError) -> str | None:
    """One line for the file-system failures a lab meets (full disk, read-only or
    forbidden folder), None for any other OSError."""
    where = exc.filename or "a file"
    if exc.errno == errno.ENOSPC:
        return f"disk full while writing {where}; free space there and run again"
    if exc.errno == errno.EDQUOT:
        return f"disk quota exceeded while writing {where}; free space there and run again"
    if exc.errno == errno.EROFS:
        return (
            f"{where} is on a read-only file system; use a folder on a writable one "
            "(for run folders: --runs-dir)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied on {where}; make it writable or choose another folder"
    return None
