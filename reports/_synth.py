"""A seeded synthetic evidence generator, for scale tests and the audit benchmark.

``write_evidence(out, runs=N, events=M, seed=S)`` writes ``N`` runs of the kit's evidence layout
(``OUT/<run-id>/run.json``, ``cases.jsonl``, ``history.jsonl``, ``history_results.jsonl``) holding about
``M`` HISTORY rows in all, and returns what it planted.  STANDARD LIBRARY ONLY (no pyspark): the rows are
the evidence schema's records (``conformance/evidence/schema.py``), so the pipeline ingests them like a
real run's.

Each history (one case of one run, label null) is one producer ``p1`` sending keys ``k0, k1, ...`` with
sequence numbers ``0, 1, ...`` (an invoke and an ``ok`` each) and one consumer ``c1`` receiving them in
order (delivery count 1, producer and sequence number on the receipt), acking a share of them (an ack
invoke and ``ok`` after the key's last receipt).  Sends and receipts alternate in batches of
:data:`BATCH` keys.  Anomalies are planted per key, at most one per key, each with its own rate:

* **lost**: the key is sent and confirmed but never received (the history ends with a complete drain);
* **duplicated**: the key is received twice, the second receipt neither flagged nor counted as a
  redelivery (the audit's ``not_redelivered``);
* **out of order**: the key is received after the next key (a swapped pair inside one batch), which is one
  order violation;
* **unexpected**: after the key's receipt, a key that was never sent is received (``never_sent``).

Those are **broker runs** (subject ``broker``, target ``url``).  ``clients=("kit", "artemis@2.44.0")`` adds
one **client run** per client (subject ``client``, that client under test, target ``reference``) of
``client_cases`` client cases with no histories.  ``kit_errors`` is the share of cases, of either subject,
recorded as KIT_ERROR with a ``kit_error`` (its own draw per case: the histories do not change; a broker case's
history is still written and audited); every other client case is PASS, every other broker case PASS or, with
an anomaly planted, FAIL.

The same seed gives the same bytes.  :class:`Synthesis` tells the counts planted per history, which are
exactly the delivery audit's ``lost``, ``duplicated``, ``order_violation`` and ``unexpected`` (every other
finding is zero), the verdict of every case and the client of every client run.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["BATCH", "KIT_ERROR", "PLANTED", "Rates", "Synthesis", "write_evidence"]

#: Keys sent before their receipts are written (swapped pairs stay inside one batch).
BATCH = 64
#: The anomalies planted, named as the delivery audit's columns.
PLANTED = ("lost", "duplicated", "order_violation", "unexpected")
SCHEMA_VERSION = 1
TARGET, TARGET_VERSION = "url", "synthetic"
#: Client runs are judged against the reference broker, as ``cck run --client`` does.
CLIENT_TARGET = "reference"
CLIENT_CLAUSE = "backoff.retry-interval"
KIT_ERROR = "KIT_ERROR"
#: The kit error of a planted KIT_ERROR case: its type and where the kit raised it (``path:line in function``).
KIT_ERROR_TYPE, KIT_ERROR_WHERE = "KitError", "synthetic/kit.py:1 in plant"


@dataclass(frozen=True)
class Rates:
    """Per-key probabilities of each anomaly (their sum at most 1), and of a received key being acked."""

    lost: float = 0.001
    duplicated: float = 0.001
    out_of_order: float = 0.001
    unexpected: float = 0.001
    ack: float = 0.5

    def __post_init__(self) -> None:
        values = asdict(self)
        if any(not 0 <= v <= 1 for v in values.values()):
            raise ValueError(f"rates must be within [0, 1]: {values}")
        if self.lost + self.duplicated + self.out_of_order + self.unexpected > 1:
            raise ValueError("the anomaly rates add up to more than 1")


@dataclass
class Synthesis:
    """What :func:`write_evidence` wrote: run IDs, HISTORY row count, and the anomalies planted per history."""

    seed: int
    rates: Rates
    run_ids: list[str] = field(default_factory=list)
    events: int = 0
    #: (run_id, case_id) -> {anomaly: count} for every anomaly of :data:`PLANTED` (broker runs' histories)
    planted: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    #: (run_id, case_id) -> the verdict written, for every case of every run
    verdicts: dict[tuple[str, str], str] = field(default_factory=dict)
    #: run_id -> the client under test, for the client runs
    clients: dict[str, str] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        total: Counter[str] = Counter(dict.fromkeys(PLANTED, 0))
        for counts in self.planted.values():
            total.update(counts)
        return dict(total)

    def kit_errors(self) -> set[tuple[str, str]]:
        """The (run_id, case_id) of every case written as KIT_ERROR."""
        return {case for case, verdict in self.verdicts.items() if verdict == KIT_ERROR}

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "rates": asdict(self.rates), "runs": self.run_ids, "events": self.events,
                "histories": len(self.planted), "planted": self.totals(), "clients": self.clients,
                "verdicts": dict(sorted(Counter(self.verdicts.values()).items()))}


def _j(value: Any) -> str:
    """A JSON scalar: the writer builds HISTORY lines by hand, ~3x faster than json.dumps of a dict."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return '"' + value + '"'  # generated names only: ASCII letters, digits, '-', '.', ':'
    return str(value)


