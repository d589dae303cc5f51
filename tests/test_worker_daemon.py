"""The analysis's Spark workers import pyspark from the environment, with Spark's zips
and jar off their import path (driftlab.checkers.worker_daemon): a zip importer there re-read
its archive before every task; and they allocate Arrow buffers with the C library."""

from __future__ import annotations

import sys

import pytest

from driftlab.checkers.worker_daemon import drop_spark_archives


@pytest.mark.spark
def test_a_worker_has_no_spark_archive_on_its_path(spark) -> None:
    # Defined here, so that it goes to the worker by value: the worker cannot import
    # this test module.
    def _worker_view(_: object) -> tuple[str, list[str], list[str]]:
        import sys as worker_sys

        import pyspark

        cached = [
            p
            for p, f in worker_sys.path_importer_cache.items()
            if type(f).__name__ == "zipimporter"
        ]
        return pyspark.__file__, list(worker_sys.path), cached

    where, path, zip_importers = (
        spark.sparkContext.parallelize([0], 1).map(_worker_view).collect()[0]
    )
    assert ".zip" not in where, where
    assert not [p for p in path if p.endswith((".jar", ".zip")) and "pyspark" in p], path
    assert not [p for p in zip_importers if "pyspark" in p], zip_importers


def test_the_archives_stay_when_pyspark_is_only_in_them(monkeypatch, tmp_path) -> None:
    archive = str(tmp_path / "spark" / "python" / "lib" / "pyspark.zip")
    monkeypatch.setattr(sys, "path", [archive, str(tmp_path / "empty")])
    assert drop_spark_archives() == []
    assert sys.path[0] == archive


def test_the_archives_go_when_pyspark_is_installed(monkeypatch, tmp_path) -> None:
    import pyspark

    site = str(__import__("pathlib").Path(pyspark.__file__).parent.parent)
    jar = str(tmp_path / "jars" / "spark-core.jar")
    archive = str(tmp_path / "spark" / "python" / "lib" / "py4j-src.zip")
    monkeypatch.setattr(sys, "path", [archive, jar, site])
    monkeypatch.setitem(sys.path_importer_cache, archive + "/py4j", None)
    assert drop_spark_archives() == [archive, jar]
    assert sys.path == [site]
    assert archive + "/py4j" not in sys.path_importer_cache


@pytest.mark.spark
def test_a_worker_allocates_arrow_buffers_with_the_system_allocator(spark) -> None:
    def _pool(_: object) -> str:
        import pyarrow

        return pyarrow.default_memory_pool().backend_name

    assert spark.sparkContext.parallelize([0], 1).map(_pool).collect() == ["system"]
