"""An AMQP-style queue: one ready list, acks, and requeue at the front on a crash."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Message:
    """A queued message; the queue does not know offsets."""

    msg_id: str
    key: str
    value: str
    version: int


@dataclass(slots=True)
class Queue:
    """Messages wait in `ready`; a delivered message is unacked until acked or requeued."""

    ready: deque[Message] = field(default_factory=deque)
    deliveries: dict[str, int] = field(default_factory=dict)

    def publish(self, msg: Message) -> None:
        """Append a message at the back of the queue."""
        self.ready.append(msg)

    def take(self) -> tuple[Message, int] | None:
        """Hand the head message to a consumer; return it with its delivery attempt."""
        if not self.ready:
            return None
        msg = self.ready.popleft()
        attempt = self.deliveries.get(msg.msg_id, 0) + 1
        self.deliveries[msg.msg_id] = attempt
        return msg, attempt

    def requeue(self, msg: Message) -> None:
        """A consumer died holding `msg` unacked: it goes back to the front."""
        self.ready.appendleft(msg)
