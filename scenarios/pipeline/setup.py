"""A pipeline file as a Setup: the runner drives it like any architecture.

    prepare  -> the run's schema, the source table (driftlab's or the user's `create`),
                one CommandProcess per [processes.*] (its env filled from its links;
                an `image` one runs as a container: driftlab.harness.lab.services.image_process),
                each of [[connectors]] registered on the stack's Connect worker
    start    -> every process started and ready, then the observer samples the stores
    client   -> writes the source through the `app->postgres` link (ok: its version)
    quiesce  -> the convergence wait (driftlab.scenarios.pipeline.observer)
    final    -> the source and every store read directly, as `state` events
    teardown -> processes stopped, connectors removed, replication slots and
                publications named after the run dropped

The user's code records nothing: what the stores hold is observed from outside.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from psycopg import sql

from driftlab.harness.history.rundir import KEYS_KEPT, Findings, NotConverged
from driftlab.harness.history.schema import SOURCE_STORE
from driftlab.harness.history.values import UniqueValues
from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.command import CommandProcess, Readiness
from driftlab.harness.lab.services.connect_rest import ConnectRest
from driftlab.harness.lab.services.docker_backend import DockerStack
from driftlab.harness.lab.services.image_process import ImageRuntime, has_image
from driftlab.harness.lab.services.kinds import TOXIPROXY
from driftlab.harness.lab.services.ports import free_port
from driftlab.harness.lab.services.postgres import drop_replication_slots
from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
from driftlab.harness.lab.setups.connect import APP, direct_pg_connect, pg_conninfo
from driftlab.harness.lab.setups.stores import (
    UPSERT,
    AppConnection,
    Outcome,
    State,
    create_source_table,
)
from driftlab.harness.lab.workload.spec import KeyChooser
from driftlab.scenarios.pipeline import checks, connectors, links, run_role, transactions
from driftlab.scenarios.pipeline.http_source import HttpWriter
from driftlab.scenarios.pipeline.observer import Divergence, Lag, Observer
from driftlab.scenarios.pipeline.processes import PipelineCommand, PipelineImage
from driftlab.scenarios.pipeline.readers import (
    Arrivals,
    Reader,
    SourceTableReader,
    SqlReader,
    log_reader,
    store_reader,
)
from driftlab.scenarios.pipeline.spec import Pipeline, PipelineError
from driftlab.scenarios.pipeline.spec_model import SqlSource
from driftlab.scenarios.pipeline.spec_sections import ProcessSpec
from driftlab.scenarios.pipeline.transactions import (
    Committed,
    Transactions,
    ViewsReader,
    ViewStore,
    create_tables,
    create_versions,
)

log = logging.getLogger("driftlab.pipeline")


def _params(template: str, values: dict[str, Any]) -> str:
    """A user's statement as psycopg SQL: `{key}` and `{value}` become parameters."""
    escaped = template.replace("%", "%%")
    return links.fill(escaped, {**values, "key": "%(key)s", "value": "%(value)s"})


class SourceWriter:
    """The statements that write the source, for one client."""

    def __init__(self, source: SqlSource, namespace: str, values: dict[str, Any]) -> None:
        self.named = source.own_sql  # the user's {key} and {value}; UPSERT's %s
        if source.write is not None:
            self.write_sql = _params(source.write, values)
            self.delete_sql = _params(source.delete, values) if source.delete else None
        else:
            table = sql.Identifier(namespace, source.table)
            self.write_sql = sql.SQL(UPSERT).format(table=table).as_string(None)
            self.delete_sql = self.write_sql

    def check(self, conninfo: str) -> None:
        """PipelineError when a statement fails, each tried once and rolled back."""
        for field, text in (("source.write", self.write_sql), ("source.delete", self.delete_sql)):
            if text is not None:
                key, value = "driftlab-check", None if field == "source.delete" else "check"
                params = {"key": key, "value": value} if self.named else (key, value)
                checks.check_statement(field, conninfo, text.encode(), params)

    def execute(self, conn: AppConnection, key: str, value: str | None) -> int | None:
        """Run the write (value None: the delete); the version it returned."""
        text = self.write_sql if value is not None else self.delete_sql
        if text is None:
            raise Outcome("fail", "the pipeline file has no source.delete statement")
        params = {"key": key, "value": value} if self.named else (key, value)
        with conn.failing() as pg:
            row = pg.execute(text.encode(), params).fetchone()
        return int(row[0]) if row and row[0] is not None else None


