"""How driftlab's kinds relate to Jepsen's anomaly names, and which of them make
Jepsen's checker fail (an imported run's expectations)."""

from checkers.kinds import TABLE

JEPSEN_NAMES: dict[str, str] = {
    **{k.name: k.jepsen for k in TABLE if k.jepsen is not None},
    "realtime-lag": ":worst-realtime-lag",
}
"""Beside each driftlab kind an imported history can show, Jepsen's names for the same
anomaly, and for the realtime lag figure (docs/jepsen.md says where they differ)."""

FORBIDDEN = (
    "lost-message",
    "inconsistent-offset",
    "nonmonotonic-poll",
    "poll-skip",
    "duplicate-offset",
    "nonmonotonic-send",
)
"""Kinds whose Jepsen counterparts make Jepsen's checker fail. With `:subscribe` ops the
consumer may be rebalanced, and Jepsen allows poll skips and nonmonotonic polls."""
REBALANCE_ALLOWED = ("nonmonotonic-poll", "poll-skip")
