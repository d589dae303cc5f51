"""The one error a bad history raises: its message names the file, the place and the fix."""

from __future__ import annotations

from driftlab.harness.history.exitcodes import BadInput


class HistoryError(BadInput):
    """A history cannot be read as written; `str(error)` is meant for the user.

    The message names the file, the line (JSON lines) or row group (Parquet), what is
    wrong and what to do about it. It never carries a library traceback.
    """
