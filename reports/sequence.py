"""Per-key sequence diagrams in the style of DDIA Figure 11-4.

One lane per client or consumer and one per store; an arrow per write, from the writer's
lane when it was sent to the store's lane when it took effect, so an interleaving that
left two stores in different orders shows as crossing arrows. A store whose writer
records nothing (a pipeline's, read from outside) is drawn from driftlab's samples of
it: an arrow from the store to the observer's lane where a sample first shows a new
value. Horizontal positions are
the rank of each instant, not its time, so that writes microseconds apart stay legible;
times are printed under the arrows.

Only the events of the few keys shown are read from history.parquet (a pyarrow filter
on `key`), so the report stays cheap for any history size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from markupsafe import Markup, escape

from driftlab.checkers.analysis_files import Examples
from driftlab.checkers.kinds import BY_NAME, TABLE
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.history.schema import OBSERVER, SOURCE_STORE

DIAGRAM_KINDS = tuple(
    k.name
    for k in sorted(
        (k for k in TABLE if k.diagram is not None), key=lambda k: (not k.final_state, k.diagram)
    )
)
"""Kinds whose evidence is an interleaving of writes on one key of one store, which a
sequence diagram explains: final-state kinds first (they are the divergence itself),
each part in its rank's order (driftlab.checkers.kinds.Kind.diagram)."""
MAX_DIAGRAMS = 4
MAX_ARROWS = 16
_COLUMNS = [
    "type",
    "time",
    "process",
    "phase",
    "f",
    "op_id",
    "key",
    "value",
    "version",
    "store",
    "action",
    "channel",
    "partition",
    "offset",
    "consumer",
]
_BATCH_ROWS = 65_536
_VALUE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")


@dataclass(frozen=True, slots=True)
class Arrow:
    """One write: sent by `actor` at `t_send`, effective in `store` at `t_done`."""

    actor: str
    store: str
    t_send: int
    t_done: int
    value: str | None
    label: str
    outcome: str  # ok, fail, info (unknown), apply, seen (a sample of the store)


@dataclass(slots=True)
class Diagram:
    """What one diagram shows and why it was chosen."""

    key: str
    store: str
    kind: str
    detail: str
    arrows: list[Arrow] = field(default_factory=list)
    finals: dict[str, str | None] = field(default_factory=dict)
    omitted: int = 0


def pick_targets(examples: Examples) -> list[tuple[str, str, str, str, int]]:
    """(key, store, kind, detail, time_ns) of the diverged keys to draw, at most
    MAX_DIAGRAMS, one per (key, store), taken from examples.json in DIAGRAM_KINDS order."""
    chosen: list[tuple[str, str, str, str, int]] = []
    seen: set[tuple[str, str]] = set()
    for kind in DIAGRAM_KINDS:
        found = examples.kinds.get(kind)
        for ex in found.examples if found else []:
            key, store = ex.key, ex.store
            if not key or not store or (key, store) in seen:
                continue
            seen.add((key, store))
            chosen.append((key, store, kind, ex.detail or "", ex.time_ns or 0))
            if len(chosen) >= MAX_DIAGRAMS:
                return chosen
    return chosen


