"""Jepsen kafka histories imported and judged (docs/jepsen.md).

The cases are those of Jepsen's own kafka checker tests (jepsen/test/jepsen/tests/
kafka_test.clj), written as the EDN Jepsen's store writes, imported, and judged by the
reference checkers (the specification the Spark checkers are kept in agreement with).
Each test says what Jepsen's checker reports for the same history; where driftlab
differs, docs/jepsen.md says why. One test runs the whole `driftlab analyze --from
jepsen` command with Spark.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from reference_counts import reference_anomalies, reference_verdict, run_events
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

from driftlab.checkers.reference.reorder import realtime_lags, worst_realtime_lag
from driftlab.harness.cli import app
from driftlab.harness.lab.importers.jepsen import (
    FORBIDDEN,
    JEPSEN_NAMES,
    JepsenImportError,
    import_history,
)


def o(index: int, process: int | str, type_: str, f: str, value: str) -> str:
    """One op as Jepsen's store writes it; `value` is EDN, as in kafka_test.clj's `o`."""
    return (
        f"{{:index {index}, :time {index}, :type :{type_}, :process {process}, "
        f":f :{f}, :value {value}}}"
    )


def imported(tmp_path: Path, ops: list[str], name: str = "history.edn") -> Path:
    """The ops written as a history file and imported into a fresh run folder."""
    source = tmp_path / name
    source.write_text("\n".join(ops) + "\n")
    run = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    import_history(source, run)
    return run


def judge(tmp_path: Path, ops: list[str], name: str = "history.edn") -> Counter[str]:
    """Import the ops into a fresh run folder and count the reference checkers' kinds."""
    return Counter(a.kind for a in reference_anomalies(imported(tmp_path, ops, name)))


# --- lost-write-test ----------------------------------------------------------------

LOST_CONSISTENT = [
    o(0, 0, "invoke", "send", "[[:send :x :a]]"),
    o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
    o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :d]]"),
    o(3, 0, "ok", "send", "[[:send :x [1 :b]] [:send :x [3 :d]]]"),
    o(4, 1, "invoke", "send", "[[:send :x :c]]"),
    o(5, 1, "info", "send", "[[:send :x :c]]"),
    o(6, 0, "invoke", "poll", "[[:poll]]"),
    o(7, 0, "ok", "poll", "[[:poll {:x [[2 :c]]}]]"),
]


def test_lost_write_consistent(tmp_path: Path) -> None:
    """Jepsen: :lost-write a and b (below c, the highest read), :unseen x 3 (a, b, d).
    driftlab: a lost-message for each acknowledged send no one polled: a, b and d."""
    run = imported(tmp_path, LOST_CONSISTENT)
    lost = [a for a in reference_anomalies(run) if a.kind == "lost-message"]
    assert sorted(json.loads(a.evidence)[0]["msg_id"] for a in lost) == ["x/a", "x/b", "x/d"]
    assert {a.kind for a in reference_anomalies(run)} == {"lost-message"}


