"""Hypothesis strategies for the security family, and the draw of both families side by side.

Shrinking works on what these draw: fewer logins and attempts, the first entries of each table (the strict realm,
the first credentials, a send, the first queue).
"""

from __future__ import annotations

from hypothesis import strategies as st

from ._model import Example
from ._restart import RESTART_ONE_IN
from ._security_model import ACTIONS, MAX_ATTEMPTS, MAX_LOGINS, AnyExample, Attempt, Login, SecurityExample
from ._security_oracle import CREDENTIALS, PLACES, QUEUES, REALMS
from ._strategies import examples

__all__ = ["attempts", "family_examples", "logins", "security_examples"]


@st.composite
def attempts(draw: st.DrawFn) -> Attempt:
    action = draw(st.sampled_from(ACTIONS))
    low, high = (len(QUEUES), len(PLACES) - 1) if action.startswith("create") else (0, len(QUEUES) - 1)
    return Attempt(action, draw(st.integers(low, high)))


def logins() -> st.SearchStrategy[Login]:
    return st.builds(Login, st.sampled_from(tuple(CREDENTIALS)), st.lists(attempts(), max_size=MAX_ATTEMPTS).map(tuple))


def security_examples() -> st.SearchStrategy[SecurityExample]:
    return st.builds(
        SecurityExample, st.sampled_from(REALMS), st.lists(logins(), min_size=1, max_size=MAX_LOGINS).map(tuple)
    )


def family_examples(
    max_operations: int = 8, max_faults: int = 3, *, restart: bool = False, restart_one_in: int = RESTART_ONE_IN,
    security: bool = False
) -> st.SearchStrategy[AnyExample]:
    """The reliability family's examples, and with ``security`` the security family's beside them (one of the two
    at each draw; the reliability family first, so a shrunk reliability finding stays one)."""
    reliability: st.SearchStrategy[Example] = examples(max_operations, max_faults, restart, restart_one_in)
    if not security:
        return reliability
    return st.one_of(reliability, security_examples())
