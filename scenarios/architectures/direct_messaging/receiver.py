"""The consumer of direct messaging: a small HTTP server process the producer pushes to.

    python -m driftlab.scenarios.architectures.direct_messaging.receiver   # started by setup.py

It accepts `POST /messages` with a JSON message and records one `deliver` per message to
its own history segment (consumer `receiver`, process = this instance), then answers
204. There is no broker and no buffer: while this process is down, nothing receives.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.lab.setups.worker_process import publish_status, worker_config, worker_logging

log = logging.getLogger("driftlab.direct_receiver")


def serve(cfg: dict[str, Any]) -> None:
    """Serve until SIGTERM."""
    rec = Recorder(cfg["run_dir"], role="receiver", batch_size=1, flush_interval=1.0)
    attempts: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                m = json.loads(self.rfile.read(length))
                msg_id = str(m["msg_id"])
            except (ValueError, KeyError, TypeError):
                self.send_error(400, "a JSON object with msg_id, key, value, version")
                return
            with lock:
                attempts[msg_id] = attempt = attempts.get(msg_id, 0) + 1
            rec.msg(
                "deliver",
                channel=cfg["channel"],
                msg_id=msg_id,
                key=m.get("key"),
                value=m.get("value"),
                version=m.get("version"),
                consumer=cfg["group"],
                process=cfg["instance"],
                attempt=attempt,
            )
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the log

    server = ThreadingHTTPServer(("127.0.0.1", int(cfg["port"])), Handler)
    server.daemon_threads = True

    def stop(_signum: int, _frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    publish_status(cfg["status_path"], {"instance": cfg["instance"]})
    log.info("instance %s listening on 127.0.0.1:%s", cfg["instance"], cfg["port"])
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    rec.close()


def main() -> int:
    """Run one receiver instance until SIGTERM."""
    worker_logging()
    serve(worker_config())
    return 0


if __name__ == "__main__":
    sys.exit(main())
