"""Running the commands of a target file: placeholders filled in, a deadline, the output kept for the evidence.

A command is a line of shell (``sh -c``), as an operator writes it in a terminal.  The kit fills in its
placeholders (``{node}``, ``{etc_dir}``, ...), each value shell-quoted, so a path with a space stays one word; the
target file's own ``[vars]`` are inserted as written (they are the operator's shell text, and may hold other
placeholders).  ``{{`` and ``}}`` are literal braces.

Every run becomes a :class:`CommandRecord` in the run's :class:`CommandLog`, from which each case's evidence takes
the runs made while it ran.  A command that exits non-zero, or outlives its deadline (it is then killed with its
whole process group), raises :class:`CommandFailed`: an error of the kit's set-up, never a failure of the broker.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import string
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ._errors import TargetError

__all__ = ["BUILTIN_PLACEHOLDERS", "CommandFailed", "CommandLog", "CommandRecord", "fill", "placeholders_of",
           "run_command"]

#: What the kit fills in (every value shell-quoted).  ``etc_dir``/``broker_xml`` exist only for apply_config.
BUILTIN_PLACEHOLDERS: Mapping[str, str] = {
    "node": "the node's name in the target file",
    "url": "the node's core URL (tcp://host:port)",
    "host": "the host of the node's URL",
    "port": "the port of the node's URL",
    "data_dir": "the data directory the kit configured the broker with",
    "work_dir": "a directory of the kit's own for this node (pid files, logs)",
    "etc_dir": "apply_config: a directory holding the rendered broker.xml, login.config, users and roles files",
    "broker_xml": "apply_config: the rendered broker.xml",
}
#: Output kept per command run (the end of it: where a failing command says why).
OUTPUT_KEPT = 4000
#: How long the output is read after the command's shell exited (what it left running may hold it open).
OUTPUT_GRACE_S = 1.0


class CommandFailed(TargetError):
    """A target-file command exited non-zero or did not finish within its deadline."""

    def __init__(self, record: CommandRecord) -> None:
        self.record = record
        what = (f"did not finish within {record.deadline_s:g} s and was killed" if record.timed_out
                else f"exited with status {record.exit_status}")
        output = record.output.rstrip() or "(no output)"
        super().__init__(f"the {record.name} command of node {record.node!r} {what}: {record.command}\n"
                         f"--- its output ---\n{output}")


@dataclass(frozen=True)
class CommandRecord:
    """One run of a command, as the evidence keeps it."""

    node: str
    #: which command of the file: start, stop, kill, restart, apply_config, log
    name: str
    #: the command line as run (placeholders filled in)
    command: str
    #: when it began (monotonic ns) and how long it took
    began_ns: int
    duration_s: float
    #: None while a follower (the log command) still runs, or when it was killed at its deadline
    exit_status: int | None
    timed_out: bool
    deadline_s: float
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "name": self.name, "command": self.command, "began_ns": self.began_ns,
                "duration_s": round(self.duration_s, 3), "exit_status": self.exit_status,
                "timed_out": self.timed_out, "deadline_s": self.deadline_s, "output": self.output}


class CommandLog:
    """Every command run of a conformance run, in order; a case takes those made since it began."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[CommandRecord] = []

    def add(self, record: CommandRecord) -> None:
        with self._lock:
            self._records.append(record)

    def since(self, began_ns: int) -> list[CommandRecord]:
        with self._lock:
            return [r for r in self._records if r.began_ns >= began_ns]

    def all(self) -> list[CommandRecord]:
        with self._lock:
            return list(self._records)


def placeholders_of(template: str) -> list[str]:
    """The placeholder names a command uses (ValueError for a malformed one, such as a lone ``{``)."""
    names = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    for name in names:
        if not name.isidentifier():
            raise ValueError(f"{{{name}}} is not a placeholder (a name; write {{{{ and }}}} for literal braces)")
    return names


def fill(template: str, builtins: Mapping[str, str], variables: Mapping[str, str], *,
         _within: tuple[str, ...] = ()) -> str:
    """``template`` with its placeholders filled in: a variable's text as written (its own placeholders filled in
    too), a built-in value shell-quoted.  KeyError naming a placeholder that is neither; ValueError for a variable
    that refers to itself."""
    def value(name: str) -> str:
        if name in variables:
            if name in _within:
                raise ValueError(f"variable {name!r} refers to itself (through {' -> '.join(_within)})")
            return fill(variables[name], builtins, variables, _within=(*_within, name))
        if name in builtins:
            return shlex.quote(builtins[name])
        raise KeyError(name)

    return "".join(literal + ("" if field is None else value(field))
                   for literal, field, _, _ in string.Formatter().parse(template))


def run_command(node: str, name: str, command: str, deadline_s: float, log: CommandLog,
                env: Mapping[str, str] | None = None) -> CommandRecord:
    """Run ``command`` with ``sh -c`` in a process group of its own, wait for it at most ``deadline_s`` (then kill
    the group), record it in ``log``; CommandFailed unless it exited 0.

    The command is done when its shell exits, even if something it started in the background still holds the
    output open (a broker started with ``&`` but without redirecting it): what that writes later is not waited for.
    """
    began = time.monotonic_ns()
    process = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True,
                               env=None if env is None else dict(env))
    chunks: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(process, chunks), name=f"{name} {node}", daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process.pid)
        process.wait()
    reader.join(OUTPUT_GRACE_S)
    output = b"".join(chunks).decode("utf-8", "replace")
    if reader.is_alive():
        output += "\n(the output is still held open by a process the command left running; not read further)\n"
    record = CommandRecord(node=node, name=name, command=command, began_ns=began,
                           duration_s=(time.monotonic_ns() - began) / 1e9,
                           exit_status=None if timed_out else process.returncode, timed_out=timed_out,
                           deadline_s=deadline_s, output=output[-OUTPUT_KEPT:])
    log.add(record)
    if not record.ok:
        raise CommandFailed(record)
    return record


def _read_all(process: subprocess.Popen[bytes], chunks: list[bytes]) -> None:
    stream = process.stdout
    assert stream is not None
    with stream:
        while chunk := os.read(stream.fileno(), 65536):
            chunks.append(chunk)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
