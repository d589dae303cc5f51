"""Hypothesis strategies for the schedules of a setup.

The strategy draws any list of the setup's moves; the simulator skips what is not
enabled, so every draw is a valid schedule and the shrinker may delete or simplify any
step. Steps index a table of every step the setup's moves allow, listed simplest first
(first move, first actor, first key), so shrinking an index towards 0 simplifies it.
"""

from __future__ import annotations

from itertools import product

from hypothesis import strategies as st

from driftlab.harness.lab.explore.schedule import Step
from driftlab.harness.lab.explore.spec import Move, SetupSpec

CHUNK = 12
CHUNKS = 4


def move_steps(move: Move) -> list[Step]:
    """Every step one move allows, simplest first."""
    return [
        Step(move.action.value, actor=actor, key=key, partition=partition, target=target)
        for actor, key, partition, target in product(
            move.actors or (None,),
            move.keys or (None,),
            move.partitions or (None,),
            move.targets or (None,),
        )
    ]


def step_table(setup: SetupSpec) -> list[Step]:
    """Every step a schedule of the setup may hold, simplest first."""
    return [step for move in setup.moves for step in move_steps(move)]


def schedules(setup: SetupSpec) -> st.SearchStrategy[list[Step]]:
    """Schedules of up to CHUNK * CHUNKS steps of the setup's moves.

    Each step is one byte, scaled onto the step table (byte 0 is the simplest step):
    a chunk of bytes is a single Hypothesis choice, the cheapest to draw and to shrink.
    A flat draw averages about six steps, too few for the five-step races some claims
    need; a list of chunks averages about fifteen while the shrinker still deletes steps
    and whole chunks.
    """
    table = step_table(setup)
    n = len(table)
    chunks = st.lists(st.binary(max_size=CHUNK), max_size=CHUNKS)
    return chunks.map(lambda cs: [table[b * n >> 8] for chunk in cs for b in chunk])
