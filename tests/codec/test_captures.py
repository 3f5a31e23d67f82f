"""Real Artemis traffic through the scapy layers of codec.scapy.

* Fast tests (no broker) dissect the pcaps checked in under fixtures/captures/.
* ``capture`` + ``artemis`` tests start a real Apache Artemis broker from the
  pinned distribution (``conformance.artemis``), run the real ``artemis
  producer`` / ``artemis consumer`` clients and a broadcast group on loopback
  multicast, sniff ``lo`` with scapy (root and libpcap needed) and check that
  every frame and datagram dissects through the layers.  With
  ``CCK_WRITE_CAPTURES=1`` they also rewrite the checked-in pcaps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scapy")

from scapy.config import conf
from scapy.layers.inet import IP, TCP, UDP
from scapy.sendrecv import AsyncSniffer, sniff
from scapy.sessions import TCPSession
from scapy.utils import rdpcap, wrpcap

from cck.codec import ClusterTopologyChangeMessage_V4, CreateSessionMessage_V2, PacketType
from cck.codec.scapy import (
    ArtemisDiscovery,
    ArtemisIncomplete,
    ArtemisMalformedFrame,
    ArtemisPreamble,
    bind_ports,
    frames,
)

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "fixtures" / "captures"
MANIFEST = CAPTURES / "captures.json"
GROUP_ADDRESS = "231.7.7.7"
MESSAGES = 5

#: What a producer + consumer session must show at least (the request).
REQUIRED_TYPES = {
    PacketType.PING,
    PacketType.SUBSCRIBE_TOPOLOGY_V2,
    PacketType.CLUSTER_TOPOLOGY_V4,
    PacketType.CREATESESSION_V2,
    PacketType.CREATESESSION_RESP,
    PacketType.SESS_SEND,
    PacketType.SESS_CREATECONSUMER,
    PacketType.SESS_RECEIVE_MSG,
    PacketType.SESS_ACKNOWLEDGE,
    PacketType.SESS_CLOSE,
}

BROKER_START_S = 120.0
CLI_TIMEOUT_S = 120.0
DISCOVERY_WAIT_S = 20.0
QUIET_S = 0.5
QUIET_DEADLINE_S = 15.0
STOP_TIMEOUT_S = 30.0


# ------------------------------------------------------------------------------- helpers


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, *, interval_s: float = 0.05) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
        pause.wait(interval_s)


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def type_name(layer: Any) -> str:
    return str(layer.get_field("type").i2repr(layer, layer.type))


def all_frames(packets: Any) -> list[Any]:
    return [f for p in packets for f in frames(p)]


def stream_problems(packets: Any) -> list[str]:
    """Descriptions of everything that did not dissect as a whole, valid frame."""
    problems = [f"{type_name(f)}: {f.error}" for f in all_frames(packets) if f.error is not None]
    for p in packets:
        for cls in (ArtemisIncomplete, ArtemisMalformedFrame):
            if p.haslayer(cls):
                problems.append(f"{cls.__name__}: {p.summary()}")
    return problems


FORCED_DELIVERY_KEY = "_hornetq.forced.delivery.seq"


def check_session(packets: Any, *, messages: int) -> Counter[str]:
    """Assert a producer+consumer session dissects completely; return the type counts."""
    assert not stream_problems(packets)
    reassembled = sniff(offline=packets, session=TCPSession)
    assert not stream_problems(reassembled)
    decoded = all_frames(packets)
    assert [f.decoded for f in all_frames(reassembled)] == [f.decoded for f in decoded]

    counts = Counter(type_name(f) for f in decoded)
    missing = {t.name for t in REQUIRED_TYPES} - set(counts)
    assert not missing, f"not in the capture: {sorted(missing)} (saw {dict(counts)})"
    assert counts["SESS_SEND"] == messages
    # A consumer that calls receive(timeout) sends SESS_FORCE_CONSUMER_DELIVERY and
    # the broker answers with a marker SESS_RECEIVE_MSG (delivery count 0, property
    # _hornetq.forced.delivery.seq) when nothing else is pending; whether one is
    # sent depends on timing, so markers are counted apart from the messages.
    deliveries = [f.decoded for f in decoded if f.type == PacketType.SESS_RECEIVE_MSG]
    markers = [d for d in deliveries if FORCED_DELIVERY_KEY in d.message.properties]
    assert all(d.delivery_count == 0 for d in markers)
    assert len(markers) <= counts["SESS_FORCE_CONSUMER_DELIVERY"]
    ids = [(d.message.message_id, d.delivery_count) for d in deliveries]
    assert len(deliveries) - len(markers) == messages, f"deliveries (message ID, count): {ids}"
    assert sum(p.haslayer(ArtemisPreamble) for p in packets) >= 2  # producer and consumer connections

    sent = [f.decoded.message.body for f in decoded if f.type == PacketType.SESS_SEND]
    received = [d.message.body for d in deliveries if d not in markers]
    assert sent == received
    sessions = [f.decoded for f in decoded if isinstance(f.decoded, CreateSessionMessage_V2)]
    assert {s.username for s in sessions} == {"admin"}
    return counts


def topology_node_ids(packets: Any) -> set[str]:
    return {
        f.decoded.node_id
        for f in all_frames(packets)
        if isinstance(f.decoded, ClusterTopologyChangeMessage_V4) and not f.decoded.exit
    }


def check_discovery(packets: Any, *, core_port: int, group: str) -> set[str]:
    """Assert the datagrams dissect to the broker's connector; return the node IDs."""
    datagrams = [p for p in packets if p.haslayer(ArtemisDiscovery)]
    assert datagrams, "no discovery datagram captured"
    node_ids = set()
    for p in datagrams:
        assert p[IP].dst == group
        layer = p[ArtemisDiscovery]
        assert layer.error is None, layer.error
        datagram = layer.datagram
        assert datagram is not None
        assert len(datagram.connectors) == 1
        params = {param.key: param.value for param in datagram.connectors[0].params}
        assert params["host"] == "127.0.0.1"
        assert str(params["port"]) == str(core_port)
        assert datagram.connectors[0].factory_class_name.endswith("NettyConnectorFactory")
        node_ids.add(datagram.node_id)
    assert len(node_ids) == 1
    return node_ids


