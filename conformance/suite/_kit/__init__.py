"""The suite's one kit: what every group's cases run with.

* running: a bounded run of a case's scenario, and the deadlines inside it (``run``, ``bounded``,
  ``observed``, ``restarted``);
* waits: with a deadline, re-checked on a signal or polled at one interval where nothing can signal
  (``signalled``, ``POLL_S``, ``poll``, ``wait_until``, ``poll_value``);
* clients: the protocol version a target is spoken to in and the groups' client profiles
  (``client_settings``, ``REATTACHING``, ``RESTARTING``);
* messages: keys and sequence numbers as the histories know them (``message``, ``key_of``, ``seq_of``,
  ``queue_for``, ``unique``);
* traffic: keyed sends, their outcomes and receipts into a history (``send_keyed``, ``settle_sends``,
  ``record_receipt``, ``drain``, ``drain_queue``, ``drain_url``);
* judging: the judging end of the disrupt → fill → judge template (``judged``, ``judged_afterwards``,
  ``judge_history``, ``repeated``).

Group modules (``_reattach_kit``, ``_restart_support``, ``_cluster_kit``, ...) keep only what is their group's.
"""

from __future__ import annotations

from ._clients import REATTACHING, RESTARTING, client_settings, protocol_version
from ._judging import judge_history, judged, judged_afterwards, repeated
from ._messages import key_of, message, queue_for, seq_of, unique
from ._running import SCENARIO_S, bounded, observed, restarted, run
from ._traffic import (
    QUIET_S,
    RECEIVE_S,
    Ack,
    Fence,
    drain,
    drain_queue,
    drain_url,
    fence_behind,
    record_receipt,
    send_fence,
    send_keyed,
    settle_sends,
)
from ._waits import POLL_S, poll, poll_value, signalled, wait_until

__all__ = [
    "POLL_S",
    "QUIET_S",
    "REATTACHING",
    "RECEIVE_S",
    "RESTARTING",
    "SCENARIO_S",
    "Ack",
    "Fence",
    "bounded",
    "client_settings",
    "drain",
    "drain_queue",
    "drain_url",
    "fence_behind",
    "judge_history",
    "judged",
    "judged_afterwards",
    "key_of",
    "message",
    "observed",
    "poll",
    "poll_value",
    "protocol_version",
    "queue_for",
    "record_receipt",
    "repeated",
    "restarted",
    "run",
    "send_fence",
    "send_keyed",
    "seq_of",
    "settle_sends",
    "signalled",
    "unique",
    "wait_until",
]