class _History:
    """The HISTORY lines of one history, with index and time."""

    def __init__(self, run_id: str, case_id: str, start_ns: int) -> None:
        self.prefix = f'{{"kind": "history", "schema_version": {SCHEMA_VERSION}, "run_id": "{run_id}", ' \
                      f'"case_id": "{case_id}", "label": null, '
        self.lines: list[str] = []
        self.start_ns = start_ns

    def op(self, process: str, type_: str, f: str, value: str | None, producer: str | None = None,
           seq: int | None = None, delivery_count: int | None = None) -> None:
        index = len(self.lines)
        self.lines.append(
            f'{self.prefix}"index": {index}, "process": "{process}", "type": "{type_}", "f": "{f}", '
            f'"value": {_j(value)}, "time_ns": {self.start_ns + 1000 * index}, "producer": {_j(producer)}, '
            f'"seq": {_j(seq)}, "redelivered": null, "delivery_count": {_j(delivery_count)}, "node": "n1", '
            f'"extra": null}}\n')


def _history(rng: random.Random, run_id: str, case_id: str, keys: int, rates: Rates,
             start_ns: int) -> tuple[list[str], dict[str, int]]:
    """One history's lines and the anomalies planted in it."""
    planted = dict.fromkeys(PLANTED, 0)
    history = _History(run_id, case_id, start_ns)
    for batch in range(0, keys, BATCH):
        members = list(range(batch, min(batch + BATCH, keys)))
        for n in members:
            history.op("p1", "invoke", "send", f"k{n}", "P", n)
            history.op("p1", "ok", "send", f"k{n}")
        kind: dict[int, str] = {}
        order = list(members)
        position = 0
        while position < len(members):
            n, draw = members[position], rng.random()
            if draw < rates.lost:
                kind[n] = "lost"
            elif draw < rates.lost + rates.duplicated:
                kind[n] = "duplicated"
            elif draw < rates.lost + rates.duplicated + rates.unexpected:
                kind[n] = "unexpected"
            elif (draw < rates.lost + rates.duplicated + rates.unexpected + rates.out_of_order
                  and position + 1 < len(members)):
                # received after the next key, which is received plainly
                kind[n], kind[members[position + 1]] = "order_violation", "plain"
                order[position], order[position + 1] = order[position + 1], order[position]
                position += 1
            position += 1
        for n in order:
            anomaly = kind.get(n, "plain")
            if anomaly != "plain":
                planted[anomaly] += 1
            if anomaly == "lost":
                continue
            history.op("c1", "ok", "receive", f"k{n}", "P", n, 1)
            if anomaly == "duplicated":
                history.op("c1", "ok", "receive", f"k{n}", "P", n, 1)
            if anomaly == "unexpected":
                history.op("c1", "ok", "receive", f"x{n}", None, None, 1)
            if rng.random() < rates.ack:
                history.op("c1", "invoke", "ack", f"k{n}")
                history.op("c1", "ok", "ack", f"k{n}")
    return history.lines, planted


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _plants_kit_error(seed: int, where: str, rate: float) -> bool:
    """Whether the case at ``where`` ends in the kit's error: its own draw, so the histories stay the same."""
    return rate > 0 and random.Random(f"{seed}:kit-error:{where}").random() < rate  # noqa: S311 - test data


