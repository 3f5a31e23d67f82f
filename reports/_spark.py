"""The Spark session the jobs run in: local mode by default, any master URL on request."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

__all__ = ["LOCAL_MASTER", "LOCAL_CONF", "spark_session"]

#: The embedded default: every core of this machine, in this process's JVM.
LOCAL_MASTER = "local[*]"

#: Settings for local mode: small shuffles (evidence of a few runs is megabytes, not terabytes), no UI.
LOCAL_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
}

#: Settings for every master: UTC (evidence timestamps are UTC), partition columns read as strings (a
#: run ID of digits stays text), and no console progress bar (the CLI prints its own progress).
COMMON_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


#: Spark's JVM logs errors only (its INFO/WARN lines would drown the CLI's progress).
LOG4J_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"


def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None,
                  app_name: str = "cck-reports") -> SparkSession:
    """A session on ``master`` (default :data:`LOCAL_MASTER` with :data:`LOCAL_CONF`); ``conf`` wins over both."""
    builder = SparkSession.builder.appName(app_name).master(master or LOCAL_MASTER)
    quiet = {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"}
    settings = {**COMMON_CONF, **quiet, **(LOCAL_CONF if master is None else {}), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
