"""Small histories become DataFrames with the history schema."""

import pytest

from checkers.frames import events_to_df, history_schema
from harness.history.schema import COLUMNS, Event


@pytest.mark.spark
def test_events_round_trip_through_spark(spark) -> None:
    events = [
        Event(
            type="op",
            time=1,
            process="c1",
            phase="ok",
            f="write",
            key="k",
            value="a",
            version=3,
            store="source",
        ),
        Event(
            type="msg",
            time=2,
            action="deliver",
            channel="t",
            partition=0,
            offset=7,
            msg_id="m1",
            consumer="g",
        ),
    ]
    df = events_to_df(spark, events)
    assert tuple(df.columns) == COLUMNS
    assert df.schema == history_schema()
    rows = sorted(df.collect(), key=lambda r: r.time)
    assert rows[0].version == 3 and rows[0].partition is None
    assert rows[1].offset == 7 and rows[1].msg_id == "m1"
