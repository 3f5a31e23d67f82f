"""Client-side load balancing: Artemis's four policies on a seeded random source, the locator's choice between
the URL's connectors and the topology, the attempt loop over both lists, the URL parameters and their errors,
and a ServerLocator balancing real connections over three in-process reference brokers."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from cck.reference._server import BrokerServer
from cck.reference.broker import BrokerCore, BrokerSettings
from cck.reference.client import (
    FIRST_ELEMENT,
    RANDOM,
    RANDOM_STICKY,
    ROUND_ROBIN,
    Balancer,
    ClientSettings,
    Connector,
    InitialConnect,
    ServerLocator,
    make_policy,
    parse_locator_url,
)
from cck.reference.client._balance import (
    FirstElementPolicy,
    RandomPolicy,
    RandomStickyPolicy,
    RoundRobinPolicy,
    check_policy_class_name,
)

SEED = 20_251_205
LOOPBACK = "127.0.0.1"
SCENARIO_DEADLINE_S = 30.0


def rng() -> random.Random:
    return random.Random(SEED)


def picks(policy: str, counts: list[int]) -> list[int]:
    chooser = make_policy(policy, rng())
    return [chooser.select(n) for n in counts]


# ---------------------------------------------------------------------- the four policies


def test_round_robin_starts_at_a_random_index_then_goes_round_in_order() -> None:
    start = rng().randrange(3)
    assert picks(ROUND_ROBIN, [3] * 7) == [(start + i) % 3 for i in range(7)]


@pytest.mark.parametrize("seed", range(40))
def test_round_robin_start_is_the_random_source_s_and_every_start_occurs(seed: int) -> None:
    chooser = RoundRobinPolicy(random.Random(seed))
    first = chooser.select(4)
    assert first == random.Random(seed).randrange(4)
    assert [chooser.select(4) for _ in range(4)] == [(first + i) % 4 for i in range(1, 5)]


def test_round_robin_starts_vary_with_the_seed() -> None:
    starts = {RoundRobinPolicy(random.Random(seed)).select(3) for seed in range(30)}
    assert starts == {0, 1, 2}


def test_round_robin_wraps_to_zero_when_the_list_shrinks_below_its_position() -> None:
    chooser = RoundRobinPolicy(rng())
    chooser.position = 4  # as after choosing the fifth of five
    assert chooser.select(3) == 0  # 5 >= 3: back to the first, as Artemis does
    assert chooser.select(3) == 1


def test_random_draws_every_index_from_the_random_source() -> None:
    source = rng()
    expected = [source.randrange(3) for _ in range(20)]
    assert picks(RANDOM, [3] * 20) == expected


def test_random_is_uniform_over_many_draws() -> None:
    chooser = RandomPolicy(rng())
    counts = Counter(chooser.select(3) for _ in range(3000))
    assert set(counts) == {0, 1, 2}
    # each count is Binomial(3000, 1/3): mean 1000, sd 25.8; 900..1100 is beyond 3.8 sd either side
    assert all(900 <= c <= 1100 for c in counts.values()), counts


def test_random_sticky_draws_once_and_keeps_it() -> None:
    first = rng().randrange(3)
    assert picks(RANDOM_STICKY, [3] * 10) == [first] * 10


def test_random_sticky_keeps_its_index_when_the_list_grows() -> None:
    chooser = RandomStickyPolicy(rng())
    first = chooser.select(1)
    assert first == 0
    assert [chooser.select(3) for _ in range(5)] == [0] * 5


def test_random_sticky_draws_again_when_the_list_shrinks_below_its_index() -> None:
    chooser = RandomStickyPolicy(rng())
    chooser.position = 2
    again = chooser.select(2)
    assert again in (0, 1)
    assert chooser.select(2) == again


def test_first_element_always_chooses_index_zero() -> None:
    assert picks(FIRST_ELEMENT, [3, 1, 5, 3]) == [0, 0, 0, 0]


@pytest.mark.parametrize("policy", [RoundRobinPolicy, RandomPolicy, RandomStickyPolicy, FirstElementPolicy])
def test_no_policy_chooses_from_nothing(policy: Callable[[random.Random], object]) -> None:
    chooser = policy(rng())
    with pytest.raises(ValueError, match=r"nothing to choose from \(count=0\)"):
        chooser.select(0)  # type: ignore[attr-defined]


def test_policies_are_named_by_artemis_s_class_names() -> None:
    assert type(make_policy(ROUND_ROBIN)) is RoundRobinPolicy
    assert type(make_policy(RANDOM)) is RandomPolicy
    assert type(make_policy(RANDOM_STICKY)) is RandomStickyPolicy
    assert type(make_policy(FIRST_ELEMENT)) is FirstElementPolicy
    assert ROUND_ROBIN == ("org.apache.activemq.artemis.api.core.client.loadbalance."
                           "RoundRobinConnectionLoadBalancingPolicy")


def test_an_unknown_policy_name_is_named_in_the_error_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"'com\.example\.MyPolicy' is not a connection load-balancing") as caught:
        check_policy_class_name("com.example.MyPolicy")
    assert FIRST_ELEMENT in str(caught.value)


def test_a_short_policy_name_gets_the_full_name_as_a_hint() -> None:
    with pytest.raises(ValueError, match=re.escape(f"did you mean {RANDOM}")):
        make_policy("RandomConnectionLoadBalancingPolicy")


# ---------------------------------------------------------------------- URL parameters


def test_defaults_are_artemis_s_round_robin_and_topology_on() -> None:
    settings = parse_locator_url("tcp://a:1").settings()
    assert settings.connection_load_balancing_policy_class_name == ROUND_ROBIN
    assert settings.use_topology_for_load_balancing is True


def test_both_url_parameters_are_read_in_artemis_s_spelling() -> None:
    url = f"(tcp://a:1,tcp://b:2)?connectionLoadBalancingPolicyClassName={RANDOM_STICKY}&useTopologyForLoadBalancing=false"
    settings = parse_locator_url(url).settings()
    assert settings.connection_load_balancing_policy_class_name == RANDOM_STICKY
    assert settings.use_topology_for_load_balancing is False


def test_udp_urls_take_the_load_balancing_parameters_as_client_settings() -> None:
    url = f"udp://231.7.7.7:9876?connectionLoadBalancingPolicyClassName={FIRST_ELEMENT}&useTopologyForLoadBalancing=true"
    settings = parse_locator_url(url).settings()
    assert settings.connection_load_balancing_policy_class_name == FIRST_ELEMENT


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("connectionLoadBalancingPolicyClassName=com.example.Nope",
         ["connectionLoadBalancingPolicyClassName", "'com.example.Nope'", "known:", ROUND_ROBIN]),
        ("connectionLoadBalancingPolicyClassName=RoundRobinConnectionLoadBalancingPolicy",
         ["'RoundRobinConnectionLoadBalancingPolicy'", f"did you mean {ROUND_ROBIN}"]),
        ("connectionLoadBalancingPolicyClassName=", ["connectionLoadBalancingPolicyClassName", "''"]),
        ("useTopologyForLoadBalancing=yes", ["useTopologyForLoadBalancing='yes'", "bool"]),
        ("useTopologyForLoadBalancing=1", ["useTopologyForLoadBalancing='1'"]),
        ("connectionLoadBalancingPolicy=x", ["unknown client parameter 'connectionLoadBalancingPolicy'",
                                             "connectionLoadBalancingPolicyClassName"]),
    ],
)
def test_bad_load_balancing_parameters_are_named(query: str, names: list[str]) -> None:
    locator = parse_locator_url(f"tcp://a:1?{query}")
    with pytest.raises(ValueError, match="client parameter") as caught:
        locator.settings()
    for name in names:
        assert name in str(caught.value)


def test_a_locator_refuses_a_bad_policy_before_any_connection() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        ServerLocator("tcp://a:1?connectionLoadBalancingPolicyClassName=nope")


def test_settings_made_in_code_are_checked_too() -> None:
    with pytest.raises(ValueError, match=r"ClientSettings\.connection_load_balancing_policy_class_name: 'x'"):
        ClientSettings(connection_load_balancing_policy_class_name="x")


# ---------------------------------------------------------------------- the locator's lists

A, B, C = Connector("a", 1), Connector("b", 2), Connector("c", 3)


def balancer(policy: str = FIRST_ELEMENT, *, use_topology: bool = True,
             initial: tuple[Connector, ...] = (A,)) -> Balancer[Connector]:
    return Balancer(initial, make_policy(policy, rng()), use_topology=use_topology)


def test_the_initial_connectors_serve_until_a_topology_ends_with_last() -> None:
    chooser = balancer()
    assert chooser.uses_initial
    chooser.node_up("n-b", B, last=False)
    assert chooser.uses_initial  # a member, but no last=true yet
    assert chooser.select() == A
    chooser.node_up("n-c", C, last=True)
    assert not chooser.uses_initial
    assert chooser.candidates(False) == (B, C)
    assert chooser.select() == B


def test_use_topology_false_keeps_to_the_initial_connectors() -> None:
    chooser = balancer(ROUND_ROBIN, use_topology=False, initial=(A, B))
    chooser.node_up("n-c", C, last=True)
    assert chooser.uses_initial
    assert {chooser.select() for _ in range(6)} == {A, B}


def test_round_robin_position_carries_over_from_the_initial_list_to_the_topology() -> None:
    chooser = balancer(ROUND_ROBIN)
    assert chooser.select() == A  # one initial connector: index 0
    for node, connector in (("n-a", A), ("n-b", B), ("n-c", C)):
        chooser.node_up(node, connector, last=node == "n-c")
    assert [chooser.select() for _ in range(4)] == [B, C, A, B]  # index 1, 2, 0, 1


def test_a_member_that_leaves_stays_a_candidate_without_ha() -> None:
    chooser = balancer()
    chooser.node_up("n-b", B, last=True)
    chooser.node_down("n-b")
    assert chooser.candidates(False) == (B,)


def test_discovery_replaces_the_initial_connectors_only_until_a_topology_arrives() -> None:
    chooser = balancer(initial=())
    chooser.set_initial((A, B))
    assert chooser.initial == (A, B)
    chooser.node_up("n-c", C, last=True)
    chooser.set_initial((B,))
    assert chooser.initial == (A, B)


def test_the_attempt_loop_tries_each_initial_connector_then_gives_up_without_a_topology() -> None:
    chooser = balancer(ROUND_ROBIN, initial=(A, B))
    attempt = InitialConnect(chooser, 2, iter([100, 200, 400, 800]))
    tried = []
    now = 0
    retry_at: int | None = None
    for _ in range(4):
        tried.append(attempt.next_connector())
        retry_at = attempt.failed(now)
        if retry_at is None:
            break
        now = retry_at
    assert retry_at is None
    assert attempt.failures == 4  # max(1, 2) x 2 connectors
    assert Counter(tried) == {A: 2, B: 2}
    assert now == 700  # ms: waited 100, 200 and 400 ms


def test_the_attempt_loop_goes_from_the_topology_to_the_initial_list_once() -> None:
    chooser = balancer(FIRST_ELEMENT, initial=(A,))
    chooser.node_up("n-b", B, last=False)
    chooser.node_up("n-c", C, last=True)
    attempt = InitialConnect(chooser, 1, iter(range(1, 100)))
    tried = []
    while True:
        tried.append(attempt.next_connector())
        if attempt.failed(0) is None:
            break
    # two members x 1 attempt (FirstElement: B twice), then the URL's connector once, then no more
    assert tried == [B, B, A]


def test_initial_connect_attempts_minus_one_never_gives_up() -> None:
    attempt = InitialConnect(balancer(initial=(A,)), -1, iter(range(1, 1000)))
    assert all(attempt.failed(0) is not None for _ in range(500))


# ---------------------------------------------------------------------- a locator over real connections


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), SCENARIO_DEADLINE_S)

    asyncio.run(bounded())


async def landings(query: str, count: int) -> list[int]:
    """Which of three in-process brokers (index in the URL) each of ``count`` connections of one locator reached."""
    async with contextlib.AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(BrokerServer(BrokerCore(BrokerSettings(node_id=f"node-{i}")),
                                                                LOOPBACK, 0)) for i in range(3)]
        ports = [s.bound_port for s in servers]
        url = "(" + ",".join(f"tcp://{LOOPBACK}:{p}" for p in ports) + ")?" + query
        locator = ServerLocator(url, rng=rng())
        reached = []
        for _ in range(count):
            async with await locator.connect() as connection:
                reached.append(ports.index(connection.connector.port))
        return reached


def test_a_locator_round_robins_over_the_url_s_brokers_without_the_topology() -> None:
    async def scenario() -> None:
        reached = await landings("useTopologyForLoadBalancing=false", 7)
        start = rng().randrange(3)
        assert reached == [(start + i) % 3 for i in range(7)]

    run(scenario)


def test_with_the_topology_standalone_brokers_keep_a_locator_on_the_first_one_it_reached() -> None:
    """A broker outside a cluster sends itself without connectors; Artemis's client records the connector it
    used, so once that topology has arrived the locator only knows (and chooses) that broker."""

    async def scenario() -> None:
        reached = await landings("", 5)
        assert reached == [reached[0]] * 5

    run(scenario)