def test_lost_write_inconsistent_offsets(tmp_path: Path) -> None:
    """a and b both at offset 0, c at 2, a poll reads b and c. Jepsen: :lost-write a and
    :inconsistent-offsets x 0 #{a b}. driftlab: the same two."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x :a]]"),
        o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
        o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :c]]"),
        o(3, 0, "ok", "send", "[[:send :x [0 :b]] [:send :x [2 :c]]]"),
        o(4, 0, "invoke", "poll", "[[:poll]]"),
        o(5, 0, "ok", "poll", "[[:poll {:x [[0 :b] [2 :c]]}]]"),
    ]
    assert judge(tmp_path, ops) == {"lost-message": 1, "inconsistent-offset": 1}


ATOMIC = {
    "send-ab": o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :b]]"),
    "send-ab'": o(1, 0, "info", "send", "[[:send :x :a] [:send :y [0 :b]]]"),
    "send-c": o(2, 1, "invoke", "send", "[[:send :y :c]]"),
    "send-c'": o(3, 1, "info", "send", "[[:send :y :c]]"),
    "poll-a": o(4, 2, "invoke", "poll", "[[:poll]]"),
    "poll-a'": o(5, 2, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
    "poll-c": o(6, 3, "invoke", "poll", "[[:poll]]"),
    "poll-c'": o(7, 3, "ok", "poll", "[[:poll {:y [[1 :c]]}]]"),
}


def test_lost_write_atomic(tmp_path: Path) -> None:
    """A crashed send counts once any of its values was read. Jepsen: no lost write
    without the poll of a; with it, :lost-write y b. driftlab: the same."""
    without = [v for k, v in ATOMIC.items() if not k.startswith("poll-a")]
    assert judge(tmp_path, without) == {}
    assert judge(tmp_path, list(ATOMIC.values())) == {"lost-message": 1}


# --- poll-skip-test -----------------------------------------------------------------

POLL_SKIP = {
    "poll-1-2": o(0, 0, "invoke", "poll", "[[:poll]]"),
    "poll-1-2'": o(1, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b]]}]]"),
    "poll-3": o(2, 1, "invoke", "poll", "[[:poll]]"),
    "poll-3'": o(3, 1, "ok", "poll", "[[:poll {:x [[3 :c]]}]]"),
    "poll-4": o(6, 0, "invoke", "poll", "[[:poll]]"),
    "poll-4'": o(7, 0, "ok", "poll", "[[:poll {:x [[4 :d]]}]]"),
    "write-6": o(10, 2, "invoke", "send", "[[:send :x :f]]"),
    "write-6'": o(11, 2, "ok", "send", "[[:send :x [6 :f]]]"),
    "poll-7": o(12, 0, "invoke", "poll", "[[:poll]]"),
    "poll-7'": o(13, 0, "ok", "poll", "[[:poll {:x [[7 :g]]}]]"),
    "write-*": o(14, 3, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] "
                 "[:send :x :d] [:send :x :g]]"),
    "write-*'": o(15, 3, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] "
                  "[:send :x :d] [:send :x :g]]"),
}  # fmt: skip


def _with(ops: dict[str, str], **before: list[str]) -> list[str]:
    """`ops` in order, with the ops given for a name (`-` as `_`) inserted before it."""
    out: list[str] = []
    for name, op in ops.items():
        out += before.get(name.replace("-", "_"), [])
        out.append(op)
    return out


def test_poll_skip(tmp_path: Path) -> None:
    """Process 0 reads offsets 1 2, 4, 7. Jepsen: :poll-skip over c (offset 3, known only
    from process 1's poll) and over f (offset 6, an acknowledged send), and (not asserted
    by kafka_test.clj) :lost-write f. driftlab: the same two skips and the lost f."""
    found = judge(tmp_path, list(POLL_SKIP.values()))
    assert found == {"poll-skip": 2, "lost-message": 1}
    skips = sorted(
        a.detail for a in reference_anomalies(tmp_path / "run-1") if a.kind == "poll-skip"
    )
    assert [re.search(r"skipping offset (\d+)", d)[1] for d in skips] == ["3", "6"]


def test_poll_skip_allowed_after_a_subscribe_that_drops_the_key(tmp_path: Path) -> None:
    """Jepsen: no poll skip when process 0 subscribes to [:y] between its polls (and
    assigns [:y], even crashing); still both when the subscribe keeps :x."""
    drop = [
        o(4, 0, "invoke", "subscribe", "[:y]"),
        o(5, 0, "ok", "subscribe", "[:y]"),
    ]
    assign_y = [o(8, 0, "invoke", "assign", "[:y]"), o(9, 0, "info", "assign", "[:y]")]
    ops = _with(POLL_SKIP, poll_4=drop, write_6=assign_y)
    assert judge(tmp_path, ops) == {"lost-message": 1}
    keep = [
        o(4, 0, "invoke", "subscribe", "[:x :y]"),
        o(5, 0, "ok", "subscribe", "[:x :y]"),
    ]
    assign_xy = [o(8, 0, "invoke", "assign", "[:x :y]"), o(9, 0, "ok", "assign", "[:x :y]")]
    ops = _with(POLL_SKIP, poll_4=keep, write_6=assign_xy)
    assert judge(tmp_path, ops) == {"poll-skip": 2, "lost-message": 1}


SIX_SENT = [
    o(0, 0, "invoke", "send", "[" + " ".join(f"[:send :x {i}]" for i in range(6)) + "]"),
    o(1, 0, "ok", "send", "[" + " ".join(f"[:send :x [{i} {i}]]" for i in range(6)) + "]"),
    o(1, 1, "invoke", "txn", "[[:poll]]"),
    o(2, 1, "ok", "txn", "[[:poll {:x [[0 0]]}]]"),
]


TXN_ABORT_REWINDS = [
    o(0, 0, "invoke", "send", "[[:send :x 0] [:send :x 1] [:send :x 2]]"),
    o(1, 0, "ok", "send", "[[:send :x [0 0]] [:send :x [1 1]] [:send :x [2 2]]]"),
    *SIX_SENT[2:],
    o(3, 1, "invoke", "txn", "[[:poll]]"),
    o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
    o(5, 1, "invoke", "txn", "[[:poll]]"),
    o(6, 1, "info", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
    o(7, 1, "invoke", "txn", "[[:poll]]"),
    o(8, 1, "ok", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
]


def test_txn_abort_rewinds(tmp_path: Path) -> None:
    """Polls of 1 2 that abort (fail, then info) and a committed poll of 1 2 after them.
    Jepsen: no error. driftlab: no forbidden kind; 1 and 2 delivered three times each are
    duplicate deliveries, which Jepsen allows (at-least-once)."""
    assert judge(tmp_path, TXN_ABORT_REWINDS) == {"duplicate-delivery": 2}


def test_abort_does_not_roll_back(tmp_path: Path) -> None:
    """Polls 0, then 1 2 (fail), 3 4 (fail), then 5 (ok). Jepsen: two :poll-skip (3 4
    and 5, each after 0) and :lost-write 1 2 3 4 (read only by aborted polls). driftlab:
    the committed poll of 5 skips 1..4; an aborted poll is judged on its own, and what
    it read counts as delivered."""
    ops = [
        *SIX_SENT,
        o(3, 1, "invoke", "txn", "[[:poll]]"),
        o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
        o(5, 1, "invoke", "txn", "[[:poll]]"),
        o(6, 1, "fail", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
        o(7, 1, "invoke", "txn", "[[:poll]]"),
        o(8, 1, "ok", "txn", "[[:poll {:x [[5 5]]}]]"),
    ]
    assert judge(tmp_path, ops) == {"poll-skip": 1}


def test_info_poll_skip(tmp_path: Path) -> None:
    """Poll 0, then 1 2 (fail), then 3 4 (info). Jepsen: :poll-skip 0 -> 3. driftlab:
    none, since a crashed poll is judged on its own (docs/jepsen.md); 5 is lost."""
    ops = [
        *SIX_SENT,
        o(3, 1, "invoke", "txn", "[[:poll]]"),
        o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
        o(5, 1, "invoke", "txn", "[[:poll]]"),
        o(6, 1, "info", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
    ]
    assert judge(tmp_path, ops) == {"lost-message": 1}


# --- nonmonotonic-poll-test ---------------------------------------------------------

NONMONOTONIC = {
    "send*": o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] "
               "[:send :x :d]]"),
    "send*'": o(1, 0, "ok", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] "
                "[:send :x :d]]"),
    "poll-123": o(2, 0, "invoke", "poll", "[[:poll]]"),
    "poll-123'": o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b], [3 :c]]}]]"),
    "poll-234": o(6, 0, "invoke", "poll", "[[:poll]]"),
    "poll-234'": o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b], [3 :c], [4 :d]]}]]"),
}  # fmt: skip


def test_nonmonotonic_poll(tmp_path: Path) -> None:
    """Process 0 reads 1 2 3, then 2 3 4. Jepsen: one :nonmonotonic-poll (c then b).
    driftlab: the same; b and c read twice are also duplicate deliveries."""
    found = judge(tmp_path, list(NONMONOTONIC.values()))
    assert found == {"nonmonotonic-poll": 1, "duplicate-delivery": 2}


@pytest.mark.parametrize(("f", "keys", "flagged"), [
    ("subscribe", "[:y]", False),
    ("assign", "[:y]", False),
    ("subscribe", "[:x :y]", True),
    ("assign", "[:x :y]", True),
])  # fmt: skip
def test_nonmonotonic_poll_across_reassignment(
    tmp_path: Path, f: str, keys: str, flagged: bool
) -> None:
    """Jepsen: a subscribe or assign that drops :x forgets the last read; one keeping
    :x does not. driftlab: the same."""
    between = [o(4, 0, "invoke", f, keys), o(5, 0, "ok", f, keys)]
    found = judge(tmp_path, _with(NONMONOTONIC, poll_234=between))
    assert found["nonmonotonic-poll"] == (1 if flagged else 0)


# --- inconsistent-offsets-test, duplicate-test --------------------------------------

INFO_CONFLICTS = [
    o(0, 0, "invoke", "send", "[[:send :x 1] [:send :y 1]]"),
    o(1, 0, "info", "send", "[[:send :x [0 1]] [:send :y 1]]"),
    o(2, 1, "invoke", "send", "[[:send :x 2]]"),
    o(3, 1, "ok", "send", "[[:send :x [0 2]]]"),
]


def test_inconsistent_offsets_need_a_committed_writer(tmp_path: Path) -> None:
    """A crashed send and an acknowledged one at offset 0. Jepsen: no conflict until a
    poll reads the crashed op's other value, then :inconsistent-offsets x 0 #{1 2}.
    driftlab: the same (and 2, never polled, is lost: Jepsen's :unseen)."""
    assert judge(tmp_path, INFO_CONFLICTS) == {"lost-message": 1}
    polled = [
        *INFO_CONFLICTS,
        o(4, 2, "invoke", "poll", "[[:poll]]"),
        o(5, 2, "ok", "poll", "[[:poll {:y [[5 1]]}]]"),
    ]
    # x 1 (acknowledged once the poll proves its op) and x 2 are never polled.
    assert judge(tmp_path, polled) == {"inconsistent-offset": 1, "lost-message": 2}


DUPLICATE = [
    o(0, 0, "invoke", "send", "[[:send :x :a]]"),
    o(1, 0, "ok", "send", "[[:send :x [1 :a]]]"),
    o(2, 1, "invoke", "send", "[[:send :x :b]]"),
    o(3, 1, "info", "send", "[[:send :x :b]]"),
    o(4, 2, "invoke", "poll", "[[:poll]]"),
    o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :a]]}]]"),
]


