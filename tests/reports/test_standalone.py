"""One job on a real Spark standalone cluster: a master and a worker started from the pyspark distribution.

The master and the worker are ``bin/spark-class`` JVMs on free loopback ports (one core, 512 MB), torn down
in a ``finally``.  The driver is a subprocess (this session's local SparkContext is the only one a process
may have): it ingests the committed reference runs with ``--master spark://127.0.0.1:PORT`` (the evidence
files are parsed by the worker's Python) and computes the conformance matrix.  The master's JSON status
then shows the application as completed, so the job did run on the cluster.  Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is installed only in the `reports` tox env")

from .conftest import EVIDENCE

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
START_DEADLINE_S = 90.0
JOB_DEADLINE_S = 240.0

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java on PATH or JAVA_HOME: a standalone master needs a JVM", allow_module_level=True)
if not SPARK_CLASS.is_file():
    pytest.skip(f"pyspark's distribution has no bin/spark-class ({SPARK_CLASS})", allow_module_level=True)

DRIVER = """
import json, sys
from pathlib import Path
from cck.reports import conformance_matrix, extract, load_schema, spark_session
master, evidence = sys.argv[1], Path(sys.argv[2])
spark = spark_session(master, {"spark.executor.memory": "512m", "spark.cores.max": "1",
                               "spark.driver.host": "127.0.0.1", "spark.sql.shuffle.partitions": "2"},
                      app_name="cck-standalone-test")
try:
    extracted = extract(spark, evidence, load_schema())
    matrix = conformance_matrix(extracted.tables["case"], extracted.runs).collect()
    print(json.dumps({"app_id": spark.sparkContext.applicationId, "master": spark.sparkContext.master,
                      "rows": [[r["target"], r["case_id"], r["latest_verdict"], r["runs"]] for r in matrix]}))
finally:
    spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1"}


def _status(ui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
            status: dict[str, Any] = json.load(response)
            return status
    except (OSError, urllib.error.URLError, ValueError):
        return None


def _log_tail(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-3000:] if path.exists() else ""


def _wait_for(what: str, ready: Any, processes: list[tuple[subprocess.Popen[bytes], Path]]) -> dict[str, Any]:
    """Poll ``ready()`` until it gives a status, a process dies, or the deadline passes."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        status = ready()
        if status is not None:
            result: dict[str, Any] = status
            return result
        for process, log in processes:
            try:  # the pause between polls, and a check the JVM is still alive
                code = process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"{what}: a JVM exited with {code} while starting:\n{_log_tail(log)}")
    pytest.fail(f"{what}: not ready within {START_DEADLINE_S} s:\n" + "\n".join(_log_tail(log) for _, log in processes))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)  # the group this test started (the JVM and any child)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A running master and one registered worker: (master URL, master web UI port)."""
    port, ui_port, worker_ui = _free_port(), _free_port(), _free_port()
    started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def launch(name: str, *argv: str) -> None:
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen([str(SPARK_CLASS), *argv], stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=_env(), cwd=tmp_path, start_new_session=True)
        started.append((process, log))

    try:
        launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui_port))
        _wait_for("master", lambda: _status(ui_port), started)
        url = f"spark://127.0.0.1:{port}"
        launch("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port",
               str(worker_ui), "--cores", "1", "--memory", "1g", "--work-dir", str(tmp_path / "work"), url)

        def worker_alive() -> dict[str, Any] | None:
            status = _status(ui_port)
            return status if status and status.get("aliveworkers", 0) >= 1 else None

        _wait_for("worker registration", worker_alive, started)
        yield url, ui_port
    finally:
        for process, _ in reversed(started):
            _stop(process)


def test_matrix_job_runs_on_a_standalone_master(cluster: tuple[str, int], tmp_path: Path) -> None:
    url, ui_port = cluster
    try:
        done = subprocess.run([sys.executable, "-c", DRIVER, url, str(EVIDENCE)], capture_output=True, text=True,
                              env=_env(), cwd=tmp_path, timeout=JOB_DEADLINE_S, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the job did not finish within {JOB_DEADLINE_S} s: {exc.stderr!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["master"] == url
    rows = result["rows"]
    assert rows
    assert {target for target, *_ in rows} == {"reference"}
    assert all(runs >= 1 for *_, runs in rows)
    status = _status(ui_port)
    assert status is not None
    completed = [app["id"] for app in status.get("completedapps", [])]
    assert result["app_id"] in completed, status
