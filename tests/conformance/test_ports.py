"""Where a managed broker's ports come from: the kernel's free ports in one process, a block of its own for each
process of a run on several (so one worker never listens on a port another worker's passive backup was given)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cck.conformance.targets import PortBlock, Topology, free_ports, make_target
from cck.conformance.targets._ports import PORT_BLOCK_FIRST, PORT_BLOCK_SIZE, ephemeral_range


def test_free_ports_are_distinct() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5


def test_worker_blocks_are_disjoint_and_below_the_ephemeral_range() -> None:
    low = 32768
    blocks = [PortBlock.for_worker(i, ephemeral_low=low) for i in range(4)]
    spans = [range(b.first, b.first + b.size) for b in blocks]
    assert [b.first for b in blocks] == [PORT_BLOCK_FIRST + i * PORT_BLOCK_SIZE for i in range(4)]
    for i, span in enumerate(spans):
        assert span[-1] < low
        for other in spans[i + 1:]:
            assert not set(span) & set(other)


def test_a_worker_past_the_last_block_goes_round_again() -> None:
    fit = (32768 - PORT_BLOCK_FIRST) // PORT_BLOCK_SIZE
    assert PortBlock.for_worker(fit, ephemeral_low=32768).first == PORT_BLOCK_FIRST


def test_no_room_below_the_ephemeral_range_is_refused_with_the_setting_named() -> None:
    with pytest.raises(ValueError, match="ip_local_port_range"):
        PortBlock.for_worker(0, ephemeral_low=PORT_BLOCK_FIRST + 10)


def test_ephemeral_range_falls_back_to_linux_default(tmp_path: Path) -> None:
    assert ephemeral_range(tmp_path / "absent") == (32768, 60999)
    (tmp_path / "range").write_text("40000\t50000\n")
    assert ephemeral_range(tmp_path / "range") == (40000, 50000)


def _bound_block(size: int) -> tuple[PortBlock, int]:
    """A block over ports the kernel says are free now (a run of ``size`` consecutive ones)."""
    for start in range(PORT_BLOCK_FIRST + 20000, 65000, size):
        block = PortBlock(start, size)
        try:
            block(size)
        except OSError:
            continue
        return PortBlock(start, size), start
    pytest.skip("no run of free ports found")


def test_a_block_hands_ports_out_in_turn_and_goes_round() -> None:
    block, start = _bound_block(4)
    assert block(2) == [start, start + 1]
    assert block(1) == [start + 2]
    assert block(2) == [start + 3, start]


def test_a_block_skips_a_port_someone_holds() -> None:
    block, start = _bound_block(4)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", start + 1))
        holder.listen()
        assert block(3) == [start, start + 2, start + 3]


def test_a_block_with_too_few_free_ports_says_so() -> None:
    block, start = _bound_block(2)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", start))
        with pytest.raises(OSError, match=f"only 1 of 2 ports free in \\[{start}, {start + 2}\\)"):
            block(2)


def test_udp_ports_come_from_the_block_too() -> None:
    block, start = _bound_block(3)
    assert block(2, kind=socket.SOCK_DGRAM) == [start, start + 1]


def test_a_managed_target_takes_its_nodes_ports_from_its_source(tmp_path: Path) -> None:
    block, start = _bound_block(8)
    target = make_target("reference", workdir=tmp_path, topology=Topology.single(), ports=block)
    try:
        assert all(start <= urlport < start + 8 for urlport in (int(u.rsplit(":", 1)[1]) for u in target.urls))
    finally:
        target.close()