def test_duplicate(tmp_path: Path) -> None:
    """a sent at offset 1 and polled at offset 3. Jepsen: :duplicate a at [1 3].
    driftlab: one duplicate-offset, a at 1 and 3."""
    assert judge(tmp_path, DUPLICATE) == {"duplicate-offset": 1}
    (found,) = reference_anomalies(tmp_path / "run-1")
    assert found.detail == "x/a is at offsets 1, 3 of x[0]"


def test_duplicate_in_an_aborted_poll(tmp_path: Path) -> None:
    """0 sent at offset 1, 1 sent at 2 by a send that failed; an aborted poll reads them
    at 11 and 12. Jepsen: :duplicate 0 at [1 11], not 1 (its write never happened).
    driftlab: the same; and the message 0 is delivered, so not lost."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x 0]]"),
        o(1, 0, "ok", "send", "[[:send :x [1 0]]]"),
        o(2, 0, "invoke", "send", "[[:send :x 1]]"),
        o(3, 0, "fail", "send", "[[:send :x [2 1]]]"),
        o(4, 1, "invoke", "poll", "[[:poll]]"),
        o(5, 1, "fail", "poll", "[[:poll {:x [[11 0] [12 1]]}]]"),
    ]
    assert judge(tmp_path, ops) == {"duplicate-offset": 1}
    (found,) = reference_anomalies(tmp_path / "run-1")
    assert found.detail == "x/0 is at offsets 1, 11 of x[0]"


def test_duplicate_hash_insensitive(tmp_path: Path) -> None:
    """Ten values each sent at offset 0 and polled at offset 1. Jepsen: :inconsistent-
    offsets at 0 and at 1 and ten :duplicate. driftlab: the same; process 1 reading
    offset 1 ten times is nonmonotonic nine times (Jepsen's test does not assert its own
    nonmonotonic results here); process 0's sends all at offset 0 do not go back."""
    ops: list[str] = []
    for value in range(10):
        i = 4 * value
        ops += [
            o(i, 0, "invoke", "send", f"[[:send :x {value}]]"),
            o(i + 1, 0, "ok", "send", f"[[:send :x [0 {value}]]]"),
            o(i + 2, 1, "invoke", "poll", "[[:poll]]"),
            o(i + 3, 1, "ok", "poll", f"[[:poll {{:x [[1 {value}]]}}]]"),
        ]
    assert judge(tmp_path, ops) == {
        "inconsistent-offset": 2,
        "duplicate-offset": 10,
        "nonmonotonic-poll": 9,
    }


