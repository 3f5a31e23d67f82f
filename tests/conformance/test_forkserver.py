"""Reference brokers forked by the fork server behave as brokers launched one process each."""

from __future__ import annotations

import collections
import os
import re
import socket
import sys
from pathlib import Path

from cck.conformance.targets import ReferenceTarget, Topology
from cck.conformance.targets._forkserver import ORPHAN_EXIT_CODE, ForkedProcess, ForkServer, fork_server
from cck.conformance.targets._process import BrokerProcess


def _answers(url: str) -> bool:
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            return True
    except OSError:
        return False


def test_nodes_started_at_once_each_get_their_own_broker(tmp_path: Path) -> None:
    # the nodes of a cluster start in parallel threads: each must be told its own child's pid, or stopping
    # one node would report another's exit and leave the first running
    with ReferenceTarget(Topology.cluster_of(3), tmp_path) as target:
        node0, node1, node2 = target.nodes
        assert all(isinstance(n._process.popen, ForkedProcess) for n in target.nodes if n._process is not None)
        node0.stop()
        assert node0.last_exit_code == 0
        assert not node0.is_running
        assert not _answers(node0.url)
        assert _answers(node1.url)
        assert _answers(node2.url)
        node0.start()  # the stopped broker released its journal: the same data directory opens again
        assert _answers(node0.url)
        node1.kill()
        assert node1.last_exit_code == -9
        assert _answers(node0.url)
        assert _answers(node2.url)


def test_a_node_can_opt_out_and_other_commands_are_not_forked(tmp_path: Path) -> None:
    with ReferenceTarget(Topology.single(), tmp_path, fork_server=False) as target:
        process = target.nodes[0]._process
        assert process is not None
        assert not isinstance(process.popen, ForkedProcess)
        assert _answers(target.url)
    server = fork_server({})
    assert server.handles([sys.executable, "-m", "cck.reference", "broker"])
    assert not server.handles(["ip", "netns", "exec", "node0", sys.executable, "-m", "cck.reference", "broker"])
    assert not server.handles([sys.executable, "-m", "cck.conformance", "run"])


THREADED = '''
import sys
import threading
import time

threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # at import: forking would lose it


def main(argv):
    print("ready", flush=True)
    threading.Event().wait(30)  # idles like a broker until it is stopped
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def test_a_module_that_starts_threads_on_import_is_launched_as_a_process_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "threaded").mkdir()
    (tmp_path / "threaded" / "__init__.py").write_text("")
    (tmp_path / "threaded" / "__main__.py").write_text(THREADED)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    server = ForkServer(env, module="threaded")
    try:
        process = BrokerProcess([sys.executable, "-m", "threaded"], ready=re.compile("ready"),
                                log_file=tmp_path / "log", tail=collections.deque(), cwd=tmp_path, env=env,
                                fork_server=server)
        process.wait_ready(30.0)
        assert not isinstance(process.popen, ForkedProcess)
        assert not server.handles([sys.executable, "-m", "threaded"])  # it does not ask again
        assert "the fork server failed (the fork server could not start the broker: importing threaded started " \
               "threads)" in (tmp_path / "log").read_text()
        process.kill(10.0)
    finally:
        server.close()


def test_brokers_outlive_a_dead_fork_server_and_a_new_server_forks_the_next_ones(tmp_path: Path) -> None:
    with ReferenceTarget(Topology.single(), tmp_path) as target:
        node = target.nodes[0]
        server = node._fork_server(node._env())
        assert server is not None
        assert server._process is not None
        server._process.kill()  # the server crashes: its broker is an orphan now, still serving
        server._process.wait()
        assert _answers(node.url)
        node.kill()  # the kit still learns that it ended (from a pidfd), without waiting out the deadline
        assert node.last_exit_code == ORPHAN_EXIT_CODE
        node.start()
        assert node._process is not None
        assert isinstance(node._process.popen, ForkedProcess)
        assert node._fork_server(node._env()) is not server
        assert _answers(node.url)