def _case_record(run_id: str, case_id: str, *, subject: str, client: str | None, clause_id: str, group: str,
                 description: str, expectation: str, verdict: str, reason: str | None, params: dict[str, Any],
                 started: datetime) -> str:
    """One CASE line; a KIT_ERROR case says where the (synthetic) kit erred."""
    kit_error = {"type": KIT_ERROR_TYPE, "where": KIT_ERROR_WHERE} if verdict == KIT_ERROR else None
    if kit_error is not None:
        reason = f"kit error in call: {KIT_ERROR_TYPE}: planted (at {KIT_ERROR_WHERE})"
    return json.dumps({
        "kind": "case", "schema_version": SCHEMA_VERSION, "run_id": run_id, "case_id": case_id,
        "clause_id": clause_id, "clause_level": "MUST", "subject": subject, "client": client,
        "checks": "implementation", "group": group, "nodeid": f"synthetic::{case_id}", "description": description,
        "expectation": expectation, "verdict": verdict, "reason": reason, "known_deviation": None,
        "kit_error": kit_error, "deviation_stale": False, "should_misses": [], "params": params, "duration_s": 1.0,
        "started": _timestamp(started), "finished": _timestamp(started + timedelta(seconds=1)),
    }) + "\n"


def _exit_status(verdicts: Counter[str]) -> int:
    """The run's exit status as the kit gives it: 1 a FAIL, else 3 a KIT_ERROR, else 0."""
    return 1 if verdicts["FAIL"] else 3 if verdicts[KIT_ERROR] else 0


def _write_run_record(run_dir: Path, run_id: str, *, subject: str, client: str | None, target: str,
                      started: datetime, verdicts: Counter[str], settings: dict[str, Any]) -> None:
    run = {
        "kind": "run", "schema_version": SCHEMA_VERSION, "run_id": run_id, "target": target, "subject": subject,
        "client": client, "target_version": TARGET_VERSION, "protocol_version": None, "broker_url": None,
        "strict": False, "python": "synthetic", "pytest": "synthetic", "kit_version": "synthetic",
        "started": _timestamp(started), "finished": _timestamp(started + timedelta(minutes=30)),
        "exit_status": _exit_status(verdicts), "verdict_counts": dict(sorted(verdicts.items())),
        "settings": {"synthetic": settings},
    }
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class _Plan:
    """What one call of :func:`write_evidence` writes, shared by its runs."""

    seed: int
    rates: Rates
    runs: int
    keys_total: int
    histories: int
    kit_errors: float
    base: datetime
    settings: dict[str, Any]


def _history_verdict(plan: _Plan, case_id: str, ok: bool) -> str:
    """A history's case: KIT_ERROR when one is planted (the history is written and judged all the same), else
    PASS without an anomaly and FAIL with one."""
    if _plants_kit_error(plan.seed, case_id, plan.kit_errors):
        return KIT_ERROR
    return "PASS" if ok else "FAIL"


def _write_broker_run(out: Path, plan: _Plan, r: int, synthesis: Synthesis) -> None:
    """Broker run ``r``: its share of the histories (dealt in turn), one CASE and HISTORY_RESULT row each."""
    run_id = f"synth-{plan.seed}-{r:04d}"
    started = plan.base + timedelta(hours=r)
    run_dir = out / run_id
    run_dir.mkdir()
    verdicts: Counter[str] = Counter()
    with (run_dir / "history.jsonl").open("w", encoding="utf-8") as history_file, \
         (run_dir / "cases.jsonl").open("w", encoding="utf-8") as case_file, \
         (run_dir / "history_results.jsonl").open("w", encoding="utf-8") as result_file:
        for h in range(r, plan.histories, plan.runs):
            keys = plan.keys_total // plan.histories + (1 if h < plan.keys_total % plan.histories else 0)
            case_id = f"synth.audit.{h}"
            rng = random.Random(f"{plan.seed}:{h}")  # noqa: S311 - seeded test data, not secrets
            lines, planted = _history(rng, run_id, case_id, keys, plan.rates, 1_000_000_000 * h)
            history_file.writelines(lines)
            synthesis.events += len(lines)
            synthesis.planted[(run_id, case_id)] = planted
            ok = not any(planted.values())
            verdict = _history_verdict(plan, case_id, ok)
            verdicts[verdict] += 1
            synthesis.verdicts[(run_id, case_id)] = verdict
            case_file.write(_case_record(
                run_id, case_id, subject="broker", client=None, clause_id="delivery.no-loss", group="synth",
                description=f"synthetic history of {keys} keys", expectation="no loss, no duplicate",
                verdict=verdict, reason=None if ok else f"planted {planted}", params={"keys": keys},
                started=started + timedelta(seconds=h)))
            result = {"final_drain_complete": True, "duplicates_allowed": False,
                      **{name: {"count": count} for name, count in planted.items()}}
            result_file.write(json.dumps({
                "kind": "history_result", "schema_version": SCHEMA_VERSION, "run_id": run_id, "case_id": case_id,
                "label": None, "ok": ok, "explanation": None if ok else "planted anomalies", "result": result,
            }) + "\n")
    _write_run_record(run_dir, run_id, subject="broker", client=None, target=TARGET, started=started,
                      verdicts=verdicts, settings=plan.settings)
    synthesis.run_ids.append(run_id)