# --- nonmonotonic-send-test, int-nonmonotonic-send-test ------------------------------

SEND_34 = [
    o(0, 0, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
    o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [4 :d]]]"),
]
SEND_12 = [
    o(10, 0, "invoke", "send", "[[:send :x 1] [:send :x 2]]"),
    o(11, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x [2 :b]]]"),
]


@pytest.mark.parametrize(
    ("between", "expected"),
    [
        ([], 1),
        (["subscribe", "[:y]", "ok"], 0),
        (["assign", "[:y]", "info"], 0),
        (["subscribe", "[:x :y]", "ok"], 1),
        (["assign", "[:x :y]", "ok"], 1),
    ],
)
def test_nonmonotonic_send(tmp_path: Path, between: list[str], expected: int) -> None:
    """Process 0 sends offsets 3 4, then 1 2. Jepsen: one :nonmonotonic-send (d then a),
    none when a subscribe or assign between them drops :x (even one that crashed),
    still one when it keeps :x. driftlab: the same (nothing polls: all four are lost)."""
    reassign = []
    if between:
        f, keys, done = between
        reassign = [o(2, 0, "invoke", f, keys), o(3, 0, done, f, keys)]
    found = judge(tmp_path, [*SEND_34, *reassign, *SEND_12])
    assert found == {"lost-message": 4, **({"nonmonotonic-send": 1} if expected else {})}


