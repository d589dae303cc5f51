"""The fault actions: each injects one fault and returns the function that heals it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftlab.harness.lab.services.base import Service
from driftlab.harness.lab.services.stack_protocol import ServiceStack
from driftlab.harness.lab.services.toxiproxy import link_name
from driftlab.harness.lab.setups.base import Setup
from driftlab.harness.lab.setups.connect import APP

Undo = Callable[[], None]


def _service(stack: ServiceStack, name: str) -> Service:
    # Stack.__getitem__ raises a ServiceError naming the running services.
    return stack[name]


def crash(stack: ServiceStack, name: str) -> Undo:
    """SIGKILL the service's process group; healing starts it again, data intact."""
    svc = _service(stack, name)
    svc.kill()

    def undo() -> None:
        svc.start()
        svc.wait_healthy()

    return undo


def pause(stack: ServiceStack, name: str) -> Undo:
    """SIGSTOP the service; healing sends SIGCONT."""
    svc = _service(stack, name)
    svc.pause()
    return svc.resume


def restart(stack: ServiceStack, name: str) -> Undo:
    """A graceful restart, done at once; nothing to heal."""
    _service(stack, name).restart()
    return lambda: None


def link_fault(stack: ServiceStack, name: str, kind: str, params: dict[str, Any]) -> Undo:
    """One Toxiproxy fault on the link from the application to service `name`.

    `cut` is a partition (bytes stop, connections hang until the client times out);
    `down` takes the link down (connections close, new ones are refused). A `name`
    holding "->" is a whole link name (`consumer->redis`): another client's link.
    """
    links = stack.links
    link = name if "->" in name else link_name(APP, name)
    if kind == "cut":
        links.cut(link)
    elif kind == "down":
        links.disable(link)
    elif kind == "latency":
        links.latency(link, int(params.get("ms", 100)), int(params.get("jitter_ms", 0)))
    elif kind == "bandwidth":
        links.bandwidth(link, int(params.get("kbps", 64)))
    elif kind == "reset":
        links.reset_peer(link, int(params.get("timeout_ms", 0)))
    else:
        raise ValueError(f"link fault {kind!r}; use cut, down, latency, bandwidth or reset")
    return lambda: links.heal(link)


def slow_consumer(setup: Setup, consumer: str, delay_ms: float) -> Undo:
    """Ask the setup to slow its consumer `consumer` down by `delay_ms` per message."""
    slow = getattr(setup, "slow_consumer", None)
    if slow is None:
        raise ValueError(
            f"setup {setup.name!r} has no consumers to slow down; "
            "slow-consumer needs a setup with a slow_consumer(name, delay_s) method"
        )
    slow(consumer, delay_ms / 1000)
    return lambda: slow(consumer, 0.0)
