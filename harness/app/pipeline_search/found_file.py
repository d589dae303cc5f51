"""The schedule an exploration found, written as a pipeline file `driftlab run` replays:
the user's own file, its [[faults]] replaced by the schedule's and its workload's
`duration` by the schedule's, with what was found in a comment at the top."""

from __future__ import annotations

import json
import re
from typing import Any

from driftlab.harness.app.pipeline_search.space import Candidate, fault_mapping

_HEADER = re.compile(r"^\s*\[")
_DURATION = re.compile(r"^\s*duration\s*=")


def found_text(text: str, cand: Candidate, comments: list[str]) -> str:
    """The pipeline file `text` with `cand`'s faults and workload duration, and
    `comments` (lines without their #) at the top."""
    kept = _with_duration(_without_faults(text.splitlines()), cand.duration)
    while kept and not kept[-1].strip():
        kept.pop()
    faults = []
    for f in cand.faults:
        faults += ["", "[[faults]]"] + [f"{k} = {_value(v)}" for k, v in fault_mapping(f).items()]
    top = [f"# {line}".rstrip() for line in comments]
    return "\n".join([*top, "", *kept, *faults]) + "\n"


def _without_faults(lines: list[str]) -> list[str]:
    """`lines` without their [[faults]] tables; the comments just above the next table
    stay with it."""
    out: list[str] = []
    block: list[str] | None = None
    for line in lines:
        header = bool(_HEADER.match(line))
        if block is not None and header:
            tail = len(block)
            while tail > 0 and (
                not block[tail - 1].strip() or block[tail - 1].lstrip().startswith("#")
            ):
                tail -= 1
            out += block[tail:]
            block = None
        if header and line.strip().replace(" ", "") == "[[faults]]":
            block = []
            continue
        (out if block is None else block).append(line)
    return out


def _with_duration(lines: list[str], duration: float) -> list[str]:
    """`lines` with [workload]'s duration set to `duration` (a [workload] table added
    when there is none)."""
    out = list(lines)
    line = f"duration = {duration:g}  # the explored schedule's workload"
    start = next((i for i, s in enumerate(out) if s.strip() == "[workload]"), None)
    if start is None:
        return [*out, "", "[workload]", line]
    end = next((i for i in range(start + 1, len(out)) if _HEADER.match(out[i])), len(out))
    for i in range(start + 1, end):
        if _DURATION.match(out[i]):
            out[i] = line
            return out
    out.insert(start + 1, line)
    return out


def _value(v: Any) -> str:
    """A TOML value: strings and numbers as JSON writes them, tables inline."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v)