def test_int_nonmonotonic_send(tmp_path: Path) -> None:
    """Within one op, c acknowledged at offset 3 then a at 1 (x); and d, b sent by a
    crashed op that a poll later reads as b at 2, d at 4 (y). Jepsen: :int-nonmonotonic-
    send on x and on y. driftlab: x only: a crashed send is recorded only with the
    offset its op returned, and the crashed op returned none (docs/jepsen.md)."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x 3] [:send :x 1]]"),
        o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [1 :a]]]"),
        o(2, 0, "invoke", "send", "[[:send :y :d] [:send :y :b]]"),
        o(3, 0, "info", "send", "[[:send :y :d] [:send :y :b]]"),
        o(4, 1, "invoke", "send", "[[:send :y :c]]"),
        o(5, 1, "info", "send", "[[:send :y :c]]"),
        o(6, 0, "invoke", "poll", "[[:poll]]"),
        o(7, 0, "ok", "poll", "[[:poll {:y [[2 :b] [3 :c] [4 :d]]}]]"),
    ]
    assert judge(tmp_path, ops) == {"nonmonotonic-send": 1, "lost-message": 2}


# --- realtime-lag-test: a history with no error -------------------------------------

REALTIME_LAG = [
    o(0, 0, "invoke", "assign", "[:x]"),
    o(1, 0, "ok", "assign", "[:x]"),
    o(2, 0, "invoke", "poll", "[[:poll]]"),
    o(3, 0, "ok", "poll", "[[:poll {:x []}]]"),
    o(4, 0, "invoke", "send", "[[:send :x :a]]"),
    o(5, 0, "ok", "send", "[[:send :x [0 :a]]]"),
    o(6, 0, "invoke", "poll", "[[:poll]]"),
    o(7, 0, "ok", "poll", "[[:poll {:x []}]]"),
    o(8, 1, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
    o(9, 1, "ok", "send", "[[:send :x [2 :c]] [:send :x [3 :d]]]"),
    o(10, 0, "invoke", "poll", "[[:poll]]"),
    o(11, 0, "ok", "poll", "[[:poll]]"),
    o(12, 0, "invoke", "poll", "[[:poll]]"),
    o(13, 0, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}]]"),
    o(14, 0, "invoke", "assign", "[:x :y]"),
    o(15, 0, "ok", "assign", "[:x :y]"),
    o(16, 0, "invoke", "poll", "[[:poll]]"),
    o(17, 0, "ok", "poll", "[[:poll {}]]"),
    o(18, 0, "invoke", "assign", "[:y]"),
    o(19, 0, "ok", "assign", "[:y]"),
    o(20, 0, "invoke", "assign", "[:x]"),
    o(21, 0, "ok", "assign", "[:x]"),
    o(22, 0, "invoke", "poll", "[[:poll]]"),
    o(23, 0, "ok", "poll", "[[:poll {}]]"),
    o(24, 0, "invoke", "poll", "[[:poll] [:poll]]"),
    o(25, 0, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}] [:poll {:x [[2 :c] [3 :d]]}]]"),
    o(26, 1, "invoke", "send", "[[:send :x :b]]"),
    o(27, 1, "info", "send", "[[:send :x :b]]"),
]


def test_clean_history(tmp_path: Path) -> None:
    """Jepsen's realtime-lag history: no error. driftlab: no forbidden kind; a and b,
    read again after the assign that dropped :x, are duplicate deliveries (allowed)."""
    assert judge(tmp_path, REALTIME_LAG) == {"duplicate-delivery": 2}


def test_realtime_lag(tmp_path: Path) -> None:
    """Jepsen: the lag of each poll at its invocation, the worst 17 (at 22: an empty
    poll after an assign rewound x to the start, which was known not to be the end at
    5). driftlab measures a poll by its deliveries, at its completion: the poll of a b
    completing at 13 after d, at offset 2, was acknowledged at 9 lags 4 (Jepsen: 3 at
    its invocation, 12); the poll of a b c d at 25 reads the end, 0; an empty poll
    delivers nothing and is not measured (docs/jepsen.md)."""
    events = run_events(imported(tmp_path, REALTIME_LAG))
    t0 = min(e.time for e in events if e.type == "op")
    lags = sorted((lag.time - t0, lag.process, lag.lag_ns) for lag in realtime_lags(events))
    assert lags == [(13, "0", 4), (25, "0/1", 0)]
    worst = worst_realtime_lag(realtime_lags(events))
    assert worst is not None and (worst.time - t0, worst.lag_ns) == (13, 4)


# --- Maelstrom ---------------------------------------------------------------------


def test_maelstrom_poll_skip(tmp_path: Path) -> None:
    """The poll-skip of Maelstrom's kafka workload documentation (maelstrom/workload/
    kafka.clj), string keys as Maelstrom writes them: process 0 reads offsets 4 5 of
    "56", then 8. Jepsen: :poll-skip delta 3 skipping 7 and 8, which no one read
    (:lost-write). driftlab: one poll skip, two lost messages."""
    sends = " ".join(f'[:send "56" {msg}]' for msg in range(5, 10))
    sent = " ".join(f'[:send "56" [{msg - 1} {msg}]]' for msg in range(5, 10))
    ops = [
        o(3818, 1, "invoke", "send", f"[{sends}]"),
        o(3819, 1, "ok", "send", f"[{sent}]"),
        o(3819, 0, "invoke", "poll", "[[:poll]]"),
        o(3820, 0, "ok", "poll", '[[:poll {"56" [[4 5] [5 6]]}]]'),
        o(3847, 0, "invoke", "poll", "[[:poll]]"),
        o(3848, 0, "ok", "poll", '[[:poll {"56" [[8 9]]}]]'),
    ]
    assert judge(tmp_path, ops) == {"poll-skip": 1, "lost-message": 2}


# --- formats, records, errors -------------------------------------------------------


def _json_op(line: str) -> str:
    """The op as elle-cli's JSON writes it: keywords as strings, map keys as strings."""
    from driftlab.harness.lab.importers import edn

    def plain(v: object) -> object:
        if isinstance(v, dict):
            return {str(plain(k)): plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return str(v) if isinstance(v, str) else v

    return json.dumps(plain(edn.loads(line)), separators=(",", ":"))


def _events(run: Path) -> list[tuple[object, ...]]:
    """A run's events without the parts that differ between two imports."""
    return [
        (e.type, e.time - (e.time if e.type == "header" else 0), e.process, e.phase, e.f,
         e.action, e.channel, e.offset, e.msg_id, e.kind)
        for e in run_events(run)
        if e.type != "header"
    ]  # fmt: skip


@pytest.mark.parametrize("layout", ["array", "lines", "records", "vector"])
def test_formats_import_alike(tmp_path: Path, layout: str) -> None:
    """The same history as EDN lines, as #jepsen.history.Op records, as one EDN vector,
    as an elle-cli JSON array or as JSON lines imports to the same events."""
    ops = list(POLL_SKIP.values())
    reference = tmp_path / "ref"
    (tmp_path / "h.edn").write_text("\n".join(ops) + "\n")
    import_history(tmp_path / "h.edn", reference)
    if layout == "array":
        name, text = "h.json", "[" + ",\n ".join(map(_json_op, ops)) + "]\n"
    elif layout == "lines":
        name, text = "h.jsonl", "\n".join(map(_json_op, ops)) + "\n"
    elif layout == "records":
        name, text = "r.edn", "\n".join("#jepsen.history.Op" + op for op in ops) + "\n"
    else:
        name, text = "v.edn", "[" + "\n ".join(ops) + "]\n"
    (tmp_path / name).write_text(text)
    other = tmp_path / "other"
    import_history(tmp_path / name, other)
    base = [e for e in run_events(reference) if e.type != "header"]
    seen = [e for e in run_events(other) if e.type != "header"]
    t0, t1 = base[0].time, seen[0].time
    strip = ("time", "writer", "seq")
    assert [(e.time - t0, {k: v for k, v in e.to_dict().items() if k not in strip})
            for e in base] == [
        (e.time - t1, {k: v for k, v in e.to_dict().items() if k not in strip}) for e in seen
    ]  # fmt: skip


def test_the_progress_bar_reads_every_byte_and_changes_nothing(tmp_path: Path) -> None:
    """The command reads the file through a progress bar's reader: the bar ends at the
    file's size, and the events are those of a plain import."""
    source = tmp_path / "h.edn"
    source.write_text("\n".join(LOST_CONSISTENT) + "\n")
    import_history(source, tmp_path / "plain")
    bar = Progress(console=Console(file=io.StringIO()))
    with bar:
        import_history(source, tmp_path / "shown", wrap=lambda raw: bar.wrap_file(raw, total=1))
    (task,) = bar.tasks
    assert task.completed == source.stat().st_size
    strip = ("time", "writer", "seq")
    plain, shown = (
        [
            {k: v for k, v in e.to_dict().items() if k not in strip}
            for e in run_events(run)
            if e.type != "header"
        ]
        for run in (tmp_path / "plain", tmp_path / "shown")
    )
    assert len(plain) > len(LOST_CONSISTENT) and plain == shown


def test_nemesis_ops_become_fault_windows(tmp_path: Path) -> None:
    """start-partition / stop-partition (two :info each, the second when it took
    effect) open and close one window; kill / start another; an unknown f is a mark."""
    ops = [
        '{:index 0, :time 10, :type :info, :process :nemesis, :f :start-partition}',
        '{:index 1, :time 20, :type :info, :process :nemesis, :f :start-partition, '
        ':value [:isolated {"n1" #{"n2"}}]}',
        '{:index 2, :time 30, :type :info, :process :nemesis, :f :kill, :value nil}',
        '{:index 3, :time 40, :type :info, :process :nemesis, :f :kill, :value ["n1"]}',
        '{:index 4, :time 50, :type :info, :process :nemesis, :f :stop-partition}',
        '{:index 5, :time 60, :type :info, :process :nemesis, :f :stop-partition}',
        '{:index 6, :time 70, :type :info, :process :nemesis, :f :start}',
        '{:index 7, :time 80, :type :info, :process :nemesis, :f :start}',
        '{:index 8, :time 90, :type :info, :process :nemesis, :f :bump-clock}',
        '{:index 9, :time 99, :type :info, :process :nemesis, :f :bump-clock}',
    ]  # fmt: skip
    (tmp_path / "n.edn").write_text("\n".join(ops) + "\n")
    import_history(tmp_path / "n.edn", tmp_path / "run")
    events = run_events(tmp_path / "run")
    faults = [
        (e.phase, e.kind, e.target, e.time - events[1].time) for e in events if e.type == "fault"
    ]
    grudge, nodes = '["isolated",{"n1":["n2"]}]', '["n1"]'
    assert faults == [
        ("start", "partition", grudge, 0),
        ("start", "kill", nodes, 20),
        ("stop", "partition", grudge, 40),
        ("stop", "kill", nodes, 60),
    ]
    assert [e.kind for e in events if e.type == "mark"] == ["nemesis:bump-clock", "end"]


def test_config_forbids_what_jepsen_forbids(tmp_path: Path) -> None:
    """Expectations: Jepsen's failing kinds are absent; with :subscribe ops, poll skips
    and nonmonotonic polls are allowed, as Jepsen allows them; the names travel to the
    report."""
    run = imported(tmp_path, list(NONMONOTONIC.values()))
    config = json.loads((run / "config.json").read_text())
    always = {"lost-message", "inconsistent-offset", "duplicate-offset", "nonmonotonic-send"}
    unless_subscribed = {"nonmonotonic-poll", "poll-skip"}
    assert config["expectations"] == dict.fromkeys(always | unless_subscribed, "absent")
    assert config["foreign_names"] == {"tool": "Jepsen", "kinds": JEPSEN_NAMES}
    sub = [o(4, 0, "invoke", "subscribe", "[:x]"), o(5, 0, "ok", "subscribe", "[:x]")]
    run = imported(tmp_path, _with(NONMONOTONIC, poll_234=sub))
    config = json.loads((run / "config.json").read_text())
    assert set(config["expectations"]) == always


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{:index 0, :type :invoke, :f :poll}\n", "has type 'invoke' and process None"),
        ("{:index 0, :type :nope, :process 1, :f :poll}\n", "has type 'nope'"),
        ("{:index 0, :type :invoke, :process 1\n", "the text ends inside '{'"),
        ("[:not :a :map]\n:x\n", "op #1 is Keyword, not a map"),
    ],
)
def test_bad_histories_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.edn").write_text(text)
    with pytest.raises(JepsenImportError, match=message):
        import_history(tmp_path / "bad.edn", tmp_path / "run")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "elle"], "--from elle: unknown; the tools are jepsen"),
        (["--from", "jepsen"], "no such file"),
    ],
)
def test_command_refuses_bad_input_before_spark(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Exit 2 with the reason, and no run folder, for an unknown tool, a missing file
    or a history that is not EDN."""
    missing = str(tmp_path / "nope.edn")
    result = CliRunner().invoke(
        app, ["analyze", *args, missing, "--runs-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "runs").exists()
    (tmp_path / "bad.edn").write_text("{:index 0, :type :invoke, :process 0, :f :poll\n")
    result = CliRunner().invoke(
        app,
        ["analyze", "--from", "jepsen", str(tmp_path / "bad.edn"), "--runs-dir", str(tmp_path)],
    )
    assert result.exit_code == 2 and "the text ends inside '{'" in result.output
    # No run folder, and no empty runs/jepsen/ folder of none.
    assert not (tmp_path / "jepsen").exists() and not (tmp_path / "latest").exists()


# --- the command, with Spark ----------------------------------------------------------


def side_by_side(cases: list[list[str]]) -> list[str]:
    """Several histories as one: case i gets keys :x<i> and :y<i>, processes 10i..., and
    times after the case before, so that none of them sees another."""
    return [_moved(op, i) for i, ops in enumerate(cases) for op in ops]


def _moved(op: str, i: int) -> str:
    op = re.sub(r":([xy])\b", rf":\g<1>{i}", op)
    op = re.sub(r":process (\d+)", lambda m: f":process {int(m[1]) + 10 * i}", op)
    return re.sub(
        r":index (\d+), :time (\d+)",
        lambda m: f":index {int(m[1]) + 1000 * i}, :time {int(m[2]) + 1000 * i}",
        op,
    )


@pytest.mark.spark
def test_analyze_from_jepsen_runs_the_pipeline(spark: object, tmp_path: Path) -> None:
    """`driftlab analyze --from jepsen` on Jepsen's cases side by side: Spark finds what
    the reference finds case by case, the command exits 1 on the kinds Jepsen's checker
    fails on, and the report names Jepsen's anomalies."""
    cases = [
        LOST_CONSISTENT,
        list(ATOMIC.values()),
        list(POLL_SKIP.values()),
        list(NONMONOTONIC.values()),
        INFO_CONFLICTS,
        REALTIME_LAG,
        DUPLICATE,
        [*SEND_34, *SEND_12],
    ]
    expected: Counter[str] = Counter()
    for i, ops in enumerate(cases):
        (tmp_path / f"case{i}").mkdir()
        expected += judge(tmp_path / f"case{i}", ops)
    source = tmp_path / "history.edn"
    source.write_text("\n".join(side_by_side(cases)) + "\n")
    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        app, ["analyze", "--from", "jepsen", str(source), "--runs-dir", str(runs)]
    )
    assert result.exit_code == 1, result.output
    run = (runs / "latest").resolve()
    analysis = json.loads((run / "analysis.json").read_text())
    assert {k: n for k, n in analysis["counts"].items() if n} == dict(expected)
    assert expected == {
        "lost-message": 3 + 1 + 1 + 1 + 4,
        "poll-skip": 2,
        "nonmonotonic-poll": 1,
        "duplicate-delivery": 2 + 2,
        "duplicate-offset": 1,
        "nonmonotonic-send": 1,
    }
    worst = worst_realtime_lag(realtime_lags(run_events(run)))
    assert worst is not None and worst.lag_ns == 4
    assert analysis["realtime_lag"]["worst"]["lag_ns"] == worst.lag_ns
    assert analysis["realtime_lag"]["worst"]["time_ns"] == worst.time
    assert analysis["realtime_lag"]["worst"]["channel"] == worst.channel
    assert analysis["verdict"] == "unexpected anomaly"
    html = (run / "report.html").read_text()
    assert ":lost-write, :unseen" in html
    assert ":worst-realtime-lag" in html
    assert f"imported {len(side_by_side(cases))} Jepsen ops" in result.output


