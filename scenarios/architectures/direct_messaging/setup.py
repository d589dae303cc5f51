"""Direct messaging: the producer pushes each message to the consumer over HTTP (C17).

No broker sits in between: the consumer is an HTTP server process on loopback
(receiver.py, named `receiver`) and the application POSTs every write to it. A crash
fault on `receiver` SIGKILLs it for the window; whatever the producer sends meanwhile is
refused and, with no one to hold it, lost (DDIA: "if the consumer is offline, it may
miss messages").

Parameters (scenario `setup.params`):

- `retry_s`: how long the producer keeps retrying a send the receiver refused, with a
  back-off (default 0: fire and forget, the plain direct-messaging case). A producer
  that retries for longer than the receiver is down loses nothing: the control case.
- `timeout_s`: the HTTP request's timeout (default 1).

History: every send the producer attempts is a `produce` on channel `direct` (msg_id
`<namespace>:<key>:<version>`, a per-key version the producer assigns) and a `write`
op on the source (`ok` when the receiver answered, `fail` when it refused, `info` when
the request timed out); the receiver records a `deliver` per message it received; at
quiesce the setup marks the receiver `consumer-done` on `direct`.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import httpx
import tenacity

from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.http_client import caused_by, http_client
from driftlab.harness.lab.services.ports import free_port, port_accepts
from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.setups.worker_process import WorkerProcess

CHANNEL = "direct"
RECEIVER = "receiver"


class DirectMessaging(Setup):
    """A producer that POSTs to a receiver process; no broker, no derived store."""

    name = "direct-messaging"
    services = ("toxiproxy",)  # nothing but the stack itself: no broker is the point
    stores = ()

    def __init__(self) -> None:
        super().__init__()
        self.receiver: WorkerProcess | None = None
        self.port = 0
        self.retry_s = 0.0
        self.timeout_s = 1.0
        self._versions: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def prepare(self, ctx: SetupContext) -> None:
        """Choose the receiver's port and configure (not start) it."""
        self.ctx = ctx
        self.retry_s = float(ctx.params.get("retry_s", 0.0))
        self.timeout_s = float(ctx.params.get("timeout_s", 1.0))
        if self.retry_s < 0 or self.timeout_s <= 0:
            raise ValueError(
                f"direct-messaging: retry_s must be >= 0 and timeout_s > 0; got "
                f"retry_s={self.retry_s}, timeout_s={self.timeout_s}"
            )
        # The receiver keeps its port across restarts: the producer knows one address.
        self.port = free_port()
        config = {"port": self.port, "channel": CHANNEL, "group": RECEIVER}
        self.receiver = WorkerProcess(
            RECEIVER,
            "driftlab.scenarios.architectures.direct_messaging.receiver",
            config,
            ctx.work_dir,
            ctx.logs,
        )

    def start(self) -> None:
        """Start the receiver and wait until it listens."""
        assert self.receiver is not None
        self.receiver.start()
        self.receiver.wait_healthy()
        if not wait_until(lambda: port_accepts(self.port), 10, 0.05):
            raise RuntimeError(f"direct-messaging: the receiver does not listen on {self.port}")

    def process(self, name: str) -> WorkerProcess | None:
        """`receiver`: the target of crash, pause and restart faults."""
        return self.receiver if name == RECEIVER else None

    def client(self, process: str) -> DirectClient:
        """A producer thread's client (one HTTP connection per send)."""
        return DirectClient(self, process)

    def next_version(self, key: str) -> int:
        """The next version of `key` (a counter per key, as the producer keeps it)."""
        with self._lock:
            self._versions[key] += 1
            return self._versions[key]

    def quiesce(self, timeout: float) -> bool:
        """The receiver is up again (after heal) and has everything it will ever get."""
        receiver = self.receiver
        assert receiver is not None
        if not wait_until(lambda: receiver.is_running() and port_accepts(self.port), timeout):
            return False
        self.context.recorder.mark("consumer-done", consumer=RECEIVER, channel=CHANNEL)
        return True

    def final_states(self) -> dict[str, dict[str, tuple[str, int | None]]]:
        """None: messages are not state, the judgement is on deliveries."""
        return {}

    def teardown(self) -> None:
        """Stop the receiver."""
        if self.receiver is not None:
            self.receiver.stop()


class DirectClient(Client):
    """The application: every write becomes one message pushed to the receiver."""

    def __init__(self, setup: DirectMessaging, process: str) -> None:
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self.url = f"http://127.0.0.1:{setup.port}/messages"
        self.http = http_client(setup.timeout_s)
        self.sending = tenacity.Retrying(
            # Only a refused send is tried again, with a back-off, within `retry_s`.
            retry=tenacity.retry_if_result(lambda sent: sent[0] == "fail"),
            wait=tenacity.wait_exponential(multiplier=0.05, max=0.5),
            stop=tenacity.stop_before_delay(setup.retry_s),
            retry_error_callback=lambda state: state.outcome.result(),
        )

    def write(self, key: str, value: str) -> None:
        """Send one message (retrying refusals for up to `retry_s`) and record it."""
        setup = self.setup
        version = setup.next_version(key)
        msg = {
            "msg_id": f"{setup.context.namespace}:{key}:{version}",
            "key": key,
            "value": value,
            "version": version,
        }
        op = self.rec.invoke(self.process, "write", key=key, value=value, store=SOURCE_STORE)
        # The attempt itself is the produce: no broker acknowledges anything here.
        self.rec.msg("produce", channel=CHANNEL, **msg)
        phase, error = self.sending(self._post, msg)
        self.rec.complete(op, phase, version=version, error=error)

    def _post(self, msg: dict[str, object]) -> tuple[str, str | None]:
        try:
            status = self.http.post(self.url, json=msg).status_code
        except httpx.TransportError as exc:
            # Refused, reset, or closed with no answer (the receiver was killed).
            if isinstance(exc, httpx.RemoteProtocolError) or caused_by(
                exc, (ConnectionRefusedError, ConnectionResetError)
            ):
                return "fail", f"receiver unreachable: {exc}"
            # Sent, then no answer: the receiver may or may not have it.
            return "info", f"no answer: {exc}"
        if status >= 300:
            return "fail", f"receiver answered {status}"
        return "ok", None

    def delete(self, key: str) -> None:
        """Deletes are not part of this setup's workload."""
        raise ValueError("direct-messaging: the workload's mix must not contain deletes")

    def read(self, key: str, store: str) -> None:
        """Reads are not part of this setup's workload (it has no store to read)."""
        raise ValueError("direct-messaging: the workload's mix must not contain reads")
