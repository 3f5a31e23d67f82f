"""The suite's shared waits: what the subject must do is a check, what the kit does wrong is the kit's."""

from __future__ import annotations

import asyncio

import pytest

from cck.conformance.plugin._judge import cause_of
from cck.conformance.suite._kit import judged_afterwards, observed, restarted
from cck.conformance.targets import NodeStartError
from cck.conformance.verdicts import CheckFailed, NotObserved


def test_an_answer_that_never_comes_is_a_failed_check_naming_it() -> None:
    async def never() -> None:
        await asyncio.Event().wait()

    with pytest.raises(NotObserved, match=r"the broker's answer: not within 0\.0 s") as caught:
        asyncio.run(observed(never(), 0.02, "the broker's answer"))
    assert cause_of(caught.value) == "check"


def test_what_arrives_in_time_is_returned() -> None:
    async def answer() -> int:
        return 7

    assert asyncio.run(observed(answer(), 1.0, "an answer")) == 7


def test_a_timeout_raised_inside_is_not_relabelled() -> None:
    async def kit_timeout() -> None:
        raise TimeoutError("the kit's own helper timed out")

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(observed(kit_timeout(), 5.0, "an answer"))
    assert not isinstance(caught.value, NotObserved)
    assert cause_of(caught.value) == "kit"


def test_a_node_that_does_not_start_again_fails_the_case() -> None:
    def start() -> None:
        raise NodeStartError("node0", "the broker exited with 1", "journal corrupt")

    with pytest.raises(CheckFailed, match="node0 did not start again with its data") as caught:
        asyncio.run(restarted(start, "node0"))
    assert cause_of(caught.value) == "check"


def test_any_other_error_of_a_restart_stays_the_kits() -> None:
    def start() -> None:
        raise OSError("no such file: bin/artemis")

    with pytest.raises(OSError, match="no such file") as caught:
        asyncio.run(restarted(start, "node0"))
    assert cause_of(caught.value) == "kit"


def test_the_steps_run_after_a_failed_block_and_add_their_finding() -> None:
    ran: list[str] = []

    async def drain() -> None:
        ran.append("drain")

    def judge() -> None:
        ran.append("judge")
        raise CheckFailed("2 messages lost")

    async def case() -> None:
        async with judged_afterwards(drain, judge):
            raise AssertionError("the broker replayed from the wrong command")

    with pytest.raises(AssertionError, match="wrong command") as caught:
        asyncio.run(case())
    assert ran == ["drain", "judge"]
    assert any("2 messages lost" in note for note in caught.value.__notes__)


def test_the_steps_fail_a_passing_block() -> None:
    def judge() -> None:
        raise CheckFailed("1 message duplicated")

    async def case() -> None:
        async with judged_afterwards(judge):
            pass

    with pytest.raises(CheckFailed, match="duplicated"):
        asyncio.run(case())
