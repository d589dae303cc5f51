"""`python -m driftlab.harness.lab.testing.synthetic`: a synthetic run under runs/."""

from __future__ import annotations

import argparse
from pathlib import Path

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.history.rundir import RunDir
from driftlab.harness.lab.testing.synthetic.plants import expected_counts
from driftlab.harness.lab.testing.synthetic.run import SCENARIO, generate_history


def main(argv: list[str] | None = None) -> None:
    """`python -m driftlab.harness.lab.testing.synthetic`: a synthetic run under runs/, with every
    kind planted and expected present; runs/latest points at it."""
    parser = argparse.ArgumentParser(
        prog="python -m driftlab.harness.lab.testing.synthetic",
        description="Write a synthetic run with planted anomalies (then: driftlab analyze "
        "runs/latest).",
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="runs directory")
    parser.add_argument("--events", type=int, default=200_000, help="about this many events")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--plant-each", type=int, default=3, help="anomalies per kind")
    parser.add_argument("--jsonl", action="store_true", help="JSON-lines segments")
    args = parser.parse_args(argv)
    plant = {kind: args.plant_each for kind in ALL_KINDS}
    expect = {k: "present" for k, n in expected_counts(plant).items() if n}
    run = RunDir.create(args.runs, SCENARIO, args.seed).path
    try:
        expected = generate_history(
            run, args.events, args.seed, plant, jsonl=args.jsonl, expectations=expect
        )
    except ValueError as e:
        parser.error(str(e))
    print(f"{run}: planted {sum(expected.values())} anomalies of {len(expect)} kinds")


if __name__ == "__main__":
    main()
