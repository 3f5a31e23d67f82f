"""The cluster credentials left at their defaults (Artemis user manual, Clusters: Cluster User Credentials: the
broker detects the default cluster user and password and warns at every start).

Two clusters of two nodes, started for these cases: one whose nodes keep the cluster user and password Artemis
ships (on HornetQ, whose defaults differ, HornetQ's), one with credentials of its own.  What the nodes logged since
they started is read back (the target's log): the first must warn about the default credentials, the second must
not (a warning every broker prints whatever its configuration would say nothing).
"""

from __future__ import annotations

import dataclasses
import re

from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import CONFIG, LOG, ClusterSpec, SecuritySpec, Topology

from ._security_kit import ARTEMIS_1_0_0_VERSION, CLUSTERED, RULES, USERS, MakeTarget, secured

#: the cluster credentials Artemis ships in broker.xml
DEFAULT_CLUSTER = ClusterSpec(user="ACTIVEMQ.CLUSTER.ADMIN.USER", password="CHANGE ME!!")  # noqa: S106
DEFAULTED = Topology(Topology.cluster_of(2).nodes, security=SecuritySpec(enabled=True, users=USERS, rules=RULES),
                     cluster=DEFAULT_CLUSTER)
#: HornetQ's own (HornetQDefaultConfiguration): it warns (HQ222007) for these only, and speaks a protocol below
#: Artemis 1.0.0's
HORNETQ_DEFAULT_CLUSTER = ClusterSpec(user="HORNETQ.CLUSTER.ADMIN.USER", password="CHANGE ME!!")  # noqa: S106
HORNETQ_DEFAULTED = dataclasses.replace(DEFAULTED, cluster=HORNETQ_DEFAULT_CLUSTER)
#: a warning that names the default cluster password (Artemis: AMQ222007 "Security risk! ... running with the
#: default cluster admin user and default password"; the reference broker: "cluster-password is the default")
WARNING = re.compile(r"(?i)\bWARN.*(default cluster (admin )?user and default password|cluster-password is the "
                     r"default)")

DEFAULTS = tuple(
    Case(f"security.cluster.{n}", "security.default-cluster-password",
         f"two clustered nodes started with {what}; their logs since they started are read",
         expectation, params={"defaulted": defaulted}, needs=(CONFIG, LOG))
    for n, (defaulted, what, expectation) in enumerate((
        (True, "Artemis's default cluster user and password", "each node warned that its cluster credentials are "
                                                              "the defaults"),
        (False, "a cluster user and password of their own", "no node warned about default cluster credentials"),
    ), 2)
)


@cases(*DEFAULTS)
def test_default_cluster_password_warned(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                         evidence: CaseEvidence) -> None:
    defaulted = case.params["defaulted"]
    target = secured(cck_make_target, DEFAULTED if defaulted else CLUSTERED)
    if defaulted and target.protocol_version is not None and target.protocol_version < ARTEMIS_1_0_0_VERSION:
        target = secured(cck_make_target, HORNETQ_DEFAULTED)  # the server's own defaults, not Artemis's
    warned = {}
    for node in target.nodes:
        lines = [line for line in node.logs(0).splitlines() if WARNING.search(line)]
        warned[node.name] = lines
    evidence.note("warnings", warned)
    if defaulted:
        silent = [name for name, lines in warned.items() if not lines]
        assert not silent, f"no warning about the default cluster credentials from {', '.join(silent)}"
    else:
        loud = {name: lines for name, lines in warned.items() if lines}
        assert not loud, f"a warning about default cluster credentials although they are not: {loud}"
