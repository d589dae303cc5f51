"""How driftlab's kinds relate to Jepsen's anomaly names, and which of them make
Jepsen's checker fail (an imported run's expectations)."""

JEPSEN_NAMES: dict[str, str] = {
    "lost-message": ":lost-write, :unseen",
    "poll-skip": ":poll-skip, :int-poll-skip",
    "nonmonotonic-poll": ":nonmonotonic-poll, :int-nonmonotonic-poll",
    "inconsistent-offset": ":inconsistent-offsets",
    "duplicate-offset": ":duplicate",
    "nonmonotonic-send": ":nonmonotonic-send, :int-nonmonotonic-send",
    "duplicate-delivery": "(none: redelivery is allowed)",
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
