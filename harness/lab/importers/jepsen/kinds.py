"""How driftlab's kinds relate to Jepsen's anomaly names, and which of them make
Jepsen's checker fail (an imported run's expectations)."""

from driftlab.checkers.kinds import TABLE, names

JEPSEN_NAMES: dict[str, str] = {
    **{k.name: k.jepsen for k in TABLE if k.jepsen is not None},
    "realtime-lag": ":worst-realtime-lag",
}
"""Beside each driftlab kind an imported history can show, Jepsen's names for the same
anomaly, and for the realtime lag figure (docs/jepsen.md says where they differ)."""

FORBIDDEN = names(jepsen_fails=True)
"""Kinds whose Jepsen counterparts make Jepsen's checker fail. With `:subscribe` ops the
consumer may be rebalanced, and Jepsen allows poll skips and nonmonotonic polls."""
REBALANCE_ALLOWED = names(rebalance_allowed=True)