@pytest.mark.spark
def test_sends_that_no_poll_read_are_lost_and_nothing_at_all_is_inconclusive(
    spark: object, tmp_path: Path
) -> None:
    """Acknowledged sends and a final poll that read nothing: every send is a lost
    message (Jepsen: :unseen, an error), found in as many chances, exit 1. A history with
    no send and no poll (one assign) gave no kind a chance: inconclusive, exit 3, each
    forbidden kind named."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :b]]"),
        o(1, 0, "ok", "send", "[[:send :x [0 :a]] [:send :y [0 :b]]]"),
        o(2, 1, "invoke", "poll", "[[:poll]]"),
        o(3, 1, "ok", "poll", "[[:poll {}]]"),
    ]
    result, analysis = _analyze_from_jepsen(tmp_path / "sends", ops)
    assert result.exit_code == 1, result.output
    assert analysis["counts"]["lost-message"] == analysis["coverage"]["lost-message"] == 2
    assert analysis["verdict"] == "unexpected anomaly"
    result, analysis = _analyze_from_jepsen(
        tmp_path / "assign", [o(0, 0, "invoke", "assign", "[:x]"), o(1, 0, "ok", "assign", "[:x]")]
    )
    assert result.exit_code == 3, result.output
    assert analysis["verdict"] == "inconclusive"
    assert "lost-message had no chance in this history" in result.output
    prefix = "nothing the run names was tested: "
    named = {line.removeprefix(prefix).split()[0] for line in analysis["inconclusive"]}
    assert named == set(FORBIDDEN) == set(analysis["untested"])
    html = ((tmp_path / "assign" / "runs" / "latest").resolve() / "report.html").read_text()
    assert 'id="inconclusive"' in html and "no chance: not tested" in html


def _analyze_from_jepsen(where: Path, ops: list[str]) -> tuple[Any, dict[str, Any]]:
    """`driftlab analyze --from jepsen` of `ops`; its result and analysis.json."""
    where.mkdir()
    source = where / "history.edn"
    source.write_text("\n".join(ops) + "\n")
    runs = where / "runs"
    result = CliRunner().invoke(
        app, ["analyze", "--from", "jepsen", str(source), "--runs-dir", str(runs)]
    )
    return result, json.loads(((runs / "latest").resolve() / "analysis.json").read_text())


# --- the verdict from coverage (issue: a verdict says what it tested) ----------------


def test_no_acknowledged_send_and_no_read_is_inconclusive(tmp_path: Path) -> None:
    """Every send failed and every poll crashed: Jepsen calls it invalid; driftlab
    inconclusive, not reproduced."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x :a]]"),
        o(1, 0, "fail", "send", "[[:send :x :a]]"),
        o(2, 1, "invoke", "poll", "[[:poll]]"),
        o(3, 1, "info", "poll", "[[:poll]]"),
    ]
    found, chances = reference_verdict(imported(tmp_path, ops))
    assert found.verdict == "inconclusive" and found.exit_code == 3
    assert not any(chances.values())
    assert len(found.reasons) == len(FORBIDDEN)


