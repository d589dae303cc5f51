"""The keyed pass in Spark: one aggregation job for the Facts, one shuffle for the rest.

1. `gather_facts`: one job tags each event with the fact it contributes
   (checkers.keyed.facts.tag_of), keeps the distinct tags with the clock's span, and
   brings those few rows (consumers x channels, stores, headers) to the driver.
2. `keyed_pass`: every event is copied to each group that judges it
   (checkers.keyed.step.routes), the copies are repartitioned once by group, and each
   partition runs every check of its groups in one Python step over its Arrow batches
   (mapInArrow). Out come the anomaly rows with their evidence, the notes' counts and
   the lag samples (OUTPUT_DDL): nothing that grows with the history reaches the driver.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.keyed.facts import (
    DELIVER,
    DONE,
    EFFECT,
    HEADER,
    OTHER,
    QUIESCED,
    STATE,
    Facts,
    facts_from_rows,
    header_from_json,
)
from checkers.keyed.step import (
    GROUP_COLUMN,
    KEY,
    MESSAGE,
    OUTPUT_DDL,
    PARTITION,
    POSITION_COLUMN,
    ROUTE_COLUMN,
    partition_step,
)
from checkers.reference.common import WRITE_FS
from harness.history.schema import COLUMNS, SOURCE_STORE, EventType, Mark, MsgAction, OpPhase

ROWS_PER_PARTITION = 400_000
"""Routed rows per partition of the pass: enough that a small history is one or two
tasks (each task costs a Python worker round trip), few enough that a partition's
Arrow table and events fit a worker's memory whatever the history's size."""


def _msg() -> Column:
    return F.col("type") == EventType.MSG


def is_effect() -> Column:
    """checkers.reference.common.is_effect as a column."""
    derived = F.col("store").isNotNull() & (F.col("store") != SOURCE_STORE)
    applied = _msg() & (F.col("action") == MsgAction.APPLY)
    written = (
        (F.col("type") == EventType.OP)
        & (F.col("phase") == OpPhase.OK)
        & F.col("f").isin(*WRITE_FS)
    )
    return derived & (applied | written)


def _tag() -> Column:
    """checkers.keyed.facts.tag_of as a column."""
    mark = F.col("type") == EventType.MARK
    consumer = F.col("consumer").isNotNull()
    return (
        F.when(
            _msg()
            & (F.col("action") == MsgAction.DELIVER)
            & consumer
            & F.col("channel").isNotNull(),
            DELIVER,
        )
        .when(mark & (F.col("kind") == Mark.CONSUMER_DONE) & consumer, DONE)
        .when(mark & (F.col("kind") == Mark.QUIESCED), QUIESCED)
        .when((F.col("type") == EventType.STATE) & F.col("store").isNotNull(), STATE)
        .when(F.col("type") == EventType.HEADER, HEADER)
        .when(F.col("key").isNotNull() & is_effect(), EFFECT)
        .otherwise(OTHER)
    )


def gather_facts(events: DataFrame) -> Facts:
    """The history's Facts, in one job whose result is a few rows."""
    tag = F.col("tag")
    rows = (
        events.select(
            _tag().alias("tag"),
            "time",
            "consumer",
            "channel",
            "store",
            F.when(F.col("type") == EventType.HEADER, F.to_json(F.struct(*COLUMNS))).alias("h"),
        )
        .groupBy(
            "tag",
            F.when(tag.isin(DELIVER, DONE), F.col("consumer")).alias("a"),
            F.when(tag.isin(DELIVER, DONE), F.col("channel"))
            .when(tag.isin(EFFECT, STATE), F.col("store"))
            .alias("b"),
            "h",
        )
        .agg(F.min("time").alias("t0"), F.max("time").alias("t1"))
        .collect()
    )
    t0 = min((r["t0"] for r in rows if r["t0"] is not None), default=0)
    t1 = max((r["t1"] for r in rows if r["t1"] is not None), default=0)
    headers = [header_from_json(r["h"]) for r in rows if r["h"] is not None]
    return facts_from_rows(((r["tag"], r["a"], r["b"]) for r in rows), headers, t0, t1)


def routed(events: DataFrame) -> DataFrame:
    """Every event once per group that judges it, with its route, group and position in
    the history (checkers.keyed.step.routes)."""
    msg_action = _msg() & F.col("action").isin(MsgAction.PRODUCE, MsgAction.DELIVER)
    partition = F.concat(
        F.col("channel"), F.lit("\x00"), F.coalesce(F.col("partition").cast("string"), F.lit(""))
    )
    candidates = F.array(
        F.when(
            F.col("key").isNotNull()
            & F.col("type").isin(EventType.OP, EventType.MSG, EventType.STATE),
            F.struct(F.lit(KEY).alias("r"), F.col("key").alias("g")),
        ),
        F.when(
            msg_action & F.col("channel").isNotNull(),
            F.struct(F.lit(PARTITION).alias("r"), partition.alias("g")),
        ),
        F.when(
            _msg()
            & F.col("action").isin(MsgAction.PRODUCE, MsgAction.DELIVER, MsgAction.APPLY)
            & F.col("msg_id").isNotNull(),
            F.struct(F.lit(MESSAGE).alias("r"), F.col("msg_id").alias("g")),
        ),
    )
    # The position numbers rows by split and place: increasing in the file's order, which
    # is the order the reference checkers read a history in.
    numbered = events.select(*COLUMNS, F.monotonically_increasing_id().alias(POSITION_COLUMN))
    with_routes = numbered.select(
        *COLUMNS,
        POSITION_COLUMN,
        F.explode(F.filter(candidates, lambda x: x.isNotNull())).alias("_route"),
    )
    return with_routes.select(
        *COLUMNS,
        POSITION_COLUMN,
        F.col("_route.r").alias(ROUTE_COLUMN),
        F.col("_route.g").alias(GROUP_COLUMN),
    )


def keyed_pass(events: DataFrame, facts: Facts, rows: int, per_kind: int = 5) -> DataFrame:
    """The pass's rows (checkers.keyed.step.OUTPUT_DDL) for a history of `rows` events,
    with up to `per_kind` example candidates of each kind per partition: lazily, so that
    the caller's one action (a write) runs it once."""
    cores = events.sparkSession.sparkContext.defaultParallelism
    parts = max(cores, -(-2 * rows // ROWS_PER_PARTITION))
    return (
        routed(events)
        .repartition(parts, ROUTE_COLUMN, GROUP_COLUMN)
        .mapInArrow(partition_step(facts, per_kind), OUTPUT_DDL)
    )
