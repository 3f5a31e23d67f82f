"""Client-side load balancing, sans-IO: which connector a ServerLocator's next connection goes to.

Artemis's four policies (``org.apache.activemq.artemis.api.core.client.loadbalance``) each answer
``select(count)`` with an index below ``count``:

* RoundRobin: the first answer is random, each later one the next index, wrapping to 0 (the default);
* Random: a random index each time;
* RandomSticky: a random index the first time, the same one afterwards;
* FirstElement: always 0.

Randomness comes from an injected :class:`random.Random`, so a seeded one makes every choice repeatable.

:class:`Balancer` is the locator's state around the policy, as Artemis's ``ServerLocatorImpl`` keeps it: the
initial connectors (the URL's, or those discovered) and the topology members learnt from the brokers.  Once a
topology has been received (a message with ``last=true``) and ``useTopologyForLoadBalancing`` is true, the
policy chooses among the members; otherwise among the initial connectors.  One policy instance serves both
lists, so its position carries over when the list changes.  :class:`InitialConnect` is the attempt loop of
``createSessionFactory`` on top of it.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

__all__ = [
    "FIRST_ELEMENT",
    "POLICIES",
    "RANDOM",
    "RANDOM_STICKY",
    "ROUND_ROBIN",
    "Balancer",
    "FirstElementPolicy",
    "InitialConnect",
    "LoadBalancingPolicy",
    "RandomPolicy",
    "RandomStickyPolicy",
    "RoundRobinPolicy",
    "check_policy_class_name",
    "make_policy",
]

_PACKAGE = "org.apache.activemq.artemis.api.core.client.loadbalance."
ROUND_ROBIN = _PACKAGE + "RoundRobinConnectionLoadBalancingPolicy"
RANDOM = _PACKAGE + "RandomConnectionLoadBalancingPolicy"
RANDOM_STICKY = _PACKAGE + "RandomStickyConnectionLoadBalancingPolicy"
FIRST_ELEMENT = _PACKAGE + "FirstElementConnectionLoadBalancingPolicy"

T = TypeVar("T")


class LoadBalancingPolicy(ABC):
    """Artemis's ``ConnectionLoadBalancingPolicy``: the index of the next choice among ``count`` candidates."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    @abstractmethod
    def select(self, count: int) -> int:
        """An index in ``range(count)``; ``count`` must be > 0."""

    @staticmethod
    def _check(count: int) -> None:
        if count <= 0:
            raise ValueError(f"nothing to choose from (count={count})")


class RoundRobinPolicy(LoadBalancingPolicy):
    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.position = -1

    def select(self, count: int) -> int:
        self._check(count)
        if self.position == -1:
            self.position = self.rng.randrange(count)
        else:
            self.position += 1
            if self.position >= count:
                self.position = 0
        return self.position


class RandomPolicy(LoadBalancingPolicy):
    def select(self, count: int) -> int:
        self._check(count)
        return self.rng.randrange(count)


class RandomStickyPolicy(LoadBalancingPolicy):
    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.position = -1

    def select(self, count: int) -> int:
        self._check(count)
        if self.position == -1 or self.position >= count:
            # Artemis keeps the first index even when the list has shrunk below it (and then fails with an
            # ArrayIndexOutOfBoundsException); the kit draws again instead.
            self.position = self.rng.randrange(count)
        return self.position


class FirstElementPolicy(LoadBalancingPolicy):
    def select(self, count: int) -> int:
        self._check(count)
        return 0


#: The policies by the class name Artemis's ``connectionLoadBalancingPolicyClassName`` takes.
POLICIES: Mapping[str, Callable[[random.Random], LoadBalancingPolicy]] = {
    ROUND_ROBIN: RoundRobinPolicy,
    RANDOM: RandomPolicy,
    RANDOM_STICKY: RandomStickyPolicy,
    FIRST_ELEMENT: FirstElementPolicy,
}


def check_policy_class_name(name: str) -> str:
    """``name`` when it is one of the four policies; a ValueError naming it (and the known ones) otherwise."""
    if name in POLICIES:
        return name
    hint = ""
    short = name.rpartition(".")[2]
    matches = [known for known in POLICIES if known.rpartition(".")[2] == short]
    if matches:
        hint = f"; did you mean {matches[0]}?"
    raise ValueError(f"{name!r} is not a connection load-balancing policy the kit implements{hint} "
                     f"(known: {', '.join(POLICIES)})")


