"""The schedules `driftlab explore pipeline.toml` may try, drawn and mutated.

A `Space` holds what a pipeline file offers to hurt: its processes (crash, pause,
restart), each process's links to the services it names (cut, down, latency), the
stack services driftlab runs for it (crash, pause, restart), the moments a fault may
wait for (a process's k-th ready line, the n-th write, another fault's start or end, a
mirror store lagging or catching up) and the workload's length. A `Candidate` is one
schedule of 1 to `MAX_FAULTS` faults and the workload's duration. Every choice comes
from the caller's `random.Random`, so a search seed repeats its choices.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from driftlab.harness.lab.nemesis.schedule import Anchor, FaultSpec, Schedule
from driftlab.scenarios.pipeline.spec import Pipeline
from driftlab.scenarios.pipeline.spec_model import EXTERNAL_UNLINKED

MAX_FAULTS = 3
DELAYS = (0.0, 0.05, 0.2, 0.5, 1.0)
"""The delays after a moment a fault opens at (seconds): small, because the moments
worth hitting (a restart's catch-up, a batch half applied) are short."""
DURATIONS = (0.3, 0.5, 1.0, 1.5, 2.0)
LAG_THRESHOLDS = (0.2, 0.5, 1.0)
LATENCY = {"ms": 200, "jitter_ms": 50}
PROCESS_KINDS = ("crash", "pause", "restart")
LINK_KINDS = ("cut", "down", "latency")
START_S = 0.5  # the first clock time: the pipeline has started and the writes flow
SOURCE_SERVICE = "postgres"


@dataclass(frozen=True)
class Space:
    """What a pipeline file offers to hurt, and for how long its workload runs."""

    processes: tuple[str, ...]
    links: tuple[str, ...]  # process->service
    services: tuple[str, ...]  # driftlab's own but the source's, which a fault may crash
    mirrors: tuple[str, ...]  # stores with a lag (not logs)
    duration: float
    recovery: float
    writes: int  # about how many writes the workload makes

    @classmethod
    def of(cls, pipeline: Pipeline, duration: float | None = None) -> Space:
        """The space of `pipeline`, its workload `duration` seconds long (default the
        file's)."""
        wl = pipeline.workload
        length = duration if duration is not None else wl.duration
        links = tuple(
            f"{p.name}->{svc}"
            for p in pipeline.processes
            for svc in pipeline.reached
            if svc not in EXTERNAL_UNLINKED and _names(p.command, p.env, svc)
        )
        return cls(
            processes=tuple(p.name for p in pipeline.processes),
            links=links,
            # driftlab's own workload writes the source in PostgreSQL: hurting it there
            # fails the lab's writes (a lab failure), not the pipeline.
            services=tuple(s for s in pipeline.services if s != SOURCE_SERVICE),
            mirrors=tuple(s.name for s in pipeline.stores if s.kind != "log"),
            duration=length,
            recovery=pipeline.faults.recovery,
            writes=int(wl.rate * length) if wl.rate else 1000,
        )

    @property
    def last_start(self) -> float:
        """The latest clock time a fault may open at (the recovery stays free)."""
        return max(START_S, self.duration - self.recovery - 0.3)

    def targets(self) -> list[tuple[str, str, float]]:
        """(kind, target, weight) of every fault the space holds: the user's processes
        first, then their links, then the services under them."""
        out = [
            (k, p, w) for p in self.processes for k, w in zip(PROCESS_KINDS, (4, 2, 2), strict=True)
        ]
        out += [
            (k, link, w) for link in self.links for k, w in zip(LINK_KINDS, (2, 1, 1), strict=True)
        ]
        out += [(k, s, 0.5) for s in self.services for k in PROCESS_KINDS]
        return out


def _names(command: tuple[str, ...], env: dict[str, str], service: str) -> bool:
    """Whether a process's command or environment names `service` (its templates
    make the link `process->service` that a link fault acts on)."""
    return any(f"{{{service}." in text for text in (*command, *env.values()))


@dataclass(frozen=True)
class Candidate:
    """One schedule to try: its faults (numbered from 0, as `fault_start` moments name
    them) and the workload's duration in seconds."""

    faults: tuple[FaultSpec, ...]
    duration: float
    origin: str = field(default="random", compare=False)  # how it was made

    def schedule(self, recovery: float) -> Schedule:
        """The faults as a run's schedule."""
        return Schedule(self.faults, recovery)

    def key(self) -> str:
        """A text naming the schedule alone: two equal keys are one schedule."""
        return f"{self.duration:g}|" + ";".join(describe_fault(f) for f in self.faults)

    def describe(self) -> str:
        """The schedule in words, one fault after another."""
        faults = "; ".join(f"[{i}] {f.describe()}" for i, f in enumerate(self.faults))
        return f"{faults or 'no fault'} ({self.duration:g} s workload)"

    def clashes(self) -> bool:
        """Whether two of its faults may hold one process or service at once: two at
        clock times whose windows meet, or one opening at the other's start or end (a
        kill of a killed or restarting process, which the lab cannot heal)."""
        held = [(i, f) for i, f in enumerate(self.faults) if f.kind in PROCESS_KINDS]
        for n, (i, a) in enumerate(held):
            for j, b in held[n + 1 :]:
                if a.target != b.target:
                    continue
                if a.after is None and b.after is None:
                    if a.at <= b.until and b.at <= a.until:
                        return True
                elif _waits_for(a, j) or _waits_for(b, i):
                    return True
        return False

    def unreachable(self) -> bool:
        """Whether a fault waits for a process's k-th ready line with fewer than k-1
        crashes or restarts of it in the schedule (it would open only if the process
        died by itself)."""
        return any(
            f.after is not None
            and f.after.event == "ready"
            and sum(
                g.kind in ("crash", "restart") and g.target == f.after.subject
                for j, g in enumerate(self.faults)
                if j != i
            )
            < f.after.nth - 1
            for i, f in enumerate(self.faults)
        )

    @property
    def anchored(self) -> int:
        """How many of its faults wait for a moment."""
        return sum(f.after is not None for f in self.faults)


def _waits_for(f: FaultSpec, index: int) -> bool:
    """Whether `f` opens at the start or end of fault `index`."""
    return (
        f.after is not None
        and f.after.event in ("fault_start", "fault_end")
        and f.after.subject == str(index)
    )


def describe_fault(f: FaultSpec) -> str:
    """One fault in words, with its parameters."""
    params = ",".join(f"{k}={v}" for k, v in sorted(f.params.items()))
    return f.describe() + (f" ({params})" if params else "")


def fault_mapping(f: FaultSpec) -> dict[str, Any]:
    """The [[faults]] table of a pipeline file that stands for `f`."""
    out: dict[str, Any] = {"kind": f.kind, "target": f.target}
    if f.after is not None:
        out["after"] = f.after.to_mapping()
    out["at"] = f.at
    if f.duration:
        out["duration"] = f.duration
    return out | dict(f.params)


SHAPES = (("independent", 4), ("recovery", 4), ("during", 2))
"""The shapes of a random schedule, with their weights: faults drawn one by one; a
process hurt again while it recovers from a crash or restart (at its next ready line
or at the crash's end); a fault that opens while another is open."""


def draw(rng: random.Random, space: Space, clock_only: bool = False) -> Candidate:
    """A random schedule of 1 to MAX_FAULTS faults, of one of the SHAPES; `clock_only`:
    faults drawn one by one, each at a clock time (the plain random search)."""
    shape = rng.choices([s for s, _ in SHAPES], weights=[w for _, w in SHAPES])[0]
    if clock_only or shape == "independent" or not space.processes:
        faults: list[FaultSpec] = []
        for _ in range(rng.choice((1, 2, 2, 3))):
            faults.append(new_fault(rng, space, tuple(faults), clock_only))
        return Candidate(tuple(faults), space.duration, "clock" if clock_only else "random")
    if shape == "recovery":
        process = rng.choice(space.processes)
        kind = rng.choices(("crash", "restart"), weights=(3, 2))[0]
        duration = rng.choice(DURATIONS) if kind == "crash" else 0.0
        first = FaultSpec(kind, process, clock_time(rng, space, duration), duration)
        faults = [first, recovering(rng, space, (first,), 0)]
    else:
        first = new_fault(rng, space, (), clock_only=True)
        second = new_fault(rng, space, (first,), clock_only=True)
        faults = [first, replace(second, after=Anchor("fault_start", "0"), at=rng.choice(DELAYS))]
    if rng.random() < 0.3:
        faults.append(new_fault(rng, space, tuple(faults)))
    return Candidate(tuple(faults), space.duration, shape)


def recovering(
    rng: random.Random, space: Space, before: tuple[FaultSpec, ...], index: int
) -> FaultSpec:
    """A fault on the process that fault `index` of `before` crashed or restarted (or
    on one of its links), while it recovers: a delay after its next ready line, or
    after the crash's end."""
    process = before[index].target
    restarts = sum(f.kind in ("crash", "restart") and f.target == process for f in before)
    anchor = pick(
        rng, [(Anchor("ready", process, restarts + 1), 3), (Anchor("fault_end", str(index)), 1)]
    )
    links = [link for link in space.links if link.startswith(f"{process}->")]
    if links and rng.random() < 0.3:
        kind, target = rng.choice(LINK_KINDS), rng.choice(links)
    else:
        kind, target = rng.choices(PROCESS_KINDS, weights=(2, 1, 1))[0], process
    duration = 0.0 if kind == "restart" else rng.choice(DURATIONS)
    params = dict(LATENCY) if kind == "latency" else {}
    return FaultSpec(kind, target, rng.choice(DELAYS), duration, params, anchor)


def new_fault(
    rng: random.Random, space: Space, before: tuple[FaultSpec, ...], clock_only: bool = False
) -> FaultSpec:
    """A random fault to follow `before`: at a clock time, or (unless `clock_only`) at
    a moment the faults before it can bring about."""
    targets = space.targets()
    kind, target, _ = rng.choices(targets, weights=[w for *_, w in targets])[0]
    duration = 0.0 if kind == "restart" else rng.choice(DURATIONS)
    params = dict(LATENCY) if kind == "latency" else {}
    if clock_only or rng.random() < 0.35:
        return FaultSpec(kind, target, clock_time(rng, space, duration), duration, params)
    anchor = pick(rng, moments(space, before))
    return FaultSpec(kind, target, rng.choice(DELAYS), duration, params, anchor)


def clock_time(rng: random.Random, space: Space, duration: float) -> float:
    """A clock time that leaves the window room before the recovery (tenths of s)."""
    latest = max(START_S, space.last_start - duration)
    return round(rng.uniform(START_S, latest), 1)


def moments(space: Space, before: tuple[FaultSpec, ...]) -> list[tuple[Anchor, float]]:
    """The moments a fault after `before` may wait for, with their weights: those that
    can come in a run of this schedule (a process's k-th ready line only after k-1
    restarts of it)."""
    weighted: list[tuple[Anchor, float]] = []
    for p in space.processes:
        starts = 1 + sum(f.kind in ("crash", "restart") and f.target == p for f in before)
        weighted.append((Anchor("ready", p, 1), 1))
        # A restart's ready line, where a catch-up begins, weighs the most.
        weighted += [(Anchor("ready", p, nth), 4) for nth in range(2, starts + 1)]
    for i, _ in enumerate(before):
        weighted += [(Anchor("fault_start", str(i)), 1), (Anchor("fault_end", str(i)), 1)]
    for s in space.mirrors:
        weighted.append((Anchor("lag", s, 1, LAG_THRESHOLDS[1]), 1))
        weighted.append((Anchor("caught_up", s, 1, LAG_THRESHOLDS[0]), 1))
    weighted.append((Anchor("write", "", max(1, space.writes // 4)), 1))
    return weighted


def pick(rng: random.Random, weighted: list[tuple[Anchor, float]]) -> Anchor:
    """One moment of `weighted`, by its weight."""
    return rng.choices([a for a, _ in weighted], weights=[w for _, w in weighted])[0]


def mutate(rng: random.Random, cand: Candidate, space: Space) -> Candidate:
    """A schedule close to `cand`: one fault added (any, or one hurting a crashed
    process again while it recovers), dropped, moved, lengthened or shortened, or
    waiting for another moment."""
    faults = list(cand.faults)
    op = rng.choices(
        ("add", "recover", "moment", "delay", "duration", "drop", "target"),
        weights=(2, 3, 2, 2, 1, 1, 1),
    )[0]
    i = rng.randrange(len(faults))
    f = faults[i]
    restarted = [
        j
        for j, g in enumerate(faults)
        if g.kind in ("crash", "restart") and g.target in space.processes
    ]
    if op == "add" and len(faults) < MAX_FAULTS:
        faults.append(new_fault(rng, space, tuple(faults)))
    elif op == "recover" and restarted:
        j = rng.choice(restarted)
        if len(faults) < MAX_FAULTS:
            faults.append(recovering(rng, space, tuple(faults), j))
        elif i > j:
            faults[i] = recovering(rng, space, tuple(faults[:i]), j)
    elif op == "drop" and len(faults) > 1:
        return replace(cand, faults=drop_fault(cand.faults, i), origin="mutation")
    elif op == "duration" and f.kind != "restart":
        faults[i] = replace(f, duration=rng.choice([d for d in DURATIONS if d != f.duration]))
    elif op == "moment":
        anchor = pick(rng, moments(space, tuple(faults[:i])))
        faults[i] = replace(f, after=anchor, at=rng.choice(DELAYS))
    elif op == "target":
        same = [
            (k, t) for k, t, _ in space.targets() if (k in LINK_KINDS) == (f.kind in LINK_KINDS)
        ]
        kind, target = rng.choice(same)
        duration = 0.0 if kind == "restart" else (f.duration or rng.choice(DURATIONS))
        params = dict(LATENCY) if kind == "latency" else {}
        faults[i] = replace(f, kind=kind, target=target, duration=duration, params=params)
    elif f.after is not None:
        faults[i] = replace(f, at=rng.choice([d for d in DELAYS if d != f.at]))
    else:
        faults[i] = replace(f, at=clock_time(rng, space, f.duration))
    return replace(cand, faults=tuple(_fitted(faults, space)), origin="mutation")


def _fitted(faults: list[FaultSpec], space: Space) -> list[FaultSpec]:
    """Clock windows moved earlier to close before the recovery (as drawn ones do)."""
    limit = space.duration - space.recovery
    return [
        replace(f, at=round(max(0.0, limit - f.duration), 1))
        if f.after is None and f.until > limit
        else f
        for f in faults
    ]


def drop_fault(faults: tuple[FaultSpec, ...], index: int) -> tuple[FaultSpec, ...]:
    """`faults` without fault `index`: a fault that waited for its start or end waits
    for what it waited for instead, later by as much (or opens at the clock time it
    would have), and the moments naming later faults are renumbered."""
    gone = faults[index]
    out = []
    for f in faults[:index] + faults[index + 1 :]:
        a = f.after
        if a is not None and a.event in ("fault_start", "fault_end") and a.subject == str(index):
            shift = gone.at + (gone.duration if a.event == "fault_end" else 0.0)
            f = replace(f, after=gone.after, at=round(f.at + shift, 3))
            a = f.after
        if a is not None and a.event in ("fault_start", "fault_end") and int(a.subject) > index:
            f = replace(f, after=replace(a, subject=str(int(a.subject) - 1)))
        out.append(f)
    return tuple(out)
