"""The XA side of one run: a workload's XA operations on an XA session of the kit's client, each call's answer
written to an XA log (:class:`~._xa_oracle.XaCall`) and its sends' fates to the history.

Branches are named by Xid index and generation: starting Xid ``i`` again once its branch is completed makes a
fresh Xid, so no Xid is ever started twice.  The client keeps its own view of each branch (what it asked for)
only to choose the next call; the oracle judges from the answers alone, so a call whose answer never came
leaves its branch's outcome unknown there whatever the client goes on to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from cck.codec import CoreMessage, Packet, TypedProperties, Xid
from cck.conformance.oracles import History, OpType
from cck.reference.client import ClientError, ClientSettings, Consumer, Producer, Session, XAError, connect

from ._judge import Judgement
from ._model import QUEUES, XIDS, Xa
from ._xa_oracle import XaCall, XaVerdict

__all__ = ["XaSide", "with_xa"]

FORMAT = 0x434B  # "CK", as the suite's Xids
_Status = Literal["none", "active", "ended", "prepared", "done"]


@dataclass
class _Branch:
    label: str
    xid: Xid
    status: _Status = "active"
    #: its sends: key, producer name, sequence number, whether the send raised
    sends: list[tuple[str, str, int, bool]] = field(default_factory=list)


class XaSide:
    """Carries out XA operations on ``session``, appending to ``calls`` (the XA log) and ``history``."""

    def __init__(
        self,
        run_id: str,
        session: Session,
        history: History,
        calls: list[XaCall],
        receive_s: float,
        queue_name: Callable[[int], str],
        no_answer: Callable[[BaseException, str], None],
        on_send: Callable[[str, int, bool], None] = lambda key, queue, durable: None,
    ) -> None:
        self.run_id = run_id
        self.session = session
        self.history = history
        self.calls = calls
        self.receive_s = receive_s
        self.queue_name = queue_name
        self.no_answer = no_answer
        #: told of every send invoked (key, queue, durable): what the restart rules excuse a restart's losses by
        self.on_send = on_send
        self.branches: dict[int, _Branch] = {}
        self.generations: dict[int, int] = {}
        self.active: int | None = None
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.seqs: dict[int, int] = {}
        self._keys = 0
        self._forgotten = 0
        self.labels: dict[Xid, str] = {}

    # ------------------------------------------------------------------ the log

    def _prefix(self) -> bytes:
        return f"cck-x-{self.run_id}-".encode()

    def _fresh(self, index: int, what: str = "") -> tuple[str, Xid]:
        generation = self.generations.get(index, 0) + 1
        self.generations[index] = generation
        label = f"x{index}.{what}{generation}"
        xid = Xid(FORMAT, self._prefix() + label.encode(), b"b")
        self.labels[xid] = label
        return label, xid

    def _label(self, xid: Xid) -> str:
        return self.labels.get(xid, f"{xid.global_transaction_id.hex()}/{xid.branch_qualifier.hex()}")

    async def _call(
        self,
        call: Literal["start", "end", "prepare", "commit", "commit-one-phase", "rollback", "forget"],
        label: str,
        action: Callable[[], Awaitable[object]],
    ) -> bool:
        """Make one XA call and log its answer; whether it was answered OK."""
        try:
            result = await action()
        except XAError as exc:
            self.calls.append(XaCall(call, label, "error", len(self.history), code=exc.code))
            return False
        except (ClientError, TimeoutError) as exc:
            self.no_answer(exc, f"xa-{call}")
            self.calls.append(XaCall(call, label, "unknown", len(self.history)))
            return False
        code = result if call == "prepare" and isinstance(result, int) else None
        self.calls.append(XaCall(call, label, "ok", len(self.history), code=code))
        return True

    # ------------------------------------------------------------------ branches

    def _open(self, index: int) -> bool:
        branch = self.branches.get(index)
        return branch is not None and branch.status in ("active", "ended", "prepared")

    async def _start(self, index: int) -> bool:
        if self._open(index):
            return False
        if self.active is not None:
            await self._end(self.active)
        label, xid = self._fresh(index)
        branch = self.branches[index] = _Branch(label, xid)
        if await self._call("start", label, lambda: self.session.xa_start(xid)):
            self.active = index
            return True
        branch.status = "done"  # abandoned: its outcome is the oracle's "unknown"
        self._settle(branch, None)
        return False

    async def _end(self, index: int) -> None:
        branch = self.branches[index]
        self.active = None
        branch.status = "ended"
        if not await self._call("end", branch.label, lambda: self.session.xa_end(branch.xid)):
            branch.status = "done"
            self._settle(branch, None)

    async def _ensure_active(self, index: int) -> _Branch | None:
        if self.active is not None:
            return self.branches[self.active]
        free = [i for i in (index, *sorted(set(range(XIDS)) - {index})) if not self._open(i)]
        if free and await self._start(free[0]):
            return self.branches[free[0]]
        return None

    def _settle(self, branch: _Branch, outcome: OpType | None) -> None:
        """Record its sends' fates: ``ok`` (committed), ``fail`` (rolled back) or, for None, unknown."""
        for key, name, seq, raised in branch.sends:
            self.history.op("xa", "info" if outcome is None or raised else outcome, "send", key, producer=name, seq=seq)
        branch.sends = []

    async def _complete(self, branch: _Branch, call: Literal["commit", "commit-one-phase", "rollback"]) -> None:
        xid = branch.xid
        if call == "rollback":
            answered = await self._call(call, branch.label, lambda: self.session.xa_rollback(xid))
        else:
            answered = await self._call(
                call, branch.label, lambda: self.session.xa_commit(xid, one_phase=call == "commit-one-phase")
            )
        branch.status = "done"
        self._settle(branch, ("fail" if call == "rollback" else "ok") if answered else None)

    # ------------------------------------------------------------------ operations

    async def do(self, op: Xa) -> None:
        if op.action == "send":
            await self._send(op)
        elif op.action == "receive":
            await self._receive(op)
        elif op.action == "start":
            await self._start(op.xid)
        elif op.action == "recover":
            await self._recover()
        elif op.action == "forget":
            await self._forget(op.xid)
        elif self._open(op.xid):
            await self._finish(op)

    async def _finish(self, op: Xa) -> None:
        branch = self.branches[op.xid]
        if branch.status == "active":
            await self._end(op.xid)
        if op.action == "end" or branch.status == "done":
            return
        if branch.status == "ended" and op.action in ("prepare", "commit"):
            branch.status = "prepared"
            if not await self._call("prepare", branch.label, lambda: self.session.xa_prepare(branch.xid)):
                branch.status = "done"
                self._settle(branch, None)
                return
        if op.action == "prepare":
            return
        if op.action == "rollback":
            await self._complete(branch, "rollback")
        elif branch.status == "ended":  # commit-one-phase of an unprepared branch
            await self._complete(branch, "commit-one-phase")
        else:
            await self._complete(branch, "commit")

    async def _forget(self, index: int) -> None:
        branch = self.branches.get(index)
        if branch is not None and branch.status == "done":
            label, xid = branch.label, branch.xid
        else:
            self._forgotten += 1
            label = f"x{index}.never{self._forgotten}"
            xid = Xid(FORMAT, self._prefix() + label.encode(), b"b")
            self.labels[xid] = label
        await self._call("forget", label, lambda: self.session.xa_forget(xid))

    async def _recover(self) -> None:
        try:
            xids = await self.session.xa_recover()
        except XAError as exc:
            self.calls.append(XaCall("recover", answer="error", at=len(self.history), code=exc.code))
            return
        except (ClientError, TimeoutError) as exc:
            self.no_answer(exc, "xa-recover")
            self.calls.append(XaCall("recover", answer="unknown", at=len(self.history)))
            return
        # other runs' branches may still be in doubt on the broker: only this run's are judged
        ours = tuple(self._label(x) for x in xids if x.global_transaction_id.startswith(self._prefix()))
        self.calls.append(XaCall("recover", at=len(self.history), listed=ours))

    async def _send(self, op: Xa) -> None:
        branch = await self._ensure_active(op.xid)
        if branch is None:
            return
        if op.queue not in self.producers:
            self.producers[op.queue] = self.session.create_producer(self.queue_name(op.queue))
        producer = self.producers[op.queue]
        name = f"xa-{QUEUES[op.queue]}"
        for _ in range(op.count):
            seq = self.seqs.get(op.queue, 0)
            self.seqs[op.queue] = seq + 1
            self._keys += 1
            key = f"{self.run_id}-xa{self._keys}"
            self.history.invoke_send("xa", key, producer=name, seq=seq)
            self.on_send(key, op.queue, op.durable)
            message = CoreMessage(key.encode(), durable=op.durable, properties=TypedProperties.of(key=key, seq=seq))
            try:
                future = await producer.send_async(message)
            except ClientError as exc:
                self.no_answer(exc, "credits")
                branch.sends.append((key, name, seq, True))
                self.calls.append(
                    XaCall("send", branch.label, "unknown", len(self.history), key=key, durable=op.durable)
                )
                continue
            # its outcome is the branch's; an answer, if any, says only that the broker has it in there
            branch.sends.append((key, name, seq, False))
            self.calls.append(XaCall("send", branch.label, "ok", len(self.history), key=key, durable=op.durable))
            if future is not None:
                future.add_done_callback(_quiet)

    async def _receive(self, op: Xa) -> None:
        branch = await self._ensure_active(op.xid)
        if branch is None:
            return
        try:
            if op.queue not in self.consumers:
                self.consumers[op.queue] = await self.session.create_consumer(self.queue_name(op.queue))
        except ClientError as exc:
            self.no_answer(exc, "create-consumer")
            return
        consumer = self.consumers[op.queue]
        for _ in range(op.count):
            try:
                delivery = await consumer.receive(self.receive_s)
            except ClientError:
                return
            if delivery is None:
                return
            value = delivery.message.properties.get("key")
            if value is None:
                raise AssertionError(f"a message without a key on {self.queue_name(op.queue)}: {delivery!r}")
            key = value.decode() if isinstance(value, bytes) else str(value)
            count = delivery.delivery_count
            self.history.received("xa", key, delivery_count=count, redelivered=count > 1)
            try:
                await consumer.individual_acknowledge(delivery)
            except ClientError as exc:
                self.no_answer(exc, "ack")
                self.calls.append(XaCall("ack", branch.label, "unknown", len(self.history), key=key))
            else:
                self.calls.append(XaCall("ack", branch.label, "ok", len(self.history), key=key))

    def restarted(self) -> None:
        """The broker was restarted: it aborted the active and ended branches and kept the prepared ones
        [dtx.unprepared-aborted, dtx.prepared-survives]; the log marks the moment."""
        self.calls.append(XaCall("restart", at=len(self.history)))
        self.active = None
        for branch in self.branches.values():
            if branch.status in ("active", "ended"):
                branch.status = "done"
                self._settle(branch, None)

    async def final_recover(self, url: str, settings: ClientSettings, seconds: float) -> None:
        """After the drain, straight from the broker: recover (logged, so the oracle compares it with the prepared
        branches), then roll back this run's branches still in doubt, so they hold nothing past the run."""
        direct = dataclasses.replace(settings, reconnect_attempts=0)

        async def go() -> None:
            async with await connect(url, settings=direct, connect_timeout=seconds) as connection:
                session = await connection.create_session(xa=True)
                xids = await session.xa_recover()
                ours = [x for x in xids if x.global_transaction_id.startswith(self._prefix())]
                self.calls.append(XaCall("recover", at=len(self.history), listed=tuple(map(self._label, ours))))
                for xid in ours:
                    with contextlib.suppress(ClientError):
                        await session.xa_rollback(xid)
                await session.close()

        # not the broker's answer to the workload: a failure here judges nothing (the recover is simply not logged)
        with contextlib.suppress(ClientError, TimeoutError, OSError):
            await asyncio.wait_for(go(), seconds)

    def abandon(self) -> None:
        """Branches not completed at the end: their sends' outcomes are unknown to the history (the oracle
        judges the prepared ones from the XA log)."""
        for branch in self.branches.values():
            if branch.status != "done":
                self._settle(branch, None)


def _quiet(future: asyncio.Future[Packet]) -> None:
    if not future.cancelled():
        future.exception()


def with_xa(judgement: Judgement, verdict: XaVerdict) -> Judgement:
    """``judgement`` with the XA rules' findings and notes added."""
    if not verdict.findings and not verdict.notes:
        return judgement
    findings = judgement.findings + verdict.findings
    return dataclasses.replace(
        judgement, kind="finding" if findings else "clean", findings=findings, notes=judgement.notes + verdict.notes
    )
