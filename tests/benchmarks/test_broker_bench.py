"""benchmarks/broker_bench.py reads ``artemis perf client`` output right (no broker is started)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from benchmarks import broker_bench
from benchmarks.broker_bench import PerfOutputError, Report, RunRecord, Settings, parse_perf_output

# Captured from Artemis 2.44.0's `artemis perf client --show-latency --warmup 1 --duration 3 ...`
# against the reference broker (latency lines kept, one warmup interval, three measured ones).
SAMPLE = """\
Connection brokerURL = tcp://127.0.0.1:34059

--- warmup true  
--- sent:          4076 msg/sec 
--- blocked:          0 msg/sec 
--- completed:     4051 msg/sec 
--- received:      4052 msg/sec 
--- send ack time:   mean:   1028.92 us - 50.00%:    311.00 us - 90.00%:   3055.00 us - 99.00%:   7199.00 us - 99.90%:  15423.00 us - 99.99%:  33023.00 us - max:     33023.00 us 
--- transfer time:   mean:   6690.97 us - 50.00%:   4671.00 us - 90.00%:  14719.00 us - 99.00%:  27263.00 us - 99.90%:  30335.00 us - 99.99%:  34559.00 us - max:     34559.00 us

--- warmup false 
--- sent:          9819 msg/sec 
--- blocked:          0 msg/sec 
--- completed:     9843 msg/sec 
--- received:      9840 msg/sec 
--- send ack time:   mean:    278.68 us - 50.00%:     48.00 us - 90.00%:    567.00 us - 99.00%:   3455.00 us - 99.90%:   6751.00 us - 99.99%:  14143.00 us - max:     14207.00 us 
--- transfer time:   mean:   2584.64 us - 50.00%:   2015.00 us - 90.00%:   4607.00 us - 99.00%:   8159.00 us - 99.90%:  13887.00 us - 99.99%:  16639.00 us - max:     21631.00 us

--- warmup false 
--- sent:         11316 msg/sec 
--- blocked:          0 msg/sec 
--- completed:    11298 msg/sec 
--- received:     11294 msg/sec 

--- warmup false 
--- sent:          3596 msg/sec 
--- blocked:       3596 msg/sec 
--- completed:     3596 msg/sec 
--- received:      3600 msg/sec 

