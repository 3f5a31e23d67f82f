"""The delivery audit at scale: Spark local mode (``reports.delivery_audit``) vs the same audit as one DuckDB query.

For each size: the seeded generator (``reports/_synth.py``) writes synthetic evidence as JSON Lines, DuckDB
converts it once to Parquet partitioned by run and target (the pipeline's ``data/<kind>/run_id=/target=/``
layout), then both engines run the whole audit over that Parquet: Spark through ``read_tables`` +
``delivery_audit`` + ``collect()``, DuckDB through :data:`AUDIT_SQL` + ``fetchall()``.  Only the audit is
timed (Parquet read included, generation, conversion and the Spark session's start-up excluded); the two
results are asserted equal, row for row, and equal to what the generator planted.

    python benchmarks/audit_bench.py --events 1000000 10000000 30000000 --json audit.json

See docs/benchmarks.md ("Delivery audit: Spark local vs DuckDB").  Needs pyspark (Java 17+) and duckdb.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/audit_bench.py`: the checkout's packages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cck.reports._synth import PLANTED, TARGET, Rates, write_evidence

_HISTORY = "run_id, target, case_id, label"
_H = ("run_id", "target", "case_id", "label")

#: The audit columns, in ``delivery_audit``'s order.
COLUMNS = ("run_id", "target", "case_id", "label", "ops", "sends", "confirmed", "failed", "indeterminate",
           "receipts", "received_keys", "acks_confirmed", "recovered", "unreceived_undrained", "lost",
           "unexpected", "duplicated", "ack_lost", "order_violation", "redelivery_mismatch",
           "final_drain_complete", "duplicates_allowed", "ok", "oracle_ok")


def _on(left: str, right: str, *more: str) -> str:
    return " AND ".join(f"{left}.{c} = {right}.{c}" for c in (*_H, *more))


#: ``reports/_audit.py``'s ``delivery_audit`` as one DuckDB query over views ``history`` and ``history_result``
#: (the same definitions, step for step: see that module's docstring).
AUDIT_SQL = f"""
WITH ops AS (
  SELECT run_id, target, case_id, coalesce(label, '') AS label, "index", process, type, f, value, producer, seq,
         redelivered, delivery_count,
         CASE WHEN f IN ('send', 'ack') AND type <> 'invoke' AND value IS NULL
              THEN last(CASE WHEN type = 'invoke' THEN value END IGNORE NULLS) OVER (
                   PARTITION BY run_id, target, case_id, coalesce(label, ''), process, f ORDER BY "index"
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              ELSE value END AS key
  FROM history
),
drains AS (
  SELECT run_id, target, case_id, coalesce(label, '') AS label,
         any_value(CAST(json_extract_string(result, '$.final_drain_complete') AS BOOLEAN)) AS final_drain_complete,
         any_value(CAST(json_extract_string(result, '$.duplicates_allowed') AS BOOLEAN)) AS duplicates_allowed,
         any_value(ok) AS oracle_ok
  FROM history_result GROUP BY ALL
),
sends_g AS (
  SELECT {_HISTORY}, key,
         sum(CASE WHEN type = 'invoke' THEN 1 ELSE 0 END) AS invokes,
         sum(CASE WHEN type = 'invoke' THEN 0 ELSE 1 END) AS completions,
         coalesce(max(CASE type WHEN 'ok' THEN 2 WHEN 'info' THEN 1 WHEN 'fail' THEN 0 END), 0) AS rnk,
         min(CASE WHEN type = 'invoke' THEN "index" END) AS invoke_index,
         arg_min({{'producer': producer, 'seq': seq}}, CASE WHEN type = 'invoke' THEN "index" END) AS inv,
         min(CASE WHEN type = 'ok' THEN "index" END) AS confirm_index,
         arg_min({{'process': process}}, CASE WHEN type = 'ok' THEN "index" END) AS conf
  FROM ops WHERE f = 'send' AND key IS NOT NULL GROUP BY ALL
),
sends AS (
  SELECT {_HISTORY}, key,
         CASE WHEN rnk = 2 THEN 'confirmed' WHEN rnk = 1 OR invokes - completions > 0 THEN 'indeterminate'
              ELSE 'failed' END AS outcome,
         invoke_index, inv.producer AS send_producer, inv.seq AS send_seq, confirm_index,
         conf.process AS confirm_process
  FROM sends_g WHERE invokes > 0
),
acks AS (
  SELECT {_HISTORY}, key, min("index") AS ack_index
  FROM ops WHERE f = 'ack' AND type = 'ok' AND key IS NOT NULL GROUP BY ALL
),
rc0 AS (
  SELECT *,
         row_number() OVER (PARTITION BY {_HISTORY}, key ORDER BY "index") = 1 AS first,
         coalesce(max(coalesce(delivery_count, 0)) OVER (PARTITION BY {_HISTORY}, key ORDER BY "index"
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS previous
  FROM ops WHERE f = 'receive' AND type = 'ok' AND key IS NOT NULL
),
rc1 AS (
  SELECT r.*, a.ack_index, s.invoke_index, s.send_producer, s.send_seq,
         coalesce(r.redelivered, false) AS flag,
         (a.ack_index IS NOT NULL AND a.ack_index < r."index") AS after_ack,
         (coalesce(r.redelivered, false)
          OR (r.delivery_count IS NOT NULL AND r.delivery_count > greatest(r.previous, 1))) AS redelivery
  FROM rc0 r
  LEFT JOIN acks a ON {_on("r", "a", "key")}
  LEFT JOIN sends s ON {_on("r", "s", "key")}
),
rc2 AS (
  SELECT *,
         CASE WHEN first THEN NULL WHEN after_ack THEN 'after_ack' WHEN NOT redelivery THEN 'not_redelivered'
              END AS duplicate,
         CASE WHEN first THEN (CASE WHEN delivery_count IS NOT NULL AND delivery_count <> 1
                                    THEN 'first_delivery_count'
                                    WHEN flag THEN 'first_flagged_redelivered' END)
              WHEN after_ack OR NOT redelivery THEN NULL
              WHEN delivery_count IS NOT NULL AND delivery_count < 2 THEN 'flag_without_count'
              WHEN delivery_count IS NOT NULL AND delivery_count <= previous THEN 'count_not_increased'
              WHEN redelivered = false AND delivery_count IS NOT NULL THEN 'count_without_flag' END AS mismatch,
         CASE WHEN first AND NOT (flag OR (delivery_count IS NOT NULL AND delivery_count > 1))
              THEN coalesce(producer, CASE WHEN invoke_index IS NOT NULL AND invoke_index < "index"
                                           THEN send_producer END) END AS o_producer,
         CASE WHEN first AND NOT (flag OR (delivery_count IS NOT NULL AND delivery_count > 1))
              THEN coalesce(seq, CASE WHEN invoke_index IS NOT NULL AND invoke_index < "index"
                                      THEN send_seq END) END AS o_seq
  FROM rc1
),
receipts AS (
  SELECT *,
         (o_producer IS NOT NULL AND o_seq IS NOT NULL)
         AND coalesce(o_seq <= max(CASE WHEN o_producer IS NOT NULL AND o_seq IS NOT NULL THEN o_seq END) OVER (
                 PARTITION BY {_HISTORY}, process, o_producer ORDER BY "index"
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS order_violation
  FROM rc2
),
received AS (
  SELECT {_HISTORY}, key, "index" AS receipt_index FROM receipts WHERE first
),
keyed AS (
  SELECT coalesce(s.run_id, r.run_id) AS run_id, coalesce(s.target, r.target) AS target,
         coalesce(s.case_id, r.case_id) AS case_id, coalesce(s.label, r.label) AS label,
         s.outcome, r.receipt_index
  FROM sends s FULL OUTER JOIN received r ON {_on("s", "r", "key")}
),
keyed_counts AS (
  SELECT k.run_id, k.target, k.case_id, k.label,
         count(*) FILTER (WHERE k.outcome = 'confirmed' AND k.receipt_index IS NULL
                          AND coalesce(d.final_drain_complete, true)) AS lost,
         count(*) FILTER (WHERE k.receipt_index IS NOT NULL
                          AND (k.outcome IS NULL OR k.outcome = 'failed')) AS unexpected
  FROM keyed k LEFT JOIN drains d ON {_on("k", "d")}
  GROUP BY ALL
),
receipt_counts AS (
  SELECT {_HISTORY},
         count(*) FILTER (WHERE duplicate IS NOT NULL) AS duplicated,
         count(*) FILTER (WHERE duplicate = 'after_ack') AS ack_lost,
         count(*) FILTER (WHERE order_violation) AS order_violation,
         count(*) FILTER (WHERE mismatch IS NOT NULL) AS redelivery_mismatch
  FROM receipts GROUP BY ALL
),
op_counts AS (
  SELECT {_HISTORY}, count(*) AS ops,
         count(*) FILTER (WHERE f = 'receive' AND type = 'ok' AND key IS NOT NULL) AS receipts,
         count(DISTINCT CASE WHEN f = 'receive' AND type = 'ok' THEN key END) AS received_keys,
         count(*) FILTER (WHERE f = 'ack' AND type = 'ok' AND key IS NOT NULL) AS acks_confirmed
  FROM ops GROUP BY ALL
),
send_counts AS (
  SELECT s.run_id, s.target, s.case_id, s.label, count(*) AS sends,
         count(*) FILTER (WHERE outcome = 'confirmed') AS confirmed,
         count(*) FILTER (WHERE outcome = 'failed') AS failed,
         count(*) FILTER (WHERE outcome = 'indeterminate') AS indeterminate,
         count(*) FILTER (WHERE outcome = 'indeterminate' AND r.receipt_index IS NOT NULL) AS recovered,
         count(*) FILTER (WHERE outcome = 'confirmed' AND r.receipt_index IS NULL
                          AND NOT coalesce(d.final_drain_complete, true)) AS unreceived_undrained
  FROM sends s LEFT JOIN received r ON {_on("s", "r", "key")} LEFT JOIN drains d ON {_on("s", "d")}
  GROUP BY ALL
),
audit AS (
  SELECT o.run_id, o.target, o.case_id, o.label, o.ops,
         coalesce(sc.sends, 0) AS sends, coalesce(sc.confirmed, 0) AS confirmed, coalesce(sc.failed, 0) AS failed,
         coalesce(sc.indeterminate, 0) AS indeterminate, o.receipts, o.received_keys, o.acks_confirmed,
         coalesce(sc.recovered, 0) AS recovered, coalesce(sc.unreceived_undrained, 0) AS unreceived_undrained,
         coalesce(kc.lost, 0) AS lost, coalesce(kc.unexpected, 0) AS unexpected,
         coalesce(rc.duplicated, 0) AS duplicated, coalesce(rc.ack_lost, 0) AS ack_lost,
         coalesce(rc.order_violation, 0) AS order_violation, coalesce(rc.redelivery_mismatch, 0)
         AS redelivery_mismatch,
         coalesce(d.final_drain_complete, true) AS final_drain_complete,
         coalesce(d.duplicates_allowed, false) AS duplicates_allowed, d.oracle_ok
  FROM op_counts o
  LEFT JOIN send_counts sc ON {_on("o", "sc")}
  LEFT JOIN keyed_counts kc ON {_on("o", "kc")}
  LEFT JOIN receipt_counts rc ON {_on("o", "rc")}
  LEFT JOIN drains d ON {_on("o", "d")}
)
SELECT {", ".join(COLUMNS[:-2])},
       NOT (lost > 0 OR unexpected > 0 OR ack_lost > 0 OR order_violation > 0 OR redelivery_mismatch > 0
            OR (duplicated > 0 AND NOT duplicates_allowed)) AS ok,
       oracle_ok
FROM audit
"""

_DUCK_TYPES = {"string": "VARCHAR", "int": "INTEGER", "long": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN",
               "timestamp": "VARCHAR", "json": "JSON"}


def to_parquet(evidence: Path, data: Path, threads: int) -> None:
    """The evidence's HISTORY and HISTORY_RESULT rows as Parquet in the pipeline's layout (once per size)."""
    import duckdb

    from cck.reports import load_schema

    schema = load_schema()
    data.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(config={"threads": threads})
    try:
        for kind in ("history", "history_result"):
            fields = schema.records[kind]
            columns = "{" + ", ".join(f"'{f.name}': '{_DUCK_TYPES[f.type]}'" for f in fields) + "}"
            select = ", ".join(f"CAST({f.name} AS VARCHAR) AS {f.name}" if f.type == "json" else f'"{f.name}"'
                               for f in fields)
            source = (evidence / "*" / schema.files[kind]).as_posix()
            con.execute(
                f"COPY (SELECT {select}, '{TARGET}' AS target FROM read_json('{source}', "
                f"format = 'newline_delimited', columns = {columns})) "
                f"TO '{(data / kind).as_posix()}' (FORMAT parquet, PARTITION_BY (run_id, target))")
    finally:
        con.close()


def duckdb_audit(data: Path, threads: int) -> tuple[float, list[tuple[Any, ...]]]:
    """Seconds and rows of :data:`AUDIT_SQL` over the Parquet under ``data`` (a fresh connection)."""
    import duckdb

    con = duckdb.connect(config={"threads": threads})
    try:
        for kind in ("history", "history_result"):
            glob = (data / kind / "*" / "*" / "*.parquet").as_posix()
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true, "
                        "hive_types_autocast = false)")
        started = time.perf_counter()
        rows = con.execute(AUDIT_SQL).fetchall()
        return time.perf_counter() - started, rows
    finally:
        con.close()


def spark_audit(spark: Any, data: Path) -> tuple[float, list[tuple[Any, ...]]]:
    """Seconds and rows of ``delivery_audit`` over the Parquet under ``data`` (read with the explicit schemas)."""
    from cck.reports import delivery_audit, load_schema, read_tables

    started = time.perf_counter()
    tables = read_tables(spark, data, load_schema())
    audit = delivery_audit(tables["history"], tables["history_result"])
    rows = [tuple(row) for row in audit.collect()]
    return time.perf_counter() - started, rows


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda row: tuple(str(v) for v in row[:4]))


def check_results(spark_rows: list[tuple[Any, ...]], duck_rows: list[tuple[Any, ...]],
                  planted: dict[tuple[str, str], dict[str, int]]) -> None:
    """Both engines give the same rows, and the planted anomalies are what they found."""
    a, b = _sorted(spark_rows), _sorted(duck_rows)
    if a != b:
        diff = [(x, y) for x, y in zip(a, b, strict=False) if x != y][:3]
        raise AssertionError(f"Spark and DuckDB disagree ({len(a)} vs {len(b)} rows), first differences: {diff}")
    at = {name: COLUMNS.index(name) for name in PLANTED}
    found = {(row[0], row[2]): {name: row[i] for name, i in at.items()} for row in a}
    if found != planted:
        raise AssertionError("the audit did not find exactly the planted anomalies")


def _machine() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000], metavar="M",
                        help="sizes in HISTORY rows (default 1000000 10000000)")
    parser.add_argument("--runs", type=int, default=4, help="runs per size (default 4)")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--keys-per-history", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=1, help="timed repetitions per engine and size (best kept)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="DuckDB threads (default: cores)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark setting (repeatable); defaults: the pipeline's local settings, driver memory 4g")
    parser.add_argument("--workdir", type=Path, help="keep the data here (default: a temporary directory)")
    parser.add_argument("--warmup", type=int, default=20_000, metavar="M",
                        help="untimed warm-up size, 0 for none (default 20000)")
    parser.add_argument("--explain", action="store_true", help="print Spark's formatted physical plan once")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    from cck.reports._spark import LOCAL_CONF, spark_session

    conf = {**LOCAL_CONF, "spark.driver.memory": "4g"}
    for pair in args.conf:
        key, _, value = pair.partition("=")
        conf[key] = value
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cck-audit-bench-"))
    command = "python benchmarks/audit_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results: list[dict[str, Any]] = []
    spark = spark_session(args.master, conf, app_name="cck-audit-bench")
    try:
        if args.warmup:  # JIT and codegen of both plans, untimed
            warm = work / "warmup"
            write_evidence(warm / "evidence", runs=2, events=args.warmup, seed=args.seed, keys_per_history=100)
            to_parquet(warm / "evidence", warm / "data", args.threads)
            spark_audit(spark, warm / "data")
            duckdb_audit(warm / "data", args.threads)
            shutil.rmtree(warm)
        for events in args.events:
            root = work / f"events-{events}"
            shutil.rmtree(root, ignore_errors=True)
            started = time.perf_counter()
            synthesis = write_evidence(root / "evidence", runs=args.runs, events=events, seed=args.seed,
                                       rates=Rates(), keys_per_history=args.keys_per_history)
            generated = time.perf_counter() - started
            started = time.perf_counter()
            to_parquet(root / "evidence", root / "data", args.threads)
            converted = time.perf_counter() - started
            shutil.rmtree(root / "evidence")
            if args.explain:
                from cck.reports import delivery_audit, load_schema, read_tables

                tables = read_tables(spark, root / "data", load_schema())
                delivery_audit(tables["history"], tables["history_result"]).explain(mode="formatted")
            times: dict[str, list[float]] = {"spark": [], "duckdb": []}
            for _ in range(args.reps):
                seconds, spark_rows = spark_audit(spark, root / "data")
                times["spark"].append(seconds)
                check_results(spark_rows, spark_rows, synthesis.planted)
                seconds, duck_rows = duckdb_audit(root / "data", args.threads)
                times["duckdb"].append(seconds)
            check_results(spark_rows, duck_rows, synthesis.planted)
            best = {name: min(values) for name, values in times.items() if values}
            row = {"events": synthesis.events, "histories": len(synthesis.planted), "planted": synthesis.totals(),
                   "generate_s": generated, "parquet_s": converted,
                   **{f"{name}_s": seconds for name, seconds in best.items()},
                   **{f"{name}_s_per_million": seconds / synthesis.events * 1e6 for name, seconds in best.items()},
                   **{f"ratio_{name}": seconds / best["duckdb"] for name, seconds in best.items() if name != "duckdb"},
                   "all_s": times}
            row["ratio"] = row["ratio_spark"]
            results.append(row)
            line = "  ".join(f"{name} {seconds:.2f} s ({seconds / synthesis.events * 1e6:.2f} s/M)"
                             for name, seconds in best.items())
            ratios = "  ".join(f"{k} {v:.2f}" for k, v in row.items() if k.startswith("ratio_"))
            print(f"{synthesis.events:>11,} events  {line}  {ratios}  (generate {generated:.1f} s, "
                  f"parquet {converted:.1f} s)", flush=True)
            if args.workdir is None:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    report = {"command": command, "machine": _machine(), "spark_conf": conf, "master": args.master,
              "duckdb_threads": args.threads, "results": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
