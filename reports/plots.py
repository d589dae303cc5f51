"""Hand-built SVG time-series charts with fault windows shaded (Jepsen's nemesis regions).

Charts are strings of SVG markup (`markupsafe.Markup`) so templates inline them: the
report stays one offline file with no charting library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
FAULT_FILL = "#f4a261"


@dataclass(frozen=True, slots=True)
class Line:
    """One named series of (t, y) points; `y` None leaves a gap."""

    name: str
    points: Sequence[tuple[float, float | None]]
    dashed: bool = False
    color: str | None = None  # None: the palette's colour for the line's position


@dataclass(frozen=True, slots=True)
class Window:
    """A shaded time range (a fault); `stop` None means it never stopped."""

    label: str
    start: float
    stop: float | None


@dataclass(slots=True)
class Chart:
    """A line chart over seconds since the run's start."""

    title: str
    y_label: str
    t_max: float
    lines: list[Line] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)
    width: int = 860
    height: int = 220
    log_y: bool = False


_LEFT, _RIGHT, _TOP, _BOTTOM = 58, 150, 26, 30


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v / 1000:.3g}k"
    if abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


def _ticks(hi: float, n: int = 4) -> list[float]:
    """About `n` round tick values from 0 up to at least `hi`."""
    if hi <= 0:
        return [0.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    return [i * step for i in range(math.ceil(hi / step - 1e-9) + 1)]


def render_chart(chart: Chart) -> Markup:
    """The chart as an inline <svg>: axes, shaded named fault windows, marks, lines and a
    legend. An empty chart still renders, saying there is no data."""
    # The legend needs 16 px per line: a chart with many lines grows rather than clip it.
    w, h = chart.width, max(chart.height, _TOP + 16 * len(chart.lines) + 8)
    pw, ph = w - _LEFT - _RIGHT, h - _TOP - _BOTTOM
    t_max = max(chart.t_max, 1e-9)
    ys = [y for line in chart.lines for _, y in line.points if y is not None]
    y_max = max(ys, default=0.0)
    ticks = _ticks(y_max * 1.05 if y_max > 0 else 1.0)
    y_top = max(ticks[-1], 1e-9)

    def x(t: float) -> float:
        return _LEFT + pw * min(max(t, 0.0), t_max) / t_max

    def y(v: float) -> float:
        return _TOP + ph - ph * min(v, y_top) / y_top

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
        f'width="{w}" height="{h}" role="img" aria-label="{escape(chart.title)}">',
        f'<text x="{_LEFT}" y="16" class="ct">{escape(chart.title)}</text>',
    ]
    for win in chart.windows:
        x0, x1 = x(win.start), x(win.stop if win.stop is not None else t_max)
        stop = f"{win.stop:.2f}s" if win.stop is not None else "never stopped"
        out.append(
            f'<g class="fault-window"><title>{escape(win.label)}: {win.start:.2f}s to '
            f"{stop}</title>"
            f'<rect x="{x0:.1f}" y="{_TOP}" width="{max(x1 - x0, 1.5):.1f}" height="{ph}" '
            f'fill="{FAULT_FILL}" fill-opacity="0.28"/>'
            f'<text x="{x0 + 2:.1f}" y="{_TOP + 11}" class="fl">{escape(win.label)}</text></g>'
        )
    for v in ticks:
        yy = y(v)
        out.append(
            f'<line x1="{_LEFT}" x2="{_LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>'
            f'<text x="{_LEFT - 6}" y="{yy + 4:.1f}" class="yt">{_fmt(v)}</text>'
        )
    for v in (t for t in _ticks(t_max, 6) if t <= t_max * 1.0001):
        xx = x(v)
        out.append(f'<text x="{xx:.1f}" y="{_TOP + ph + 16}" class="xt">{_fmt(v)}s</text>')
    for t, name in chart.marks:
        xx = x(t)
        out.append(
            f'<g class="mark"><title>{escape(name)} at {t:.2f}s</title>'
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{_TOP}" y2="{_TOP + ph}"/></g>'
        )
    out.append(
        f'<text x="12" y="{_TOP + ph / 2:.0f}" class="yl" '
        f'transform="rotate(-90 12 {_TOP + ph / 2:.0f})">{escape(chart.y_label)}</text>'
    )
    for i, line in enumerate(chart.lines):
        color = line.color or PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        for seg in _segments(line.points):
            if len(seg) == 1:
                t, v = seg[0]
                out.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>')
                continue
            pts = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in seg)
            out.append(
                f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>'
            )
        ly = _TOP + 8 + 16 * i
        out.append(
            f'<line x1="{w - _RIGHT + 12}" x2="{w - _RIGHT + 30}" y1="{ly}" y2="{ly}" '
            f'stroke="{color}" stroke-width="2"{dash}/>'
            f'<text x="{w - _RIGHT + 34}" y="{ly + 4}" class="lg">{escape(line.name)}</text>'
        )
    if not chart.lines:
        out.append(
            f'<text x="{_LEFT + pw / 2:.0f}" y="{_TOP + ph / 2:.0f}" class="empty">'
            "no data in this run</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _segments(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Runs of consecutive points with a value: a None breaks the line."""
    segs: list[list[tuple[float, float]]] = [[]]
    for t, v in points:
        if v is None:
            if segs[-1]:
                segs.append([])
        else:
            segs[-1].append((t, v))
    return [s for s in segs if s]
