"""Fault exploration (issue 21, first slice): hypothesis-generated workloads and protocol-aware fault schedules,
run with the kit's client through the fault proxy, judged by the history checker; a failing example is shrunk,
confirmed by a replay and written as evidence with the command that replays it, a sequence diagram of the run
and a pytest case that replays it (:func:`replay`) for a regression suite::

    cck explore --target reference --budget 2m --seed 1
    cck explore --target reference --replay evidence/explore-.../minimal/example.json

The pieces: the model (:class:`Example` = :class:`Workload` + :class:`FaultSchedule`, JSON both ways), the
hypothesis strategies (:func:`examples`), the runner (:func:`run_example`: one example against a broker URL),
the oracle (:func:`judge`: which of the checker's findings a conforming broker can never produce), the loop
(:func:`explore`), the sequence diagram (:func:`diagram`, :func:`render_svg`, :func:`render_text`: pure
functions of a run's evidence records) and the regression case (:func:`regression_case`).  See
docs/exploration.md.
"""

from __future__ import annotations

from ..sequence import Diagram, Row, RunRecords, frame_facts, load_records, render_svg, render_text
from ._cli import DESCRIPTION, add_arguments, parse_budget, parse_seed, run_explore
from ._diagram import diagram
from ._explore import (
    ExploreConfig,
    ExploreResult,
    FreshBroker,
    HistorySpool,
    explore,
    load_example,
    records_of,
    replay_command,
    replay_until_found,
    write_evidence,
    write_outcome,
)
from ._faults import rule_of
from ._guidance import RECENT_NS, Exposure, exposure
from ._judge import Anomaly, Judgement, Unanswered, judge
from ._model import (
    CONNECTION_TTLS_MS,
    QUEUES,
    WINDOWS,
    ClientConfig,
    Commit,
    CreateConsumer,
    CreateProducer,
    CutAfterCommands,
    CutAtFrame,
    CutHalfOpen,
    CutSettled,
    DelayFrames,
    DropFrames,
    DuplicateFrames,
    Example,
    ExampleError,
    Fault,
    FaultSchedule,
    Operation,
    Receive,
    RefuseConnects,
    ResetReattach,
    RestartBroker,
    Rollback,
    Send,
    Workload,
)
from ._regression import Reachable, regression_case, regression_file_name, replay
from ._restart import Restarter, RestartRecord, restarter_of
from ._runner import Limits, Outcome, dropped_sends, run_example, run_example_sync
from ._security_judge import Answer, judge_security
from ._security_model import AnyExample, Attempt, Login, SecurityExample, example_from_dict
from ._security_oracle import security_topology
from ._security_runner import SecurityLimits, run_security
from ._security_strategies import family_examples, security_examples
from ._security_targets import SecuredBrokers
from ._strategies import client_configs, examples, fault_schedules, faults, operations, workloads

__all__ = [
    # the model
    "CONNECTION_TTLS_MS",
    "QUEUES",
    "RECENT_NS",
    "WINDOWS",
    "ClientConfig",
    "Commit",
    "CreateConsumer",
    "CreateProducer",
    "CutAfterCommands",
    "CutHalfOpen",
    "CutAtFrame",
    "CutSettled",
    "DelayFrames",
    "DropFrames",
    "DuplicateFrames",
    "Example",
    "ExampleError",
    "Fault",
    "FaultSchedule",
    "Operation",
    "Receive",
    "RefuseConnects",
    "ResetReattach",
    "RestartBroker",
    "Rollback",
    "Send",
    "Workload",
    # strategies
    "client_configs",
    "examples",
    "fault_schedules",
    "faults",
    "operations",
    "workloads",
    # faults as proxy rules
    "rule_of",
    # running and judging
    "Anomaly",
    "Exposure",
    "Judgement",
    "Limits",
    "Outcome",
    "Unanswered",
    "exposure",
    "judge",
    "dropped_sends",
    "run_example",
    "run_example_sync",
    # broker restarts: what restarts the target's broker, and what one run records of each
    "Restarter",
    "RestartRecord",
    "restarter_of",
    # replaying a finding, and the pytest case that does
    "Reachable",
    "regression_case",
    "regression_file_name",
    "replay",
    # the security family
    "Answer",
    "AnyExample",
    "Attempt",
    "Login",
    "SecuredBrokers",
    "SecurityExample",
    "SecurityLimits",
    "example_from_dict",
    "family_examples",
    "judge_security",
    "run_security",
    "security_examples",
    "security_topology",
    # the sequence diagram
    "Diagram",
    "Row",
    "RunRecords",
    "diagram",
    "frame_facts",
    "load_records",
    "records_of",
    "render_svg",
    "render_text",
    # the loop and the command
    "DESCRIPTION",
    "ExploreConfig",
    "ExploreResult",
    "FreshBroker",
    "HistorySpool",
    "add_arguments",
    "explore",
    "load_example",
    "parse_budget",
    "parse_seed",
    "replay_command",
    "replay_until_found",
    "run_explore",
    "write_evidence",
    "write_outcome",
]
