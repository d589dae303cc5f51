"""An HTTP GET as a derived store: the dual-writing web application of
examples/http_dual_write answers `GET /items` with what its cache holds, and driftlab
reads the cache through it instead of from Redis. The correct application passes with
its versions judged (stale-overwrite); the planted bugs are caught through the GET."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_support import caught, passed_analysis, run_text

from driftlab.harness.app.pipeline import PipelineResult
from driftlab.harness.lab.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

HTTP_APP = Path(__file__).resolve().parents[1] / "examples" / "http_dual_write"
THROUGH_HTTP = """kind = "mirror"

[stores.cache.http]
url = "{shop.url}/items"
value_field = "value"
version_field = "version"
"""


def run(tmp_path: Path, stack: Stack, example: str, expect: str) -> PipelineResult:
    text = (HTTP_APP / example).read_text()
    redis_store = 'kind = "mirror"\nredis = { pattern = "{namespace}:*", field = "value", '
    redis_store += 'version_field = "version" }\n'
    assert redis_store in text
    text = text.replace(redis_store, THROUGH_HTTP)
    # The application runs from its own folder; the file is written elsewhere.
    text = text.replace("[processes.shop]\n", f'[processes.shop]\ncwd = "{HTTP_APP}"\n')
    text = text.split("[expect]")[0] + f"[expect]\n{expect}\n"
    return run_text(tmp_path, stack, text, example, seed=4)


def test_a_cache_read_through_the_apps_get_passes(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    absent = '["missing", "stale", "phantom", "extra", "stale-overwrite"]'
    out = run(tmp_path, stack, "pipeline.toml", f"absent = {absent}")
    analysis = passed_analysis(out)
    assert analysis["coverage"]["stale-overwrite"] > 0  # the GET's versions were seen
    assert analysis["lag"]["cache"]["count"] > 0


def test_the_planted_bugs_are_caught_through_the_get(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    out = run(tmp_path, stack, "pipeline-bug.toml", 'absent = ["missing", "stale"]')
    rows = caught(out)
    keys = {row["key"] for row in rows if row["kind"] in ("stale", "missing")}
    assert keys and all(row["store"] == "cache" for row in rows if row["key"] in keys)
    (div,) = out.not_converged
    assert div.store == "cache" and set(div.keys) == keys