class PipelineClient(Client):
    """One workload client: writes the source through its link, reads any store."""

    def __init__(self, setup: PipelineSetup, process: str) -> None:
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self.conn = AppConnection(setup.pg_app)
        self.rng = setup.context.client_rng(f"{process}/txn")  # the templates' draws

    def _txn(self, key: str, value: str) -> None:
        """Run one of the file's transactions on `key`
        (driftlab.scenarios.pipeline.transactions)."""
        assert self.setup.txns is not None
        self.setup.keys.add(key)  # before it runs: an unknown commit may hold it
        done = self.setup.txns.run(self.rec, self.process, self.conn, key, value, self.rng)
        self.setup.committed(done, key)
        if done.phase == "ok":  # the workload's writes, not the seed's
            self.setup.context.moments.emit("write")

    def _write(self, f: str, key: str, value: str | None) -> None:
        writer = self.setup.writer
        assert writer is not None  # a source without transactions has its writer
        op_id = self.rec.invoke(self.process, f, key=key, value=value, store=SOURCE_STORE)
        try:
            version = writer.execute(self.conn, key, value)
        except Outcome as out:
            self.rec.complete(op_id, out.phase, error=str(out))
            return
        self.rec.complete(op_id, "ok", version=version)
        self.setup.last_write[key] = time.time_ns()
        self.setup.last_value[key] = value
        self.setup.context.moments.emit("write")
        if value is not None:
            self.setup.written.add((key, value))

    def write(self, key: str, value: str) -> None:
        """Write the source (with transactions: run one); the pipeline carries it."""
        if self.setup.txns is not None:
            self._txn(key, value)
            return
        self._write("write", key, value)

    def delete(self, key: str) -> None:
        """Delete at the source (driftlab's table: a tombstone)."""
        self._write("delete", key, None)

    def read(self, key: str, store: str) -> None:
        """Read `key` from `store` (the whole store, directly) and record what was seen."""
        op_id = self.rec.invoke(self.process, "read", key=key, store=store)
        try:
            got = self.setup.read_store(store).get(key)
        except Exception as exc:
            self.rec.complete(op_id, "info", error=str(exc)[:300])
            return
        value, version = got if got is not None else (None, None)
        self.rec.complete(op_id, "ok", value=value, version=version)

    def close(self) -> None:
        self.conn.close()


SEED = "seed"
"""The process name of the seed's transactions in the history."""

SETUP_PREFIX = "pipeline:"
"""A pipeline file's setup is named `pipeline:<name>`."""


