"""Targets: the brokers a conformance run is pointed at.

* ``url`` — a broker the kit does not control (:class:`UrlTarget`): black-box cases only.
* ``reference`` — the kit's reference broker, one process per node (:class:`ReferenceTarget`).
* ``artemis`` — Apache Artemis of a pinned version, one instance per node (:class:`ArtemisTarget`).
* ``hornetq``, ``artemis1`` — HornetQ 2.4.7.Final, Artemis 1.5.6, embedded by the kit (:class:`LegacyTarget`).
* ``command`` — brokers the user runs, controlled through the commands of a target file (:class:`CommandTarget`).

The managed ones are configured from a :class:`Topology` rendered to one broker.xml per node
by the template in ``fixtures/brokers/`` (the same file for either broker), and can start, stop,
kill and restart their nodes.  A case needing that calls ``target.require(KILL)``; a target that
lacks it raises :class:`UnsupportedByTarget`, which the suite reports as UNSUPPORTED::

    from cck.conformance.targets import Topology, make_target

    with make_target("reference", workdir=tmp_path, topology=Topology()) as target:
        node = target.nodes[0]
        ...  # connect to node.url
        node.kill()
        node.start()  # same port, same data
"""

from __future__ import annotations

from ._artemis import ARTEMIS_START_DEADLINE_S, ArtemisNode, ArtemisTarget, pinned_artemis_versions
from ._base import (
    ALL_CAPABILITIES,
    CONFIG,
    CONTROL,
    KILL,
    LOG,
    RESTART,
    STOP_DEADLINE_S,
    ManagedNode,
    ManagedTarget,
    Node,
    ProcessNode,
    Target,
)
from ._command import CommandBench, CommandNode, CommandTarget
from ._commands import BUILTIN_PLACEHOLDERS, CommandFailed, CommandLog, CommandRecord
from ._config import (
    LEGACY_LOCK_MANAGER_CLASS,
    LOCK_MANAGER_CLASS,
    TEMPLATE_DIR,
    EtcFiles,
    render_broker_xml,
    render_etc,
    write_etc,
)
from ._errors import NodeStartError, NodeStopError, TargetError, UnsupportedByTarget
from ._factory import TARGET_KINDS, make_target
from ._legacy import LEGACY_TARGETS, Artemis1Target, HornetQTarget, LegacyTarget
from ._legacy_launch import LEGACY_SERVERS, LegacyServer, ensure_legacy
from ._netns import netns_unavailable
from ._ports import PortBlock, PortSource, free_ports
from ._process import launch_counts
from ._reference import REFERENCE_START_DEADLINE_S, ReferenceNode, ReferenceTarget, kit_version
from ._target_file import (
    COMMANDS,
    TargetFile,
    TargetFileError,
    capabilities_of,
    example_text,
    load_target_file,
    parse_target_file,
    unlocking_commands,
)
from ._topology import (
    PERMISSIONS,
    AddressSetting,
    AddressSpec,
    CertificateUser,
    ClusterSpec,
    HASpec,
    NodeSpec,
    QueueSpec,
    ScaleDownSpec,
    SecurityRule,
    SecuritySpec,
    TlsSpec,
    Topology,
    User,
)
from ._url import UNKNOWN_VERSION, UrlNode, UrlTarget, check_url

__all__ = [
    # targets
    "make_target",
    "TARGET_KINDS",
    "Target",
    "Node",
    "ManagedTarget",
    "ManagedNode",
    "ProcessNode",
    "ReferenceTarget",
    "ReferenceNode",
    "ArtemisTarget",
    "ArtemisNode",
    "UrlTarget",
    "UrlNode",
    "LegacyTarget",
    "HornetQTarget",
    "Artemis1Target",
    "LEGACY_TARGETS",
    "LEGACY_SERVERS",
    "LegacyServer",
    "ensure_legacy",
    "CommandTarget",
    "CommandNode",
    "CommandBench",
    # target files and their commands
    "TargetFile",
    "TargetFileError",
    "COMMANDS",
    "BUILTIN_PLACEHOLDERS",
    "load_target_file",
    "example_text",
    "parse_target_file",
    "capabilities_of",
    "unlocking_commands",
    "CommandLog",
    "CommandRecord",
    "CommandFailed",
    "check_url",
    "kit_version",
    "pinned_artemis_versions",
    "free_ports",
    "PortBlock",
    "PortSource",
    "launch_counts",
    "netns_unavailable",
    # capabilities
    "CONTROL",
    "RESTART",
    "KILL",
    "CONFIG",
    "LOG",
    "ALL_CAPABILITIES",
    # errors
    "TargetError",
    "UnsupportedByTarget",
    "NodeStartError",
    "NodeStopError",
    # topology
    "Topology",
    "NodeSpec",
    "SecuritySpec",
    "CertificateUser",
    "User",
    "SecurityRule",
    "PERMISSIONS",
    "AddressSpec",
    "QueueSpec",
    "AddressSetting",
    "ClusterSpec",
    "HASpec",
    "ScaleDownSpec",
    "TlsSpec",
    # configuration files
    "TEMPLATE_DIR",
    "LOCK_MANAGER_CLASS",
    "LEGACY_LOCK_MANAGER_CLASS",
    "EtcFiles",
    "render_broker_xml",
    "render_etc",
    "write_etc",
    # deadlines and defaults
    "REFERENCE_START_DEADLINE_S",
    "ARTEMIS_START_DEADLINE_S",
    "STOP_DEADLINE_S",
    "UNKNOWN_VERSION",
]