# ------------------------------------------------------------- checked-in captures (fast)


def _manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return data


def test_checked_in_session_capture_dissects() -> None:
    manifest = _manifest()
    bind_ports(tcp=manifest["core_port"])
    packets = rdpcap(str(CAPTURES / manifest["session_pcap"]))
    counts = check_session(packets, messages=manifest["messages"])
    assert counts["CREATESESSION_V2"] >= 2
    sessions = [f.decoded for f in all_frames(packets) if isinstance(f.decoded, CreateSessionMessage_V2)]
    assert {s.version for s in sessions} == {manifest["protocol_version"]}
    assert topology_node_ids(packets) == {manifest["node_id"]}


def test_checked_in_discovery_capture_dissects() -> None:
    manifest = _manifest()
    bind_ports(udp=manifest["discovery_port"])
    packets = rdpcap(str(CAPTURES / manifest["discovery_pcap"]))
    node_ids = check_discovery(packets, core_port=manifest["core_port"], group=manifest["discovery_group"])
    assert node_ids == {manifest["node_id"]}
    assert "connectors" in packets[0].show(dump=True)


# --------------------------------------------------------------- live broker (slow, root)


@dataclass
class Broker:
    version: str
    protocol_version: int
    instance: Path
    core_port: int
    discovery_port: int
    log: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            str(self.instance / "bin" / "artemis"),
            *args,
            "--url",
            f"tcp://127.0.0.1:{self.core_port}",
            "--user",
            "admin",
            "--password",
            "admin",
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
        assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        return result

    def node_id(self) -> str | None:
        match = re.search(r"nodeID=([0-9a-f-]{36})", self.log.read_text(encoding="utf-8", errors="replace"))
        return match.group(1) if match else None


