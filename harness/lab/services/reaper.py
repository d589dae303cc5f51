"""The reaper: kills a stack's process groups when the harness that owns it dies.

PR_SET_PDEATHSIG only reaches each service's leader; helpers in its group (PostgreSQL
backends, Erlang's port programs) and anything launched after a crash in the harness
would survive. The reaper is a tiny process in a session of its own that waits on a
pidfd of its owner, then reads the stack's state file and SIGKILLs every group in it.

    python -m driftlab.harness.lab.services.reaper <owner pid> <state file> [remove]

With `remove` (a stack in a temporary folder, as a run or a test starts) it also deletes
the stack folder once the processes are gone. A docker stack's state file names its
stack id: its containers, found by their label, are removed too.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from driftlab.harness.history.waiting import wait_until
from driftlab.harness.lab.services.process import (
    ProcessRecord,
    group_alive,
    kill_group,
    read_start_time,
)


def reap(state_path: Path) -> list[int]:
    """SIGKILL every process group recorded in the state file; returns those signalled.

    A group is signalled only if its leader is the recorded process (same start time)
    or the group still has members, so a recycled pid is never hit.
    """
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return []
    killed = []
    for service in state.get("services", {}).values():
        for data in service.get("processes", {}).values():
            record = ProcessRecord.from_json(data)
            if read_start_time(record.pid) == record.start_time or group_alive(record.pgid):
                kill_group(record.pgid, signal.SIGKILL)
                killed.append(record.pgid)
    docker = state.get("docker")
    if docker:
        remove_docker_stack(str(docker["stack_id"]))
    return killed


def remove_docker_stack(sid: str) -> None:
    """Remove every container of the docker stack `sid` (labelled with it)."""
    from driftlab.harness.lab.services.containers import (
        docker_client,
        remove_containers,
        stack_containers,
    )

    client = docker_client()
    removed = remove_containers(client, stack_containers(client, sid))
    print(f"reaper: removed containers {', '.join(removed) or '(none)'}", flush=True)


def watch(owner_pid: int, state_path: Path, remove: bool = False) -> None:
    """Block until `owner_pid` exits, then reap the stack; with `remove`, delete its
    folder too once its processes are gone (a temporary stack of a run)."""
    try:
        pidfd = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        pass
    else:
        select.select([pidfd], [], [])  # readable once the owner has exited
    groups = reap(state_path)
    if remove:
        wait_until(lambda: not any(group_alive(g) for g in groups), 30)
        # A SIGKILLed run once left ~42 MB per run in /tmp (data and logs of every service).
        shutil.rmtree(state_path.parent, ignore_errors=True)


def spawn(state_path: Path, log_path: Path, remove: bool = False) -> subprocess.Popen[bytes]:
    """Start a reaper for this process's stack (in its own session, outliving us);
    `remove`: its folder is temporary, delete it after reaping."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", __name__, str(os.getpid()), str(state_path)]
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv + (["remove"] if remove else []),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or not argv[0].isdigit() or argv[2:] not in ([], ["remove"]):
        print(
            f"usage: python -m {__spec__.name} <owner pid> <state file> [remove]",
            file=sys.stderr,
        )
        return 2
    watch(int(argv[0]), Path(argv[1]), remove=argv[2:] == ["remove"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
