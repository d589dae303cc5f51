"""The one interface every supervised service implements, local or docker."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from driftlab.harness.history.exitcodes import LabFailure

log = logging.getLogger("driftlab.services")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a client reaches a service (always a loopback address locally)."""

    host: str
    port: int
    extra: dict[str, str] = field(default_factory=dict)  # user, password, dbname, ...

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class Service(ABC):
    """A real component under the harness's control.

    `restart` keeps the data; `kill` is SIGKILL to the whole process group;
    `pause`/`resume` are SIGSTOP/SIGCONT. Logs go to `log_path` in the stack's folder.
    """

    name: str
    log_path: Path

    @abstractmethod
    def start(self) -> None:
        """Start the service (returns once the process is launched)."""

    @abstractmethod
    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Block until a real client round trip succeeds, or raise ServiceError."""

    @abstractmethod
    def stop(self) -> None:
        """Graceful stop; escalates to SIGKILL after a grace period."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL, as a crash: no cleanup runs."""

    @abstractmethod
    def pause(self) -> None:
        """SIGSTOP: the process stays, its sockets stall."""

    @abstractmethod
    def resume(self) -> None:
        """SIGCONT after pause."""

    @abstractmethod
    def is_running(self) -> bool:
        """Whether the process is alive (paused counts as alive)."""

    @abstractmethod
    def endpoint(self) -> Endpoint:
        """The service's own address (clients go through Toxiproxy links instead)."""

    def answers(self) -> bool:
        """Whether it answers a client now (one try, no waiting), as the lab's watchdog
        asks; a service that cannot tell says whether it runs."""
        return self.is_running()

    def broken(self) -> str | None:
        """What the service, though it answers, cannot do for a run now, in a few words
        (a connector task that failed), or None; the lab's watchdog asks, so it may
        talk to the service but must not wait long."""
        return None

    def busy(self) -> bool:
        """Whether the service is in the middle of work that a crash now would cut short.

        A `crash` fault with `when: busy` waits for this. Services that cannot tell say
        True, so such a fault strikes at its scheduled time.
        """
        return True

    def hold_if_busy(self) -> bool:
        """`busy()`, for a crash to strike at once: a service that can tell freezes
        itself to make sure, and stays frozen when it is busy (the crash then kills it
        in the very state it reported) or runs on when it is not. By default, `busy()`
        without freezing."""
        return self.busy()

    def restart(self) -> None:
        """Restart with the data intact."""
        if self.is_running():
            self.stop()
        self.start()
        self.wait_healthy()


class HoldsWhenBusy(Service):
    """A service that can tell `busy()` from what its process last published, and holds
    for a `when: busy` crash by freezing the process and looking again.

    The first look may be stale by the time a kill lands (tens of ms on a loaded
    machine): the work it saw finished since, and the crash cuts nothing short. Frozen,
    the process cannot get past what the second look reads, provided it publishes that
    its work is done *before* the step that makes it so (an offset commit, an ack)
    leaves: a stop signal pending when that write returns stops it before the step.
    """

    @abstractmethod
    def busy(self) -> bool:
        """Whether the last published status says a crash now would cut work short."""

    def hold_if_busy(self) -> bool:
        """`busy()`, asked again of the frozen (SIGSTOPped) process, which stays frozen
        for the crash when it is busy and runs on when it is not."""
        if not self.busy():
            return False
        self.pause()
        if self.busy():
            return True
        self.resume()
        log.info("%s: busy at a look, not once frozen; runs on", self.name)
        return False


S = TypeVar("S", bound=Service)


class ServiceGroup(Service, Generic[S]):
    """Several services that faults act on as one (a Kafka cluster's nodes, a setup's
    consumer processes): each action goes to every member in turn; the group logs
    where its first member does and answers at its address."""

    def __init__(self, name: str, members: Sequence[S]) -> None:
        self.name = name
        self.members = list(members)
        self.log_path = self.members[0].log_path

    def start(self) -> None:
        """Launch every member that is not running."""
        for m in self.members:
            if not m.is_running():
                m.start()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Block until every member is healthy (`timeout` for each)."""
        for m in self.members:
            m.wait_healthy(timeout)

    def stop(self) -> None:
        """Stop every member."""
        for m in self.members:
            m.stop()

    def kill(self) -> None:
        """SIGKILL every member."""
        for m in self.members:
            m.kill()

    def pause(self) -> None:
        """SIGSTOP every member."""
        for m in self.members:
            m.pause()

    def resume(self) -> None:
        """SIGCONT every member."""
        for m in self.members:
            m.resume()

    def is_running(self) -> bool:
        """Whether any member is alive."""
        return any(m.is_running() for m in self.members)

    def answers(self) -> bool:
        """Whether every member answers."""
        return all(m.answers() for m in self.members)

    def busy(self) -> bool:
        """Whether any member is busy."""
        return any(m.busy() for m in self.members)

    def hold_if_busy(self) -> bool:
        """Whether any member is busy, each busy one held for the crash (every member
        asked: the crash kills them all)."""
        return any([m.hold_if_busy() for m in self.members])

    def endpoint(self) -> Endpoint:
        """The first member's address."""
        return self.members[0].endpoint()


class ServiceError(LabFailure, RuntimeError):
    """A service failed to start, answer or stop; the message names the fix."""