def _write_client_run(out: Path, plan: _Plan, index: int, client: str, cases: int, synthesis: Synthesis) -> None:
    """A client run of ``client`` against the reference broker: ``cases`` client cases, no histories."""
    run_id = f"synth-{plan.seed}-client-{index:02d}"
    started = plan.base + timedelta(hours=plan.runs + index)
    run_dir = out / run_id
    run_dir.mkdir()
    verdicts: Counter[str] = Counter()
    with (run_dir / "cases.jsonl").open("w", encoding="utf-8") as case_file:
        for n in range(cases):
            case_id = f"synth.client.{n}"
            verdict = KIT_ERROR if _plants_kit_error(plan.seed, f"{client}:{case_id}", plan.kit_errors) else "PASS"
            verdicts[verdict] += 1
            synthesis.verdicts[(run_id, case_id)] = verdict
            case_file.write(_case_record(
                run_id, case_id, subject="client", client=client, clause_id=CLIENT_CLAUSE, group="synth-client",
                description=f"synthetic client case {n}", expectation="the client retries on schedule",
                verdict=verdict, reason=None, params={"n": n}, started=started + timedelta(seconds=n)))
    _write_run_record(run_dir, run_id, subject="client", client=client, target=CLIENT_TARGET, started=started,
                      verdicts=verdicts, settings=plan.settings)
    synthesis.run_ids.append(run_id)
    synthesis.clients[run_id] = client


def write_evidence(out: Path, *, runs: int = 1, events: int = 10_000, seed: int = 0, rates: Rates | None = None,
                   keys_per_history: int = 1000, clients: Sequence[str] = (), client_cases: int = 10,
                   kit_errors: float = 0.0) -> Synthesis:
    """Write ``runs`` synthetic broker runs with about ``events`` HISTORY rows in all under ``out`` (created),
    then one client run per client of ``clients``.

    Histories of ``keys_per_history`` keys (the last ones smaller) are dealt to the broker runs in turn; one
    CASE and one HISTORY_RESULT row per history.  Each client run has ``client_cases`` client cases judged
    against the reference broker.  A share ``kit_errors`` of all cases is recorded as KIT_ERROR.
    Deterministic for a seed."""
    if runs < 1 or events < 1 or keys_per_history < 1 or client_cases < 1:
        raise ValueError("runs, events, keys_per_history and client_cases must be positive")
    if not 0 <= kit_errors <= 1:
        raise ValueError(f"kit_errors must be within [0, 1]: {kit_errors}")
    if len(set(clients)) != len(clients) or not all(clients):
        raise ValueError(f"clients must be distinct names: {list(clients)}")
    rates = rates or Rates()
    per_key = 3 + 2 * rates.ack  # send invoke and ok, receipt, ack invoke and ok for a share
    keys_total = max(1, round(events / per_key))
    settings = {"seed": seed, "rates": asdict(rates), "keys_per_history": keys_per_history, "kit_errors": kit_errors}
    plan = _Plan(seed=seed, rates=rates, runs=runs, keys_total=keys_total,
                 histories=max(runs, math.ceil(keys_total / keys_per_history)), kit_errors=kit_errors,
                 base=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=seed % 3650), settings=settings)
    synthesis = Synthesis(seed=seed, rates=rates)
    out.mkdir(parents=True, exist_ok=True)
    for r in range(runs):
        _write_broker_run(out, plan, r, synthesis)
    for index, client in enumerate(clients):
        _write_client_run(out, plan, index, client, client_cases, synthesis)
    return synthesis
