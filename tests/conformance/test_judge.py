"""The plugin's judgement as pure functions: what each cause of a failed phase makes of the verdict."""

from __future__ import annotations

import pytest

from cck.codec import EncodeError, MalformedFrame
from cck.conformance.plugin._judge import Judgement, cause_of, judge_phase, judge_teardown, kit_error_location
from cck.conformance.targets import NodeStartError, UnsupportedByTarget
from cck.conformance.verdicts import CheckFailed, Indeterminate, KitError, NotObserved, Unsupported, Verdict
from cck.reference.client import (
    BrokerRefused,
    CallTimeout,
    ConnectFailed,
    ConnectionFailed,
    ObjectClosed,
    ProtocolViolation,
    TransactionRolledBack,
)


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001  (any exception: the point is its traceback)
        return caught


@pytest.mark.parametrize(("exc", "cause"), [
    (AssertionError("x"), "check"),
    (CheckFailed("x"), "check"),
    (NotObserved("x"), "check"),
    (pytest.fail.Exception("x"), "check"),
    (BrokerRefused(104, "no such queue", "SESS_CREATECONSUMER"), "check"),
    (BrokerRefused(108, "AMQ229033: Server and client versions incompatible", "CREATESESSION"), "kit"),
    (CallTimeout("SESS_COMMIT", 1000), "check"),
    (ConnectionFailed("closed by the peer"), "check"),
    (ConnectFailed("refused (gave up after 1 attempt(s))"), "check"),
    (ProtocolViolation("unsolicited NULL_RESPONSE"), "check"),
    (TransactionRolledBack("s1"), "check"),
    (MalformedFrame("short", offset=3, field_path="length", expected="4 bytes", found="2"), "check"),
    (Unsupported("x"), "unsupported"),
    (UnsupportedByTarget("url", "kill", frozenset()), "unsupported"),
    (pytest.skip.Exception("x"), "unsupported"),
    (Indeterminate("x"), "indeterminate"),
    (TypeError("x"), "kit"),
    (KeyError("x"), "kit"),
    (TimeoutError(), "kit"),
    (ObjectClosed("session closed"), "kit"),
    (EncodeError("not an int", field_path="x", expected="int", found="str"), "kit"),
    (KitError("the proxy could not bind"), "kit"),
    (NodeStartError("node0", "exited with 1", ""), "kit"),
    (None, "kit"),
])
def test_cause_of(exc: BaseException | None, cause: str) -> None:
    assert cause_of(exc) == cause


def test_a_kit_error_is_never_lenient_and_names_where() -> None:
    from cck.conformance.oracles import check_schedule

    exc = _raised_in_kit(check_schedule)
    judgement = judge_phase("call", "failed", exc, f"{type(exc).__name__}: {exc}", lenient_clause=True,
                            strict=False, should_misses=[])
    assert judgement is not None
    assert judgement.verdict is Verdict.KIT_ERROR
    assert judgement.error_type == "TypeError"
    assert judgement.error_where is not None
    assert judgement.error_where.startswith("conformance/oracles/_timing.py:")
    assert f"(at {judgement.error_where})" in (judgement.reason or "")


def _raised_in_kit(check_schedule: object) -> BaseException:
    try:
        check_schedule([1, 2], None, None, origin_ns=0)  # type: ignore[operator]
    except TypeError as exc:
        return exc
    raise AssertionError("check_schedule accepted None as a schedule")


def test_a_failed_check_of_a_should_clause_is_lenient_unless_strict() -> None:
    exc = _raised(AssertionError("late"))
    lenient = judge_phase("call", "failed", exc, "AssertionError: late", lenient_clause=True, strict=False,
                          should_misses=[])
    strict = judge_phase("call", "failed", exc, "AssertionError: late", lenient_clause=True, strict=True,
                         should_misses=[])
    assert lenient is not None
    assert lenient.verdict is Verdict.PASS_LENIENT
    assert strict is not None
    assert strict.verdict is Verdict.FAIL


def test_teardown_after_a_pass() -> None:
    passed = Judgement(Verdict.PASS)
    assert judge_teardown(passed, "failed", _raised(KeyError("port")), "KeyError").verdict is Verdict.KIT_ERROR
    assert judge_teardown(passed, "failed", _raised(AssertionError("x")), "x").verdict is Verdict.INDETERMINATE
    failed = Judgement(Verdict.FAIL, "x")
    assert judge_teardown(failed, "failed", _raised(KeyError("port")), "KeyError") is failed


def test_location_without_a_traceback() -> None:
    assert kit_error_location(TypeError("never raised")) is None
    assert kit_error_location(None) is None