def test_no_send_and_no_poll_is_inconclusive(tmp_path: Path) -> None:
    ops = [o(0, 0, "invoke", "assign", "[:x]"), o(1, 0, "ok", "assign", "[:x]")]
    found, _ = reference_verdict(imported(tmp_path, ops))
    assert found.verdict == "inconclusive"
    nothing = "nothing the run names was tested: lost-message had no chance in this history"
    assert any(r.startswith(nothing) for r in found.reasons)
    assert found.untested == sorted(FORBIDDEN)


VALID = {
    "lost-write-atomic without the poll of a": [
        v for k, v in ATOMIC.items() if not k.startswith("poll-a")
    ],
    "txn-abort-rewinds": TXN_ABORT_REWINDS,
    "nonmonotonic-poll across a subscribe dropping :x": _with(
        NONMONOTONIC,
        poll_234=[o(4, 0, "invoke", "subscribe", "[:y]"), o(5, 0, "ok", "subscribe", "[:y]")],
    ),
    "realtime-lag": REALTIME_LAG,
}
"""Histories of Jepsen's kafka checker tests that Jepsen calls valid (no error); the
first and the third leave some forbidden kind without a chance."""


@pytest.mark.parametrize("name", sorted(VALID))
def test_histories_jepsen_calls_valid_hold_with_the_untested_kinds_listed(
    tmp_path: Path, name: str
) -> None:
    """An import forbids every kind Jepsen's checker checks; a small history cannot
    show some (one producer's single send cannot go back): they are listed as untested,
    and the verdict holds."""
    found, chances = reference_verdict(imported(tmp_path, VALID[name]))
    assert found.verdict == "held" and found.exit_code == 0, found.reasons
    assert found.untested == sorted(k for k in FORBIDDEN if not chances.get(k))
    assert [c.split()[0] for c in found.caveats] == found.untested


