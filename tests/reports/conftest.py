"""Fixtures of the report pipeline's tests: one local SparkSession for the whole session, table builders.

pyspark is installed only in the ``reports`` tox env (``.[dev,reports]``); elsewhere every module here
skips (``pytest.importorskip`` at its top) and this file imports no pyspark, so that ``pytest tests`` and
``pytest tests/reports`` alike report the skip instead of an import error.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cck.reports._pipeline import ReportResult
    from cck.reports._schema import EvidenceSchema


DATA = Path(__file__).resolve().parent / "data"
#: Two real runs of the reference target (a handful of cases each), made by `cck run`.
EVIDENCE = DATA / "evidence"

Table = Callable[..., "DataFrame"]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from cck.reports._spark import spark_session

    session = spark_session(conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
                            app_name="cck-reports-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema() -> EvidenceSchema:
    from cck.reports._schema import load_schema

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


@dataclass(frozen=True)
class SiteBuild:
    """The report of the committed evidence, built once for the site and browser tests."""

    out: Path
    result: ReportResult
    #: Why the allure HTML report was not built (None: it was).
    allure_problem: str | None


@pytest.fixture(scope="session")
def committed_site(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> SiteBuild:
    """``build_report`` over :data:`EVIDENCE`, with the allure HTML report where Node.js and npm are (the pinned
    allure is installed first if it is not: about 15 s)."""
    from cck.reports import ReportError, build_report
    from cck.reports._allure_html import install_allure

    problem: str | None = None
    if shutil.which("node") is None or shutil.which("npm") is None:
        problem = "no Node.js/npm on PATH: the allure HTML report cannot be built"
    else:
        try:
            install_allure()
        except ReportError as exc:
            problem = f"the pinned allure could not be installed: {exc}"
    out = tmp_path_factory.mktemp("site")
    result = build_report(spark, EVIDENCE, out, allure="auto" if problem else "require")
    return SiteBuild(out, result, problem)
