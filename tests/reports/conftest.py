"""Fixtures of the report pipeline's tests: one local SparkSession for the whole session, table builders.

pyspark is installed only in the ``reports`` tox env (``.[dev,reports]``); elsewhere every module here
skips (``pytest.importorskip`` at its top) and this file imports no pyspark, so that ``pytest tests`` and
``pytest tests/reports`` alike report the skip instead of an import error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from reports._schema import EvidenceSchema


DATA = Path(__file__).resolve().parent / "data"
#: Two real runs of the reference target (a handful of cases each), made by `python -m conformance run`.
EVIDENCE = DATA / "evidence"

Table = Callable[..., "DataFrame"]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from reports._spark import spark_session

    session = spark_session(conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
                            app_name="cck-reports-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema() -> EvidenceSchema:
    from reports._schema import load_schema

    return load_schema()


def ts(minute: int, second: int = 0) -> datetime:
    """A timestamp on one fixed day (tests only need their order)."""
    return datetime(2025, 1, 31, 12, minute, second, tzinfo=UTC)


_DEFAULTS: Mapping[str, Any] = {"schema_version": 1, "target": "reference"}


@pytest.fixture(scope="session")
def table(spark: SparkSession, schema: EvidenceSchema) -> Table:
    """``table(kind, {field: value}, ...)``: a DataFrame of ``kind``'s stored schema; absent fields are null.

    Every column is nullable, as in the tables read back from Parquet that the jobs get."""

    from pyspark.sql.types import StructField, StructType

    def build(kind: str, *rows: Mapping[str, Any]) -> DataFrame:
        struct = StructType([StructField(f.name, f.dataType, True) for f in schema.struct(kind).fields])
        values = [tuple({"kind": kind, **_DEFAULTS, **row}.get(name) for name in struct.fieldNames()) for row in rows]
        return spark.createDataFrame(values, struct)

    return build
