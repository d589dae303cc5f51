"""Figures for the local stack: seconds from `driftlab up` to every service healthy,
cold (fresh folders: initdb, a new RabbitMQ node, ...) and warm (restart on the data of
the cold run), and the time `driftlab down` takes.

    .venv/bin/python benchmarks/stack_up_bench.py [--only postgres,redis,...] [--rounds 1]

Without --only it starts every default service (Kafka and Connect included). Prints
figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIFTLAB = Path(sys.executable).with_name("driftlab")


def _timed(args: list[str]) -> tuple[float, str]:
    begun = time.monotonic()
    done = subprocess.run(
        [str(DRIFTLAB), *args], capture_output=True, text=True, check=False, timeout=600
    )
    took = time.monotonic() - begun
    if done.returncode != 0:
        raise SystemExit(f"driftlab {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return took, done.stdout


def _per_service(output: str) -> str:
    found = re.findall(r"^\s+(\S+): healthy in ([\d.]+)s", output, flags=re.MULTILINE)
    return ", ".join(f"{name} {secs}s" for name, secs in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated services (default: all)")
    parser.add_argument("--rounds", type=int, default=1, help="cold+warm rounds")
    args = parser.parse_args()
    only = ["--only", args.only] if args.only else []
    print(f"services: {args.only or 'all defaults'}")
    for round_no in range(1, args.rounds + 1):
        root = Path(tempfile.mkdtemp(prefix="driftlab-bench-stack-", dir="/tmp"))
        try:
            cold, out = _timed(["up", "--dir", str(root), *only])
            print(f"round {round_no}: cold up  {cold:6.1f} s  ({_per_service(out)})")
            down, _ = _timed(["down", "--dir", str(root)])
            print(f"round {round_no}: down     {down:6.1f} s")
            warm, out = _timed(["up", "--dir", str(root), *only])
            print(f"round {round_no}: warm up  {warm:6.1f} s  ({_per_service(out)})")
        finally:
            subprocess.run(
                [str(DRIFTLAB), "down", "--dir", str(root)], capture_output=True, check=False
            )
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