def test_sends_only_predicted_anomalies_are_reproduced_forbidden_ones_fail(
    tmp_path: Path,
) -> None:
    """Two producers acknowledged at one offset, and a producer's offsets going back:
    these anomalies need no consumer. Predicted, they are reproduced; forbidden (as an
    import forbids them), the run fails with exit 1."""
    conflict = [
        o(0, 0, "invoke", "send", "[[:send :x :a]]"),
        o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
        o(2, 1, "invoke", "send", "[[:send :x :b]]"),
        o(3, 1, "ok", "send", "[[:send :x [0 :b]]]"),
    ]
    run = imported(tmp_path, conflict)
    predicted, chances = reference_verdict(run, {"inconsistent-offset": "present"})
    assert predicted.verdict == "reproduced" and chances["inconsistent-offset"] == 1
    forbidden, _ = reference_verdict(run)
    assert forbidden.verdict == "unexpected anomaly" and forbidden.exit_code == 1
    assert "inconsistent-offset" in forbidden.forbidden_found
    backwards = imported(tmp_path, [*SEND_34, *SEND_12])
    predicted, chances = reference_verdict(backwards, {"nonmonotonic-send": "present"})
    assert predicted.verdict == "reproduced" and chances["nonmonotonic-send"] == 3
    assert reference_verdict(backwards)[0].exit_code == 1


def test_ops_that_cannot_be_read_are_counted_and_named(tmp_path: Path) -> None:
    """An :ok poll without its reads (never valid in Jepsen's format) and an op of an
    unknown :f are counted in a warning; when the final polls are the ones without
    reads, what the consumer read is unknown: inconclusive, saying why."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x :a]]"),
        o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
        o(2, 1, "invoke", "frobnicate", "nil"),
        o(3, 1, "ok", "frobnicate", "nil"),
        o(4, 1, "invoke", "poll", "[[:poll]]"),
        o(5, 1, "ok", "poll", "[[:poll]]"),
    ]
    source = tmp_path / "history.edn"
    source.write_text("\n".join(ops) + "\n")
    summary = import_history(source, tmp_path / "run")
    assert summary.warnings == [
        "1 op(s) not read, :ok poll without its reads (the first at index 5)",
        "1 op(s) not read, op with unknown :f :frobnicate (the first at index 3)",
    ]
    found, _ = reference_verdict(tmp_path / "run")
    assert found.verdict == "inconclusive"
    assert found.reasons == [
        "1 of the 1 final poll(s) (the :ok polls after the last send) carry no reads: what "
        "the consumer read by the end is unknown, so a lost message cannot be told from a "
        "read one"
    ]
    # A poll without reads before a later send and a good final poll: warned, judged.
    later = [
        *ops,
        o(6, 0, "invoke", "send", "[[:send :x :b]]"),
        o(7, 0, "ok", "send", "[[:send :x [1 :b]]]"),
        o(8, 1, "invoke", "poll", "[[:poll]]"),
        o(9, 1, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}]]"),
    ]
    judged, _ = reference_verdict(imported(tmp_path, later))
    assert judged.verdict == "held"


def test_a_skip_across_empty_polls_is_a_poll_skip(tmp_path: Path) -> None:
    """Stricter than Jepsen (docs/jepsen.md): one process reads 57011, then two empty
    polls, then 57013, with 57012 acknowledged. Jepsen's rule compares a poll with the
    process's previous poll, empty ones included, and misses it; driftlab compares
    consecutive deliveries of the consumer instance."""
    ops = [
        o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
        o(
            1,
            0,
            "ok",
            "send",
            "[[:send :x [57011 :a]] [:send :x [57012 :b]] [:send :x [57013 :c]]]",
        ),
        o(2, 1, "invoke", "poll", "[[:poll]]"),
        o(3, 1, "ok", "poll", "[[:poll {:x [[57011 :a]]}]]"),
        o(4, 1, "invoke", "poll", "[[:poll]]"),
        o(5, 1, "ok", "poll", "[[:poll {:x []}]]"),
        o(6, 1, "invoke", "poll", "[[:poll]]"),
        o(7, 1, "ok", "poll", "[[:poll {}]]"),
        o(8, 1, "invoke", "poll", "[[:poll]]"),
        o(9, 1, "ok", "poll", "[[:poll {:x [[57013 :c]]}]]"),
    ]
    assert judge(tmp_path, ops) == {"poll-skip": 1, "lost-message": 1}