class PipelineSetup(Setup):
    """The setup of one pipeline file, named `pipeline:<name>`; a scenario carries it as
    its factory (driftlab.harness.app.pipeline), never by name."""

    def __init__(self, pipeline: Pipeline) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.name = f"{SETUP_PREFIX}{pipeline.name}"
        # Toxiproxy alone when every service is external: it carries their links.
        self.services = pipeline.services or (TOXIPROXY,)
        # The file's connectors are the user's: a task of theirs that FAILED is the
        # pipeline's outcome (named where its store did not converge), not the lab's.
        self.under_test = ("connect",) if pipeline.connectors else ()
        self.stores = tuple(s.name for s in self.pipeline.stores)
        self.views = tuple(s.name for s in self.pipeline.stores if s.kind == "view")
        self.procs: dict[str, PipelineCommand | PipelineImage] = {}
        self.not_back: list[str] = []  # processes that did not come back after a fault
        self.last_write: dict[str, int] = {}
        self.last_value: dict[str, str | None] = {}  # key -> its last acknowledged value
        self.written: set[tuple[str, str]] = set()  # every ok write, for the log stores
        self.divergences: list[Divergence] = []
        self.observer: Observer | None = None
        self.readers: dict[str, Reader] = {}  # mirror stores
        self.logs: dict[str, Arrivals] = {}  # log stores
        self._opened: list[Reader | Arrivals] = []  # closed at teardown
        self._read_lock = threading.Lock()
        self.connectors: connectors.Registered | None = None
        self.unreadable: dict[str, str] = {}  # store -> why its final reading failed
        self.run_role: str | None = (
            None  # on driftlab's PostgreSQL (driftlab.scenarios.pipeline.run_role)
        )
        self.txns: Transactions | None = None  # the file's transactions, if it has any
        self.writer: SourceWriter | HttpWriter | None = None  # else, how the source is written
        self.keys: set[str] = set()  # every entity key a transaction or the seed touched

    def prepare(self, ctx: SetupContext) -> None:
        """The run's schema and source, its readers and (not started) processes."""
        p = self.pipeline
        check_images(p, ctx.stack)  # first: a setup that fails here has nothing to undo
        self.ctx = ctx
        reach = links.Reach(ctx.stack, p.external)
        self.pg_direct = pg_conninfo(reach.endpoint("postgres"))
        try:
            self._prepare(ctx, reach)
        except BaseException:
            # The runner tears down only a prepared setup: undo the half-made one.
            self.teardown()
            raise

    def _prepare(self, ctx: SetupContext, reach: links.Reach) -> None:
        p = self.pipeline
        ns = ctx.namespace
        redis_ep = reach.endpoint("redis") if "redis" in p.external else None
        checks.check_external(p, self.pg_direct, redis_ep)
        with direct_pg_connect(self.pg_direct) as conn:
            if "postgres" in p.external:  # the user's login: theirs to restrict
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(ns)))
            else:
                dbname = reach.endpoint("postgres").extra["dbname"]
                self.run_role = ns
                login = run_role.create(conn, ns, dbname)
                reach = links.Reach(ctx.stack, p.external, {"postgres": login})
        self.pg_app = pg_conninfo(reach.link(APP, "postgres"))
        pg_owner = pg_conninfo(reach.pipeline_endpoint("postgres"))  # owns what it creates
        ports = {spec.name: free_port() for spec in p.processes}  # kept across restarts
        run = links.run_values(ns, p.source.table, ctx.work_dir, p.folder, ports)
        direct = {**run, **reach.values(None, p.reached)}
        app_values = {**run, **reach.values(APP, p.reached)}
        with direct_pg_connect(pg_owner) as conn:
            if p.source.create is not None:
                conn.execute(links.fill(p.source.create, direct).encode())
            elif p.source.transactional:
                create_tables(pg_owner, ns, p.source.tables)
            elif not p.source.own_sql:
                create_source_table(pg_owner, ns, p.source.table)
        if p.source.transactional:
            create_versions(pg_owner, ns)
            self.txns = Transactions(p.source, p.stores, ns, app_values)
            transactions.check(self.txns, self.pg_app)
            self.source_reader: Reader = ViewsReader(
                self.pg_direct, transactions.views(p.stores, direct), lambda: self.keys
            )
        else:
            self.writer = (
                HttpWriter(p.source.http, p.source.http_delete, app_values)
                if p.source.http is not None
                else SourceWriter(p.source, ns, app_values)
            )
            if isinstance(self.writer, SourceWriter):
                self.writer.check(self.pg_app)
            if p.source.own_sql:
                assert p.source.read is not None
                self.source_reader = SqlReader(self.pg_direct, links.fill(p.source.read, direct))
            else:
                self.source_reader = SourceTableReader(self.pg_direct, ns, p.source.table)
        self._opened.append(self.source_reader)
        for s in p.stores:
            if s.kind == "log":
                self.logs[s.name] = log_reader(s, self.pg_direct, reach, direct)
                self._opened.append(self.logs[s.name])
            else:
                reader = store_reader(s, self.pg_direct, reach, direct)
                if s.kind == "view":
                    reader = ViewStore(reader, s.name, s.compare)
                self.readers[s.name] = reader
                self._opened.append(reader)
        for spec in p.processes:
            self.procs[spec.name] = self._command(
                spec, {**run, **reach.values(spec.name, p.reached)}
            )
            self.procs[spec.name].not_back = self._not_back
        if self.txns is not None and p.source.seed is not None:
            # Before any connector or process: a snapshot, not the stream, must carry it.
            self._seed(ctx, pg_owner, direct)
        if p.connectors:
            # The worker's own links: a fault on connect->postgres cuts the connectors.
            reached = tuple(svc for svc in p.reached if svc != "connect")
            values = {**run, **reach.values("connect", reached)}
            users = p.external.get("connect")  # a worker of the user's, by its REST URL
            self.connectors = connectors.Registered(
                ConnectRest(users.extra["url"]) if users else ctx.stack["connect"]
            )
            self.connectors.put(connectors.for_run(p.connectors, ns, values))

    def _seed(self, ctx: SetupContext, pg_owner: str, values: dict[str, Any]) -> None:
        """The data before the pipeline: `rows` transactions on the workload's keys, or
        the seed script; recorded before the workload starts (docs/history.md)."""
        assert self.txns is not None
        seed = self.pipeline.source.seed
        assert seed is not None
        rec = ctx.recorder
        if seed.sql is not None:
            script = links.fill((self.pipeline.folder / seed.sql).read_text(), values)
            keys_query = links.fill(seed.keys, values) if seed.keys is not None else None
            space = [f"k{i}" for i in range(self.pipeline.workload.keys)]
            done = self.txns.run_script(rec, SEED, pg_owner, script, keys_query, space)
            for key, committed in done.items():
                self.committed(committed, key)
            log.info("seed: %s run, %d keys", seed.sql, len(done))
            return
        rng = ctx.client_rng(SEED)
        choose = KeyChooser(self.pipeline.workload, rng)
        values_ = UniqueValues(SEED)
        conn = AppConnection(self.pg_app)
        failed = 0
        try:
            for _ in range(seed.rows or 0):
                key = choose()
                self.keys.add(key)
                done = self.txns.run(rec, SEED, conn, key, values_.next(), rng)
                self.committed(done, key)
                failed += done.phase != "ok"
        finally:
            conn.close()
        log.info("seed: %d transactions, %d failed", seed.rows, failed)

    def committed(self, done: Committed, key: str) -> None:
        """Note a transaction's outcome: on `ok`, each view's new state of `key` is what
        its store must come to show (the lag moments, the convergence's times)."""
        self.keys.add(key)
        if done.phase != "ok":
            return
        now = time.time_ns()
        for store, state in done.states.items():
            self.last_write[f"{store}/{key}"] = now
            self.last_value[f"{store}/{key}"] = state

    def _command(
        self, spec: ProcessSpec, values: dict[str, Any]
    ) -> PipelineCommand | PipelineImage:
        """The process of `spec`, its templates filled with `values`: a command on this
        machine, or a container of its image (the docker backend only)."""
        env = {k: links.fill(v, values) for k, v in spec.env.items()}
        strings = [*spec.command, *spec.env.values(), spec.ready.http or ""]
        env = {**links.login_env(strings, values), **env}  # the file's own env wins
        ready = Readiness(
            spec.ready.tcp,
            links.fill(spec.ready.http, values) if spec.ready.http else None,
            spec.ready.log,
        )
        argv = [links.fill(a, values) for a in spec.command]
        log_path = self.context.logs / f"{spec.name}.log"
        if spec.image is None:
            return PipelineCommand(
                spec.name,
                argv,
                log_path,
                env={**os.environ, **env},  # a command inherits driftlab's PATH, ...
                cwd=(self.pipeline.folder / spec.cwd).resolve(),
                ready=ready,
                ready_timeout=spec.timeout,
                on_ready=self._ready_moment(spec.name),
            )
        stack = self.context.stack
        assert isinstance(stack, DockerStack)  # prepare refused the image otherwise
        runtime = ImageRuntime(
            stack.client, stack.stack_id, stack.root, spec.image, self.context.namespace
        )
        return PipelineImage(
            spec.name,
            argv,
            log_path,
            env=env,  # the container's whole environment: nothing of this machine's
            ready=ready,
            ready_timeout=spec.timeout,
            on_ready=self._ready_moment(spec.name),
            runtime=runtime,
        )

    def _ready_moment(self, process: str) -> Callable[[str], None]:
        """Reports each ready start of `process` to the run's moments."""
        moments = self.context.moments
        return lambda instance: moments.emit("ready", process)

    def _not_back(self, proc: CommandProcess, error: ServiceError) -> None:
        """A process that did not come back after a fault: the pipeline's finding (the
        run fails with it, `findings`), not a heal the lab failed."""
        line = checks.not_back(proc, error)
        log.warning("%s", line)
        self.not_back.append(line)

    def start(self) -> None:
        """Every process started and ready, then the observer."""
        for spec in self.pipeline.processes:
            proc = self.procs[spec.name]
            try:
                proc.start()
                proc.wait_healthy()
            except ServiceError as exc:
                raise checks.did_not_start(proc, exc) from exc
            log.info("process %s ready (%s)", proc.instance, proc.ready.describe())
        checks.check_readers(self.readers, self.logs)
        self.observer = Observer(
            self.context.recorder,
            self.source_reader,
            self.readers,
            self.pipeline.converge.sample_ms / 1000,
            self.last_write,
            self.logs,
            self.written,
            Lag(self.last_value, self.context.moments, self.views),
            self.views,
        )
        self.observer.start()

    def process(self, name: str) -> CommandProcess | None:
        """The user's process `name`, for crash, pause and restart faults."""
        return self.procs.get(name)

    def client(self, process: str) -> PipelineClient:
        """A client writing the source through the `app->postgres` link."""
        return PipelineClient(self, process)

    def read_store(self, store: str) -> State:
        """One whole reading of `store` (the source included), for a client's read."""
        with self._read_lock:
            if store == SOURCE_STORE:
                return self.source_reader.read_all()
            return self.readers[store].read_all()

    def read_stores(self) -> tuple[str, ...]:
        """The source and the mirror stores (a log store is judged whole, not read)."""
        return (SOURCE_STORE, *self.readers)

    def quiesce(self, timeout: float) -> bool:
        """Wait for every store to equal the source (driftlab.scenarios.pipeline.observer); True
        once every store has drained: converged, or settled without converging (the
        run then fails with `divergences`, and the writes a log store lacks are lost)."""
        if self.observer is None:
            return False
        conv = self.pipeline.converge
        self.divergences = self.observer.converge(timeout, conv.window)
        if self.divergences and self.connectors is not None:
            failed = self.connectors.failed()
            for d in self.divergences:
                d.causes = failed
        return all(d.settled for d in self.divergences)

    def final_states(self) -> dict[str, State]:
        """The source and every mirror store, read directly (a log store has no final
        state per key: its arrivals are its record)."""
        out = {SOURCE_STORE: self.source_reader.read_all()}
        for name, reader in self.readers.items():
            try:
                out[name] = reader.read_all()
            except Exception as exc:  # the run proves nothing of it (`findings`)
                log.warning("store %s could not be read at the final reading: %s", name, exc)
                self.unreadable[name] = checks.one_line(exc)
        return out

    def findings(self) -> Findings:
        """The stores that did not converge, the processes that did not come back and
        the stores the final reading could not read: the verdict weighs each."""
        return Findings(
            not_converged=[
                NotConverged(
                    store=d.store,
                    keys=d.keys[:KEYS_KEPT],
                    count=len(d.keys),
                    settled=d.settled,
                    since_s=d.since_s,
                    never_held=d.never_held,
                    line=d.line(),
                )
                for d in self.divergences
            ],
            not_back=list(self.not_back),
            unreadable=dict(self.unreadable),
        )

    def teardown(self) -> None:
        """Stop the observer and the processes; drop the run's replication slots."""
        if self.observer is not None:
            self.observer.stop()
        for proc in self.procs.values():
            with contextlib.suppress(Exception):
                proc.stop()
        if self.connectors is not None:
            self.connectors.remove()
        if self.run_role is not None:  # first: it ends the sessions holding slots
            try:
                with direct_pg_connect(self.pg_direct) as conn:
                    run_role.drop(conn, self.run_role)
            except Exception as exc:
                log.warning("dropping the role %s failed: %s", self.run_role, exc)
        if self.ctx is not None:
            self._drop_slots(self.ctx.namespace)
        for reader in self._opened:
            with contextlib.suppress(Exception):
                reader.close()

    def _drop_slots(self, namespace: str, timeout: float = 30.0) -> None:
        """A replication slot whose name holds the namespace keeps WAL on a shared
        PostgreSQL for good: drop it once nothing uses it (a deleted connector's task
        lets go of its slot a moment later), and the publications named so."""
        like = f"%{namespace}%"
        try:
            with direct_pg_connect(self.pg_direct) as conn:
                if not drop_replication_slots(conn, like, like=True, timeout=timeout):
                    log.warning("a replication slot of %s is still in use", namespace)
                pubs = conn.execute(
                    "SELECT pubname FROM pg_publication WHERE pubname LIKE %s", (like,)
                ).fetchall()
                for (pub,) in pubs:
                    conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(pub)))
        except Exception as exc:
            log.warning("dropping the replication slots of %s failed: %s", namespace, exc)


def image_refusal(spec: ProcessSpec) -> PipelineError:
    """The error for an `image` process where no docker backend runs it."""
    return PipelineError(
        f"processes.{spec.name}: runs the image {spec.image}, which needs the docker "
        "backend; add --backend docker (or run it as a command on this machine)"
    )


def check_images(pipeline: Pipeline, stack: object) -> None:
    """PipelineError (bad input) for an `image` process `stack` cannot run: not a
    docker stack, or an image its engine does not have."""
    for spec in pipeline.processes:
        if spec.image is None:
            continue
        if not isinstance(stack, DockerStack):
            raise image_refusal(spec)
        if not has_image(stack.client, spec.image):
            raise PipelineError(
                f"processes.{spec.name}: the image {spec.image} is not on this machine's "
                f"Docker engine (driftlab pulls none); build or load it first: "
                f"docker build -t {spec.image} ..."
            )


def refuse_images(pipeline: Pipeline, backend: str) -> None:
    """PipelineError (bad input) when `pipeline` has an `image` process and `backend`
    is not docker, before any stack starts."""
    if backend != "docker":
        for spec in pipeline.processes:
            if spec.image is not None:
                raise image_refusal(spec)
