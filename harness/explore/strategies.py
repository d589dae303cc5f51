"""Hypothesis strategies for the schedules of a setup.

The strategy draws any list of the setup's moves; the simulator skips what is not
enabled, so every draw is a valid schedule and the shrinker may delete or simplify any
step. Each step is one integer drawn into a table of every step the setup's moves allow,
listed simplest first (first move, first actor, first key): one draw per step keeps
generation cheap, and shrinking an integer towards 0 simplifies the step.
"""

from __future__ import annotations

from itertools import product

from hypothesis import strategies as st

from harness.explore.schedule import Step
from harness.explore.setups import Move, SetupSpec

CHUNK = 8
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

    A list of short lists: Hypothesis keeps one flat list near five elements on average,
    too short to hold the five-step races some claims need; nesting averages about
    twenty while the shrinker still deletes steps and whole chunks.
    """
    table = step_table(setup)
    index = st.integers(0, len(table) - 1)
    chunks = st.lists(st.lists(index, max_size=CHUNK), max_size=CHUNKS)
    return chunks.map(lambda cs: [table[i] for chunk in cs for i in chunk])