def read_key_events(history: Path, keys: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The events of `keys` from history.parquet, per key in time order (a filtered
    scan: only the matching rows are kept, whatever the history's size)."""
    if not keys or not history.exists():
        return {}
    # Row groups of a big history hold a million events: read them one at a time, in
    # batches, keeping the matching rows. (pyarrow.dataset would filter as well, but
    # importing it costs a run's report half a second, more on a loaded machine.)
    wanted = pa.array(list(keys), pa.string())
    parquet = pq.ParquetFile(history)
    table = pa.Table.from_batches(
        (
            batch.filter(pc.is_in(batch.column("key"), value_set=wanted))
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=_COLUMNS)
        ),
        pa.schema([parquet.schema_arrow.field(c) for c in _COLUMNS]),
    )
    per_key: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    for row in table.sort_by("time").to_pylist():
        per_key[row["key"]].append(row)
    return per_key


def build_diagram(
    events: Iterable[dict[str, Any]], key: str, store: str, kind: str, detail: str, at_ns: int
) -> Diagram:
    """The writes of `key` to the source and to `store`, around the anomaly at `at_ns`."""
    diagram = Diagram(key=key, store=store, kind=kind, detail=detail)
    invokes: dict[str, dict[str, Any]] = {}
    delivers: dict[tuple[str | None, str | None, int | None], int] = {}
    arrows: list[Arrow] = []
    sampled: str | None = None  # the value the observer's last sample of `store` showed
    for e in events:
        if e["type"] == "op" and e["process"] == OBSERVER:
            if e["store"] == store and e["phase"] == "ok" and e["value"] != sampled:
                shown = "absent" if e["value"] is None else e["value"]
                arrows.append(
                    Arrow(
                        OBSERVER, store, e["time"], e["time"], e["value"], f"seen {shown}", "seen"
                    )
                )
                sampled = e["value"]
        elif e["type"] == "op" and e["f"] == "write" and e["store"] in (SOURCE_STORE, store):
            if e["phase"] == "invoke":
                invokes[e["op_id"]] = e
                continue
            sent = invokes.pop(e["op_id"], e)
            version = f" v{e['version']}" if e["version"] is not None else ""
            arrows.append(
                Arrow(
                    actor=e["process"] or "client",
                    store=e["store"],
                    t_send=sent["time"],
                    t_done=e["time"],
                    value=e["value"] if e["value"] is not None else sent["value"],
                    label=f"set {e['value'] if e['value'] is not None else sent['value']}{version}",
                    outcome=e["phase"],
                )
            )
        elif e["type"] == "msg" and e["action"] == "deliver":
            delivers[(e["consumer"], e["channel"], e["offset"])] = e["time"]
        elif e["type"] == "msg" and e["action"] == "apply" and e["store"] == store:
            where = f"@{e['offset']}" if e["offset"] is not None else ""
            arrows.append(
                Arrow(
                    actor=e["consumer"] or e["process"] or "consumer",
                    store=store,
                    t_send=delivers.get((e["consumer"], e["channel"], e["offset"]), e["time"]),
                    t_done=e["time"],
                    value=e["value"],
                    label=f"{e['value']} {where}".strip(),
                    outcome="apply",
                )
            )
        elif e["type"] == "state" and e["store"] in (SOURCE_STORE, store):
            diagram.finals[e["store"]] = e["value"]
    # Writes that never completed (a crash between invoke and completion) still show.
    for inv in invokes.values():
        arrows.append(
            Arrow(
                inv["process"] or "client",
                inv["store"],
                inv["time"],
                inv["time"],
                inv["value"],
                f"set {inv['value']} (no reply)",
                "info",
            )
        )
    arrows.sort(key=lambda a: (a.t_send, a.t_done))
    if store not in diagram.finals and any(s == SOURCE_STORE for s in diagram.finals):
        diagram.finals.setdefault(store, None)
    diagram.arrows, diagram.omitted = _window(arrows, kind, at_ns)
    return diagram


def _window(arrows: list[Arrow], kind: str, at_ns: int) -> tuple[list[Arrow], int]:
    """At most MAX_ARROWS arrows: the last ones for a final-state anomaly, otherwise the
    ones leading up to the anomaly's time."""
    if len(arrows) <= MAX_ARROWS:
        return arrows, 0
    if BY_NAME[kind].final_state or not at_ns:
        end = len(arrows)
    else:
        end = next(
            (i + 1 for i in range(len(arrows) - 1, -1, -1) if arrows[i].t_done <= at_ns),
            len(arrows),
        )
        end = min(len(arrows), max(end + 2, MAX_ARROWS))
    start = max(0, end - MAX_ARROWS)
    return arrows[start:end], len(arrows) - (end - start)


def render_diagram(d: Diagram, t0_ns: int) -> Markup:
    """The diagram as inline SVG."""
    stores = [SOURCE_STORE] + ([d.store] if d.store != SOURCE_STORE else [])
    # A consumer may share its store's name (the view feeds `view`): its lane is its own.
    lane_of = {a.actor: f"{a.actor} (consumer)" if a.actor in stores else a.actor for a in d.arrows}
    actors = sorted(set(lane_of.values()) - {OBSERVER})
    # driftlab's samples of the stores read them from below, across no other lane.
    lanes = actors + stores + ([OBSERVER] if OBSERVER in lane_of.values() else [])
    instants = sorted({t for a in d.arrows for t in (a.t_send, a.t_done)})
    rank = {t: i for i, t in enumerate(instants)}
    left, top, lane_h, final_w = 130, 34, 58, 150
    # Fit the usual page width; a long interleaving scrolls rather than overlap.
    col = max(22.0, min(34.0, 760 / max(len(instants), 1)))
    width = int(left + col * max(len(instants), 1) + 30 + final_w)
    height = top + lane_h * len(lanes) + 12
    lane_y = {name: top + 18 + i * lane_h for i, name in enumerate(lanes)}
    colors: dict[str | None, str] = {}
    for a in d.arrows:
        if a.value not in colors:
            colors[a.value] = _VALUE_COLORS[len(colors) % len(_VALUE_COLORS)]

    def x(t: int) -> float:
        return left + 14 + col * rank[t]

    out = [
        f'<svg class="seq" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        f'aria-label="sequence diagram of {escape(d.key)} in {escape(d.store)}">',
        '<defs><marker id="ah" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="context-stroke"/></marker></defs>',
        f'<text x="8" y="16" class="ct">{escape(d.key)}: writes to {escape(SOURCE_STORE)} '
        f"and {escape(d.store)} ({escape(d.kind)})</text>",
    ]
    line_end = width - final_w - 10
    for name in lanes:
        y = lane_y[name]
        cls = "lane-store" if name in stores else "lane-actor"
        out.append(
            f'<g class="{cls}"><text x="{left - 8}" y="{y + 4}" class="ln">{escape(name)}</text>'
            f'<line x1="{left}" x2="{line_end}" y1="{y}" y2="{y}"/></g>'
        )
    label_end: dict[str, float] = {}
    for a in d.arrows:
        x0, x1 = x(a.t_send), x(a.t_done)
        actor = lane_of[a.actor]
        y0, y1 = lane_y[actor], lane_y[a.store]
        # A label that would run into the previous one on its lane goes below the lane.
        label_y = y0 - 5 if x0 >= label_end.get(actor, 0.0) else y0 + 13
        if label_y < y0:
            label_end[actor] = x0 + 7.5 * len(a.label) + 8
        if a.outcome == "seen":
            # A sample reads the store: the arrow points from the store to the observer.
            y0, y1 = y1, y0
        y1 += -6 if y1 > y0 else 6
        color = colors[a.value]
        dash = ' stroke-dasharray="4 3"' if a.outcome in ("fail", "info") else ""
        ms = (a.t_done - t0_ns) / 1e6
        tip = (
            f"{a.actor} {a.label} in {a.store} at {ms / 1000:.6f}s"
            if a.outcome == "seen"
            else f"{a.actor} {a.label} -> {a.store} ({a.outcome}) at {ms / 1000:.6f}s"
        )
        out.append(
            f'<g class="write"><title>{escape(tip)}</title>'
            f'<line x1="{x0:.1f}" y1="{y0}" x2="{x1 + 0.01:.1f}" y2="{y1}" stroke="{color}" '
            f'stroke-width="1.7" marker-end="url(#ah)"{dash}/>'
            f'<text x="{x0 + 3:.1f}" y="{label_y}" class="al" fill="{color}">'
            f"{escape(a.label)}{'' if a.outcome in ('ok', 'apply', 'seen') else ' ' + a.outcome}"
            "</text></g>"
        )
    for name in stores:
        if name not in d.finals:
            continue
        value = d.finals[name]
        differs = name != SOURCE_STORE and value != d.finals.get(SOURCE_STORE)
        text = "absent" if value is None else value
        out.append(
            f'<g class="final{" differs" if differs else ""}">'
            f'<rect x="{line_end + 6}" y="{lane_y[name] - 12}" width="{final_w - 16}" '
            f'height="24" rx="4"/><text x="{line_end + 12}" y="{lane_y[name] + 5}">final: '
            f"{escape(text)}</text></g>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def diagrams_for_run(run_dir: RunDir, examples: Examples, t0_ns: int) -> list[dict[str, Any]]:
    """Every diagram of the run, ready for the template: svg, key, store, kind, detail,
    how many writes were left out."""
    targets = pick_targets(examples)
    events = read_key_events(run_dir.parquet, sorted({t[0] for t in targets}))
    out = []
    for key, store, kind, detail, at_ns in targets:
        d = build_diagram(events.get(key, []), key, store, kind, detail, at_ns)
        if not d.arrows:
            continue
        out.append(
            {
                "key": key,
                "store": store,
                "kind": kind,
                "detail": detail,
                "omitted": d.omitted,
                "svg": render_diagram(d, t0_ns),
            }
        )
    return out