def make_policy(name: str, rng: random.Random | None = None) -> LoadBalancingPolicy:
    """A fresh policy for the class name; ``rng`` defaults to an unseeded :class:`random.Random`."""
    return POLICIES[check_policy_class_name(name)](rng if rng is not None else random.Random())  # noqa: S311


class Balancer(Generic[T]):
    """A locator's candidates: ``initial`` (the URL's or the discovered connectors) and, once received, the
    topology's members (``node_id -> connector``, in the order they were first learnt)."""

    def __init__(self, initial: tuple[T, ...], policy: LoadBalancingPolicy, *, use_topology: bool = True) -> None:
        self.initial = initial
        self.policy = policy
        self.use_topology = use_topology
        self.members: dict[str, T] = {}
        #: A topology message with ``last=true`` has arrived (Artemis's ``receivedTopology``).
        self.received_topology = False

    # ------------------------------------------------------------------ what the brokers tell

    def node_up(self, node_id: str, connector: T, *, last: bool) -> None:
        self.members[node_id] = connector
        if last:
            self.received_topology = True

    def node_down(self, node_id: str) -> None:
        """A member left.  A locator without HA (the kit's client has none) keeps it, as Artemis's
        ``notifyNodeDown`` returns at once when ``ha`` is false; connecting to it then fails and the attempt
        loop chooses again."""

    def set_initial(self, connectors: tuple[T, ...]) -> None:
        """Discovery results replace the initial connectors until a topology is received (Artemis's
        ``connectorsChanged``)."""
        if not self.received_topology:
            self.initial = connectors

    # ------------------------------------------------------------------ choosing

    @property
    def uses_initial(self) -> bool:
        """Whether the next choice is among the initial connectors (Artemis's ``useInitConnector``)."""
        return not self.use_topology or not self.received_topology or not self.members

    def candidates(self, initial: bool) -> tuple[T, ...]:
        return self.initial if initial or not self.use_topology or not self.members else tuple(self.members.values())

    def select(self, initial: bool | None = None) -> T:
        """The policy's choice among the initial connectors (``initial=True``), the members (``False``), or
        whichever :attr:`uses_initial` says (``None``)."""
        chosen = self.candidates(self.uses_initial if initial is None else initial)
        return chosen[self.policy.select(len(chosen))]


class InitialConnect(Generic[T]):
    """The attempt loop of Artemis's ``createSessionFactory``: each attempt asks the policy; after
    ``max(1, initialConnectAttempts) x candidates`` failures on one list it tries the other list once (when a
    topology is known), then gives up.  Waits between attempts follow ``intervals`` (not reset on a switch).

    ::

        attempt = InitialConnect(balancer, settings.initial_connect_attempts, intervals(settings))
        while True:
            connector = attempt.next_connector()
            ...  # connect; on failure:
            retry_at = attempt.failed(now_ms)   # None: give up
    """

    def __init__(self, balancer: Balancer[T], initial_connect_attempts: int, waits: Iterator[int]) -> None:
        self.balancer = balancer
        self.configured = initial_connect_attempts
        self.waits = waits
        self.from_initial = balancer.uses_initial
        self._initial_tried = False
        self._topology_tried = not balancer.use_topology or not balancer.members
        self.attempts = 0  # on the current list
        self.failures = 0  # in all

    def candidates(self) -> tuple[T, ...]:
        """The list the next attempt chooses from."""
        return self.balancer.candidates(self.from_initial)

    def next_connector(self) -> T:
        return self.balancer.select(self.from_initial)

    def failed(self, now_ms: int) -> int | None:
        """Record a failed attempt at ``now_ms``; when to try again (ms), or None to give up."""
        self.attempts += 1
        self.failures += 1
        if self.configured >= 0:
            per_candidate = 1 if self.configured == 0 else self.configured
            size = len(self.balancer.candidates(self.from_initial))
            if self.attempts >= per_candidate * size:
                if self._topology_tried if self.from_initial else self._initial_tried:
                    return None
                if self.from_initial:
                    self._initial_tried = True
                else:
                    self._topology_tried = True
                self.from_initial = not self.from_initial
                self.attempts = 0
        return now_ms + next(self.waits)
