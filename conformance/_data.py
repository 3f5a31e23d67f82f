"""Where the data a run reads lives: ``fixtures/`` of a source checkout (through the ``cck/fixtures`` symlink), or
the same files installed as package data of ``cck`` by the wheel (``cck/fixtures/brokers/broker.xml.j2``,
``cck/fixtures/artemis/versions.json``, ``cck/fixtures/java/**/*.java``).  Everything else of ``fixtures/`` (the
vectors, the captures) is the checkout's only: :func:`checkout_fixture` says so by name when it is missing.
"""

from __future__ import annotations

from pathlib import Path

import cck

__all__ = ["FIXTURES", "MissingFixture", "checkout_fixture", "fixture"]

#: ``cck/fixtures``: not resolved, so a checkout's path stays inside ``cck/`` (the bare ``fixtures`` folder it
#: links to is the same data)
FIXTURES = Path(cck.__file__).absolute().parent / "fixtures"


class MissingFixture(FileNotFoundError):
    """A file of ``fixtures/`` that only a source checkout has (an installed wheel does not)."""


def fixture(*parts: str) -> Path:
    """The path of ``fixtures/<parts>`` (package data: present in a checkout and in an installed wheel)."""
    return FIXTURES.joinpath(*parts)


def checkout_fixture(*parts: str, what: str) -> Path:
    """``fixtures/<parts>`` of a source checkout; :class:`MissingFixture`, naming ``what`` needs it, when this is
    an installed kit without it."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        raise MissingFixture(f"{what} needs fixtures/{'/'.join(parts)} of a source checkout of the Core Conformance "
                             f"Kit, and this installation ({FIXTURES.parent}) has none")
    return path
