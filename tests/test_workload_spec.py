"""Workload choices: key distributions, rotation, the op mix, and spec validation."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import ClassVar

import pytest

from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.workload.clients import Workload
from driftlab.harness.lab.workload.spec import KeyChooser, OpChooser, WorkloadSpec


def test_zipf_makes_the_first_key_hottest() -> None:
    spec = WorkloadSpec(keys=5, distribution="zipf", zipf_s=1.1)
    choose = KeyChooser(spec, random.Random(1))
    counts = Counter(choose() for _ in range(20_000))
    assert set(counts) == {f"k{i}" for i in range(5)}
    ordered = [counts[f"k{i}"] for i in range(5)]
    assert ordered == sorted(ordered, reverse=True)
    # 1/(1^1.1) over the sum of 1/i^1.1 for i=1..5 is about 0.45.
    assert 0.40 < counts["k0"] / 20_000 < 0.50


def test_uniform_spreads_evenly() -> None:
    choose = KeyChooser(WorkloadSpec(keys=4, distribution="uniform"), random.Random(2))
    counts = Counter(choose() for _ in range(20_000))
    assert all(4_500 < n < 5_500 for n in counts.values())


def test_rotation_moves_to_a_fresh_key_space() -> None:
    spec = WorkloadSpec(keys=3, distribution="uniform", rotate_s=0.5)
    choose = KeyChooser(spec, random.Random(3))
    assert {choose(0.1) for _ in range(200)} == {"k0", "k1", "k2"}
    assert {choose(0.6) for _ in range(200)} == {"k3", "k4", "k5"}
    assert {choose(2.4) for _ in range(200)} == {"k12", "k13", "k14"}


def test_op_mix_follows_weights() -> None:
    spec = WorkloadSpec(mix={"write": 3, "read": 1})
    choose = OpChooser(spec, random.Random(4))
    counts = Counter(choose() for _ in range(8_000))
    assert set(counts) == {"write", "read"}
    assert 0.70 < counts["write"] / 8_000 < 0.80


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"clients": 0}, "workload.clients"),
        ({"keys": 0}, "workload.keys"),
        ({"distribution": "pareto"}, "use uniform or zipf"),
        ({"mix": {"upsert": 1.0}}, "workload.mix"),
        ({"duration": 0}, "duration"),
        ({"colour": "red"}, "unknown fields"),
    ],
)
def test_bad_specs_are_named(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WorkloadSpec.from_dict(fields)


class _SlowToClose(Client):
    """A client whose operations complete at once and whose close takes a while, as
    an application process that flushes and exits does."""

    closed_at: ClassVar[list[float]] = []
    done_at: ClassVar[list[float]] = []

    def write(self, key: str, value: str) -> None:
        _SlowToClose.done_at.append(time.monotonic())

    def delete(self, key: str) -> None:
        self.write(key, "")

    def read(self, key: str, store: str) -> None:
        self.write(key, "")

    def close(self) -> None:
        time.sleep(0.3)
        _SlowToClose.closed_at.append(time.monotonic())


class _Setup(Setup):
    name = "slow-to-close"

    def prepare(self, ctx: SetupContext) -> None:
        """Nothing to start."""

    def client(self, process: str) -> Client:
        return _SlowToClose(None, process)  # type: ignore[arg-type]

    def read_stores(self) -> tuple[str, ...]:
        return ("store",)

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        return {}


def test_the_workload_time_ends_with_its_last_operation_not_the_clients_close() -> None:
    """The terminal's ops/s divides by the workload's time: from its start to its last
    operation's completion, not to the end of closing the clients."""
    workload = Workload(WorkloadSpec(clients=2, rate=100, duration=0.3), _Setup(), seed=1)
    stats = workload.run()
    assert stats.ops == len(_SlowToClose.done_at) > 0
    end = workload._started + stats.elapsed
    assert max(_SlowToClose.done_at) <= end < min(_SlowToClose.closed_at)