BROADCAST_XML = """
      <connectors>
         <connector name="artemis">tcp://127.0.0.1:{core_port}</connector>
      </connectors>
      <broadcast-groups>
         <broadcast-group name="cck-broadcast">
            <local-bind-address>127.0.0.1</local-bind-address>
            <group-address>{group}</group-address>
            <group-port>{discovery_port}</group-port>
            <broadcast-period>250</broadcast-period>
            <connector-ref>artemis</connector-ref>
         </broadcast-group>
      </broadcast-groups>"""


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)  # the group of the broker we started, nothing else
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    if os.geteuid() != 0:
        pytest.skip("sniffing lo needs root (CAP_NET_RAW)")
    from cck.conformance.artemis import ensure_distribution

    dist = ensure_distribution()
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.fail("no JVM: install Java 17+ (or set JAVA_HOME) to run Apache Artemis")
    instance = tmp_path_factory.mktemp("artemis") / "broker"
    core_port = free_port(socket.SOCK_STREAM)
    discovery_port = free_port(socket.SOCK_DGRAM)
    create = [
        str(dist.home / "bin" / "artemis"),
        "create",
        str(instance),
        "--user=admin",
        "--password=admin",
        "--require-login",
        "--silent",
        "--no-web",
        "--host=127.0.0.1",
        f"--default-port={core_port}",
        "--no-amqp-acceptor",
        "--no-mqtt-acceptor",
        "--no-stomp-acceptor",
        "--no-hornetq-acceptor",
        "--nio",
        "--no-autotune",
        "--no-fsync",
        "--disable-persistence",
        "--java-memory=512M",
    ]
    result = subprocess.run(create, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
    assert result.returncode == 0, f"artemis create failed:\n{result.stdout}\n{result.stderr}"

    broker_xml = instance / "etc" / "broker.xml"
    text = broker_xml.read_text(encoding="utf-8")
    acceptor = re.search(r"<acceptor name=\"artemis\">tcp://([^:]+):(\d+)", text)
    assert acceptor is not None, "no 'artemis' acceptor in broker.xml"
    assert acceptor.groups() == ("127.0.0.1", str(core_port)), "acceptor not on 127.0.0.1:<core_port>"
    extra = BROADCAST_XML.format(core_port=core_port, group=GROUP_ADDRESS, discovery_port=discovery_port)
    broker_xml.write_text(text.replace("</acceptors>", "</acceptors>" + extra, 1), encoding="utf-8")

    log = instance / "broker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(instance / "bin" / "artemis"), "run"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:

        def started() -> bool:
            if process.poll() is not None:
                tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
                pytest.fail(f"broker exited with {process.returncode}:\n{tail}")
            return accepts(core_port)

        wait_until(started, BROKER_START_S, f"the broker to accept on 127.0.0.1:{core_port}", interval_s=0.2)
        yield Broker(dist.version, dist.protocol_version, instance, core_port, discovery_port, log, process)
    finally:
        _stop(process)


class Capture:
    """Packets sniffed on lo, counted as they arrive."""

    def __init__(self) -> None:
        self.last_tcp_at = time.monotonic()
        self.udp = 0

    def on_packet(self, packet: Any) -> None:
        if packet.haslayer(UDP):
            self.udp += 1
        else:
            self.last_tcp_at = time.monotonic()

    def quiet(self) -> bool:
        """No TCP packet for a while (broadcasts go on forever)."""
        return time.monotonic() - self.last_tcp_at >= QUIET_S


@contextmanager
def sniffing(bpf: str) -> Iterator[tuple[Capture, list[Any]]]:
    """Sniff lo with a BPF filter; the list is filled when the block ends.

    An L2socket (not a listen socket) is used so that the copy of each loopback
    packet seen on the way out (PACKET_OUTGOING) is not captured twice."""
    try:
        sock = conf.L2socket(iface="lo", filter=bpf)
    except Exception as exc:
        if "libpcap" in str(exc):
            pytest.fail(f"scapy cannot compile BPF filters without libpcap: apt-get install -y libpcap0.8 ({exc})")
        raise
    capture = Capture()
    result: list[Any] = []
    sniffer = AsyncSniffer(opened_socket=sock, prn=capture.on_packet, store=True)
    sniffer.start()
    try:
        yield capture, result
    finally:
        try:
            packets = sniffer.stop()
        finally:
            sock.close()
        result.extend(packets or [])


def _session_capture(broker: Broker, *, messages: int, bpf: str, text: str | None = None) -> list[Any]:
    extra = ["--message", text] if text else []
    # A queue of its own per capture: a message another capture left behind (the
    # CLI consumer may close before its last ack is flushed) cannot show up here.
    destination = f"--destination=queue://cck.capture.{uuid.uuid4().hex[:8]}"
    with sniffing(bpf) as (capture, packets):
        produced = broker.cli("producer", f"--message-count={messages}", destination, *extra)
        assert f"Produced: {messages} messages" in produced.stdout
        consumed = broker.cli("consumer", f"--message-count={messages}", destination)
        assert f"Consumed: {messages} messages" in consumed.stdout
        if "udp" in bpf:
            wait_until(lambda: capture.udp >= 2, DISCOVERY_WAIT_S, "two discovery datagrams")
        wait_until(capture.quiet, QUIET_DEADLINE_S, "the connections to go quiet")
    return without_duplicate_segments(packets)


def without_duplicate_segments(packets: list[Any]) -> list[Any]:
    """Drop a TCP segment seen again with the same flow, sequence number and payload.

    A loopback capture occasionally holds one segment twice (a retransmission, or
    the same frame seen on the way out and in); the receiving stack discards the
    copy, and so must a dissector that counts frames.
    """
    seen: set[tuple[Any, ...]] = set()
    kept = []
    for pkt in packets:
        if pkt.haslayer(TCP) and len(pkt[TCP].payload):
            key = (pkt[IP].src, pkt[IP].dst, pkt[TCP].sport, pkt[TCP].dport, pkt[TCP].seq, bytes(pkt[TCP].payload))
            if key in seen:
                continue
            seen.add(key)
        kept.append(pkt)
    return kept


@pytest.mark.capture
@pytest.mark.artemis
def test_real_client_session_dissects(broker: Broker, tmp_path: Path) -> None:
    bind_ports(tcp=broker.core_port)
    packets = _session_capture(broker, messages=MESSAGES, bpf=f"tcp port {broker.core_port}")
    counts = check_session(packets, messages=MESSAGES)
    sessions = [f.decoded for f in all_frames(packets) if isinstance(f.decoded, CreateSessionMessage_V2)]
    assert {s.version for s in sessions} == {broker.protocol_version}
    assert counts["PING"] >= 2
    node_id = broker.node_id()
    if node_id is not None:
        assert topology_node_ids(packets) == {node_id}

    path = tmp_path / "session.pcap"
    wrpcap(str(path), packets)
    again = rdpcap(str(path))
    assert [f.decoded for f in all_frames(again)] == [f.decoded for f in all_frames(packets)]


@pytest.mark.capture
@pytest.mark.artemis
def test_real_broadcast_group_datagrams_dissect(broker: Broker) -> None:
    bind_ports(udp=broker.discovery_port)
    with sniffing(f"udp port {broker.discovery_port}") as (capture, packets):
        deadline = time.monotonic() + DISCOVERY_WAIT_S
        pause = threading.Event()
        while capture.udp < 3:
            if time.monotonic() >= deadline:
                pytest.fail(
                    f"no discovery datagram to {GROUP_ADDRESS}:{broker.discovery_port} on lo within "
                    f"{DISCOVERY_WAIT_S:.0f}s: Java multicast on loopback may need a route "
                    "(`ip route add 224.0.0.0/4 dev lo`); broker log: " + str(broker.log)
                )
            pause.wait(0.05)
    node_ids = check_discovery(packets, core_port=broker.core_port, group=GROUP_ADDRESS)
    node_id = broker.node_id()
    if node_id is not None:
        assert node_ids == {node_id}
    assert len({p[ArtemisDiscovery].unique_id for p in packets if p.haslayer(ArtemisDiscovery)}) == 1


@pytest.mark.capture
@pytest.mark.artemis
@pytest.mark.skipif(not os.environ.get("CCK_WRITE_CAPTURES"), reason="set CCK_WRITE_CAPTURES=1 to rewrite")
def test_rewrite_capture_fixtures(broker: Broker) -> None:
    """Rewrite fixtures/captures/ from one small real session and its broadcasts."""
    bind_ports(tcp=broker.core_port, udp=broker.discovery_port)
    bpf = f"tcp port {broker.core_port} or udp port {broker.discovery_port}"
    packets = _session_capture(broker, messages=1, bpf=bpf, text="cck capture")
    # Keep data segments and connection open/close; bare ACKs carry nothing to dissect.
    session = [
        p
        for p in packets
        if p.haslayer(TCP) and (len(p[TCP].payload) or p[TCP].flags & 0x07)  # SYN/FIN/RST
    ]
    discovery = [p for p in packets if p.haslayer(ArtemisDiscovery)][:2]
    node_id = broker.node_id()
    check_session(session, messages=1)
    assert node_id is not None
    check_discovery(discovery, core_port=broker.core_port, group=GROUP_ADDRESS)

    CAPTURES.mkdir(parents=True, exist_ok=True)
    names = {
        "session": f"artemis-{broker.version}-session.pcap.gz",  # gzip: rdpcap and Wireshark read it as is
        "discovery": f"artemis-{broker.version}-discovery.pcap",
    }
    wrpcap(str(CAPTURES / names["session"]), session, gz=True)
    wrpcap(str(CAPTURES / names["discovery"]), discovery)
    manifest = {
        "artemis_version": broker.version,
        "protocol_version": broker.protocol_version,
        "session_pcap": names["session"],
        "discovery_pcap": names["discovery"],
        "core_port": broker.core_port,
        "discovery_group": GROUP_ADDRESS,
        "discovery_port": broker.discovery_port,
        "node_id": node_id,
        "messages": 1,
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