--- SUMMARY
--- result:              success
--- total sent:            28807
--- total blocked:          3596
--- total completed:       28788
--- total received:        28786 
--- aggregated send time:       mean:    227.18 us - 50.00%:     62.00 us - 90.00%:    355.00 us - 99.00%:   2783.00 us - 99.90%:   6303.00 us - 99.99%:   9343.00 us - max:     14207.00 us 
--- aggregated transfer time:   mean:   1866.73 us - 50.00%:   1511.00 us - 90.00%:   3087.00 us - 99.00%:   7327.00 us - 99.90%:  11327.00 us - 99.99%:  14527.00 us - max:     21631.00 us
"""  # noqa: E501, W291 - the perf client writes long lines ending in spaces


def test_parses_intervals_and_summary() -> None:
    result = parse_perf_output(SAMPLE)
    assert result.success
    assert [i.warmup for i in result.intervals] == [True, False, False, False]
    assert [i.received for i in result.intervals] == [4052, 9840, 11294, 3600]
    assert [i.sent for i in result.intervals] == [4076, 9819, 11316, 3596]
    assert [i.completed for i in result.intervals] == [4051, 9843, 11298, 3596]
    assert (result.total_sent, result.total_completed, result.total_received) == (28807, 28788, 28786)


def test_rates_exclude_warmup() -> None:
    result = parse_perf_output(SAMPLE)
    assert len(result.measured) == 3
    assert result.received_rate == pytest.approx(statistics.fmean([9840, 11294, 3600]))
    assert result.sent_rate == pytest.approx(statistics.fmean([9819, 11316, 3596]))


def test_failed_run_is_reported() -> None:
    result = parse_perf_output(SAMPLE.replace("result:              success", "result:              fail"))
    assert not result.success


@pytest.mark.parametrize(
    "broken",
    [
        "Connection brokerURL = tcp://127.0.0.1:1\n",  # killed before the summary
        SAMPLE.split("--- SUMMARY")[0],
        SAMPLE.replace("--- total received:        28786", ""),
        SAMPLE.replace("--- received:     11294 msg/sec", ""),
    ],
    ids=["no-output", "no-summary", "no-total-received", "interval-without-received"],
)
def test_incomplete_output_is_an_error(broken: str) -> None:
    with pytest.raises(PerfOutputError):
        parse_perf_output(broken)


def test_only_warmup_intervals_has_no_rate() -> None:
    only_warmup = SAMPLE.replace("--- warmup false", "--- warmup true")
    with pytest.raises(PerfOutputError):
        _ = parse_perf_output(only_warmup).received_rate


def test_same_client_arguments_for_both_brokers() -> None:
    settings = Settings(repetitions=1, duration=15, warmup=5, message_size=1024, max_pending=100, url_options="")
    reference = broker_bench.perf_client_args("tcp://127.0.0.1:1111", durable=True, settings=settings)
    artemis = broker_bench.perf_client_args("tcp://127.0.0.1:2222", durable=True, settings=settings)
    assert [a for a in reference if not a.startswith("--url")] == [a for a in artemis if not a.startswith("--url")]
    assert "--persistent" in reference
    assert "--message-size=1024" in reference
    assert "--persistent" not in broker_bench.perf_client_args("tcp://h:1", durable=False, settings=settings)


def _record(mode: str, broker: str, rate: float, repetition: int = 0, client: str = "artemis") -> RunRecord:
    return RunRecord(repetition, mode, broker, client, rate, rate, 10, 1, 1, True, 0.0)


def test_medians_ratios_and_table(tmp_path: Path) -> None:
    report = Report(settings={"repetitions": 3, "message_size": 1024}, machine={}, artemis={"journal_type": "NIO",
                    "journal_buffer_timeout_ns": 1000})  # fmt: skip
    for repetition, (ref, art) in enumerate([(10.0, 20.0), (12.0, 18.0), (11.0, 40.0)]):
        report.runs.append(_record("non-durable", "reference", ref, repetition))
        report.runs.append(_record("non-durable", "artemis", art, repetition))
    assert report.median("non-durable", "reference") == 11.0
    assert report.median("non-durable", "artemis") == 20.0
    assert report.ratio("non-durable") == pytest.approx(0.55)
    assert report.ratio("durable") is None
    assert report.modes() == ["non-durable"]
    report.runs.append(_record("non-durable", "reference", 5.0, client="kit"))
    report.runs.append(_record("non-durable", "artemis", 4.0, client="kit"))
    assert report.ratio("non-durable", "kit") == pytest.approx(1.25)
    assert report.clients() == ["artemis", "kit"]
    assert report.summary()["kit"]["non-durable"]["ratio_reference_over_artemis"] == pytest.approx(1.25)
    table = broker_bench.format_table(report)
    assert "0.55x" in table
    assert "1.25x" in table


def test_baseline_build_gets_its_own_column_and_ratio() -> None:
    report = Report(settings={"repetitions": 1, "message_size": 1024}, machine={}, artemis={"journal_type": "NIO",
                    "journal_buffer_timeout_ns": 1000})  # fmt: skip
    report.runs += [_record("durable", "reference", 9.0), _record("durable", "artemis", 10.0),
                    _record("durable", broker_bench.BASELINE, 8.0)]
    assert report.brokers() == ("reference", "artemis", broker_bench.BASELINE)
    assert report.ratio("durable", of=broker_bench.BASELINE) == pytest.approx(0.8)
    assert report.summary()["artemis"]["durable"]["ratio_baseline_over_artemis"] == pytest.approx(0.8)
    table = broker_bench.format_table(report)
    assert "0.90x" in table
    assert "0.80x" in table


def test_baseline_tree_must_be_a_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        broker_bench.main(["--baseline-tree", str(tmp_path)])
    assert "not a kit checkout" in capsys.readouterr().err


def test_kit_client_output_reads_as_perf_client_output() -> None:
    from benchmarks.kit_perf_client import Plan, format_perf_output

    plan = Plan("tcp://h:1", "Q", 1024, 100, True, warmup=1, duration=2)
    text = format_perf_output(plan, {"sent": [5, 10, 20], "completed": [5, 10, 20], "received": [4, 10, 30]})
    result = broker_bench.parse_perf_output(text)
    assert result.success
    assert [i.warmup for i in result.intervals] == [True, False, False]
    assert result.received_rate == 20.0
    assert (result.total_sent, result.total_received) == (35, 44)


def test_kit_client_runs_against_the_reference_broker(tmp_path: Path) -> None:
    from benchmarks.kit_perf_client import Plan, run_client
    from tests.reference.conftest import start_reference_broker, stop_reference_broker

    broker = start_reference_broker(tmp_path / "data")
    try:
        plan = Plan(f"{broker.url}?confirmationWindowSize=1048576", "BENCH", 1024, 100, True, warmup=1, duration=1)
        result = broker_bench.parse_perf_output(run_client(plan))
    finally:
        stop_reference_broker(broker)
    assert result.success
    assert result.total_received > 0
    assert result.total_completed <= result.total_sent
