"""The security family of exploration: its model of the configuration (the oracle), its examples and their JSON,
its strategy, and its judge, on hand-made answers (no broker)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cck.conformance.explore import (
    Answer,
    Attempt,
    ExampleError,
    Login,
    SecurityExample,
    example_from_dict,
    family_examples,
    judge_security,
    security_examples,
    security_topology,
)
from cck.conformance.explore._security_oracle import (
    PLACES,
    QUEUES,
    SETTINGS,
    USERS,
    Identity,
    authenticate,
    authorize,
    decides,
    matches,
    shares_cached_name,
)

WIDE = authenticate("strict", "wendy")
BOB = authenticate("strict", "bob")
TARA = authenticate("strict", "tara")


def _place(queue: str) -> int:
    return next(i for i, p in enumerate(PLACES) if p.queue == queue)


# ---------------------------------------------------------------------------------------------------- the model


def test_wildcards_follow_the_manual() -> None:
    # Wildcard Syntax: '#' zero or more words, '*' exactly one
    assert matches("news.europe.#", "news.europe")
    assert matches("news.europe.#", "news.europe.politics.regional")
    assert not matches("news.europe.#", "news.usa")
    assert matches("news.*", "news.europe")
    assert not matches("news.*", "news.europe.sport")
    assert not matches("news.*", "news")
    assert matches("news.*.sport", "news.usa.sport")
    assert matches("#", "anything.at.all")


def test_the_most_specific_setting_decides() -> None:
    assert decides("cck.sx.a.b") == "cck.sx.a.b.#"  # the longer '#' match
    assert decides("cck.sx.a.b.c") == "cck.sx.a.b.#"
    assert decides("cck.sx.a") == "cck.sx.a.#"  # '#' matches zero words
    assert decides("cck.sx.a.x") == "cck.sx.a.#"
    assert decides("cck.sx.s.x") == "cck.sx.s.*"  # a '*' match before '#'
    assert decides("cck.sx.s.x.y") == "#"  # '*' is one word only
    assert decides("cck.sx.f") == "cck.sx.f"  # exact
    assert decides("cck.sx.f", "sx-f1") == "cck.sx.f::sx-f1"  # the FQQN setting, for its queue only
    assert decides("cck.sx.f", "sx-f2") == "cck.sx.f"


def test_no_ambiguous_match() -> None:
    """Every address of the name space is decided by matches of kinds the manual orders (an exact one, one '*'
    match, '#' matches of different lengths), so the model never relies on an order it does not cite."""
    for address in {p.address for p in PLACES}:
        wild = [m for m in SETTINGS if "::" not in m and m != address and matches(m, address)]
        stars = [m for m in wild if "*" in m]
        hashes = [m for m in wild if "#" in m]
        assert len(stars) <= 1, (address, stars)
        assert len({len(m.split(".")) for m in hashes}) == len(hashes), (address, hashes)


def test_no_legacy_dotted_queue_setting() -> None:
    """Artemis retries a refused consumer under a setting matching exactly 'address.queue' (ARTEMIS-592's
    pre-FQQN syntax): none of the settings may be one, or the retry would decide instead."""
    for place in QUEUES:
        assert f"{place.address}.{place.queue}" not in SETTINGS


@pytest.mark.parametrize(
    ("realm", "credentials", "user"),
    [
        ("strict", "wendy", "wendy"),
        ("strict", "wendy-wrong", None),
        ("strict", "bob-empty", None),
        ("strict", "stranger", None),
        ("strict", "anonymous", None),
        ("guest", "wendy", "wendy"),
        ("guest", "wendy-wrong", "guest"),
        ("guest", "bob-empty", "guest"),
        ("guest", "stranger", "guest"),
        ("guest", "anonymous", "guest"),
    ],
)
def test_authentication(realm: str, credentials: str, user: str | None) -> None:
    identity = authenticate(realm, credentials)  # type: ignore[arg-type]
    assert (identity.user if identity else None) == user


def test_permissions_the_mutants_confuse() -> None:
    assert WIDE is not None
    assert BOB is not None
    assert TARA is not None
    # browse without consume
    assert authorize(BOB, "browse", "cck.sx.a.x", "cck.sx.a.x")
    assert not authorize(BOB, "consume", "cck.sx.a.x", "cck.sx.a.x")
    # non-durable without durable
    assert authorize(TARA, "createNonDurableQueue", "cck.sx.a", "cck.sx.a-new")
    assert not authorize(TARA, "createDurableQueue", "cck.sx.a", "cck.sx.a-new")
    # the more specific block takes nothing from the less specific one
    assert authorize(WIDE, "send", "cck.sx.a.x")
    assert not authorize(WIDE, "send", "cck.sx.a.b")
    # '*' one word: s.x under s.*, s.x.y under '#' only
    assert authorize(WIDE, "send", "cck.sx.s.x")
    assert not authorize(WIDE, "send", "cck.sx.s.x.y")
    # the FQQN setting decides for its queue, not for the address's other queue
    assert not authorize(WIDE, "consume", "cck.sx.f", "sx-f1")
    assert authorize(WIDE, "consume", "cck.sx.f", "sx-f2")


def test_the_configuration_renders_as_the_model_reads_it() -> None:
    strict, guest = security_topology("strict").security, security_topology("guest").security
    assert strict.enabled
    assert guest.enabled
    assert strict.guest_role is None
    assert guest.guest_role == "guests"
    assert {u.name for u in strict.users} == {u.name for u in USERS}
    rules = {(r.match, r.permission): set(r.roles) for r in strict.effective_rules()}
    for match, grants in SETTINGS.items():
        for permission, roles in grants.items():
            assert rules[(match, permission)] == {"admin", *roles}


def test_cached_name_deviation_only_in_the_guest_realm() -> None:
    guest_as_wendy = authenticate("guest", "wendy-wrong")
    assert guest_as_wendy is not None
    assert guest_as_wendy.claimed == "wendy"
    # wendy may create a non-durable queue under s.*, the guest role may not; under '#' neither may
    assert shares_cached_name("guest", guest_as_wendy, "createNonDurableQueue", "cck.sx.s.x", "cck.sx.s.x-new")
    assert not shares_cached_name("guest", guest_as_wendy, "createNonDurableQueue", "cck.sx.s.x.y", "cck.sx.s.x.y-new")
    anonymous = authenticate("guest", "anonymous")
    assert anonymous is not None
    assert not shares_cached_name("guest", anonymous, "createNonDurableQueue", "cck.sx.s.x", "cck.sx.s.x-new")
    assert WIDE is not None
    assert not shares_cached_name("strict", WIDE, "consume", "cck.sx.s.x", "cck.sx.s.x")


# ---------------------------------------------------------------------------------------------------- examples


def test_example_json_round_trip_and_describe() -> None:
    example = SecurityExample(
        "guest",
        (
            Login(
                "wendy-wrong", (Attempt("browse", _place("sx-f1")), Attempt("create-non-durable", _place("sx-f-new")))
            ),
            Login("anonymous"),
        ),
    )
    data = example.to_dict()
    assert data["family"] == "security"
    assert example_from_dict(data) == example
    assert example.describe() == (
        "security (guest): login wendy-wrong, browse cck.sx.f::sx-f1, "
        "create-non-durable cck.sx.f::sx-f-new; login anonymous"
    )
    assert example.size == (2, 2)


@pytest.mark.parametrize(
    "data",
    [
        {"family": "security", "realm": "open", "logins": [{"credentials": "wendy", "attempts": []}]},
        {"family": "security", "realm": "strict", "logins": []},
        {"family": "security", "realm": "strict", "logins": [{"credentials": "mallory", "attempts": []}]},
        {
            "family": "security",
            "realm": "strict",
            "logins": [{"credentials": "wendy", "attempts": [{"action": "send", "place": len(QUEUES)}]}],
        },
        {
            "family": "security",
            "realm": "strict",
            "logins": [{"credentials": "wendy", "attempts": [{"action": "create-durable", "place": 0}]}],
        },
        {
            "family": "security",
            "realm": "strict",
            "logins": [{"credentials": "wendy", "attempts": [{"action": "delete", "place": 0}]}],
        },
    ],
)
def test_malformed_examples_are_refused(data: object) -> None:
    with pytest.raises(ExampleError):
        example_from_dict(data)


@settings(max_examples=60, deadline=None)
@given(security_examples())
def test_drawn_examples_round_trip(example: SecurityExample) -> None:
    assert example_from_dict(example.to_dict()) == example


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_both_families_are_drawn(data: st.DataObject) -> None:
    drawn = [data.draw(family_examples(security=True)) for _ in range(20)]
    assert all(example_from_dict(e.to_dict()) == e for e in drawn)


@settings(max_examples=30, deadline=None)
@given(family_examples(security=False))
def test_without_security_only_the_reliability_family(example: object) -> None:
    assert not isinstance(example, SecurityExample)


# ---------------------------------------------------------------------------------------------------- the judge


def _judged(example: SecurityExample, *answered: tuple[int, int | None, str]) -> list[str]:
    answers = [Answer(login, attempt, what) for login, attempt, what in answered]  # type: ignore[arg-type]
    return list(judge_security(example, answers).findings)


def test_judge_a_conforming_run_is_clean() -> None:
    example = SecurityExample(
        "strict",
        (
            Login("bob", (Attempt("browse", _place("cck.sx.a.x")), Attempt("consume", _place("cck.sx.a.x")))),
            Login("wendy-wrong", (Attempt("send", 0),)),
        ),
    )
    assert (
        _judged(
            example, (0, None, "allowed"), (0, 0, "allowed"), (0, 1, "refused"), (1, None, "refused"), (1, 0, "skipped")
        )
        == []
    )


def test_judge_a_required_login_that_is_let_in() -> None:
    example = SecurityExample("strict", (Login("wendy-wrong", (Attempt("send", 0),)),))
    findings = _judged(example, (0, None, "allowed"), (0, 0, "refused"))
    assert len(findings) == 1
    assert "must be refused" in findings[0]


def test_judge_a_guest_refused() -> None:
    example = SecurityExample("guest", (Login("stranger"),))
    findings = _judged(example, (0, None, "refused"))
    assert len(findings) == 1
    assert "must be allowed" in findings[0]


@pytest.mark.parametrize(
    ("credentials", "attempt", "wrong"),
    [
        ("bob", Attempt("browse", _place("cck.sx.a.x")), "refused"),  # browse checked as consume
        ("tara", Attempt("create-non-durable", _place("cck.sx.a-new")), "refused"),  # non-durable checked as durable
        ("wendy", Attempt("send", _place("cck.sx.a.b")), "allowed"),  # the least specific match
        ("wendy", Attempt("send", _place("cck.sx.s.x.y")), "allowed"),  # '*' over several words
        ("wendy", Attempt("consume", _place("sx-f2")), "refused"),  # the FQQN setting for every queue
    ],
)
def test_judge_each_mutants_wrong_answer(credentials: str, attempt: Attempt, wrong: str) -> None:
    example = SecurityExample("strict", (Login(credentials, (attempt,)),))
    assert len(_judged(example, (0, None, "allowed"), (0, 0, wrong))) == 1
    right = "refused" if wrong == "allowed" else "allowed"
    assert _judged(example, (0, None, "allowed"), (0, 0, right)) == []


def test_judge_names_the_cache_deviation() -> None:
    example = SecurityExample(
        "guest", (Login("wendy"), Login("wendy-wrong", (Attempt("create-non-durable", _place("cck.sx.s.x-new")),)))
    )
    findings = _judged(example, (0, None, "allowed"), (1, None, "allowed"), (1, 0, "allowed"))
    assert len(findings) == 1
    assert "security.anonymous.3" in findings[0]
    assert findings[0].endswith("[security.anonymous]")  # what --ignore-clause security.anonymous sets aside
    # a refusal where the model allows is never the deviation (it only ever grants more)
    example = SecurityExample("guest", (Login("wendy-wrong", (Attempt("send", _place("cck.sx.a.x")),)),))
    findings = _judged(example, (0, None, "allowed"), (0, 0, "refused"))
    assert len(findings) == 1
    assert "security.anonymous.3" not in findings[0]
    assert not findings[0].endswith("]")


def test_judge_leaves_unknown_answers_and_a_wrong_login_be() -> None:
    example = SecurityExample(
        "strict", (Login("wendy", (Attempt("send", 0),)), Login("stranger", (Attempt("send", 0),)))
    )
    judgement = judge_security(
        example,
        [
            Answer(0, None, "allowed"),
            Answer(0, 0, "unknown", "timeout"),
            Answer(1, None, "allowed"),
            Answer(1, 0, "allowed"),
        ],
    )
    assert len(judgement.findings) == 1  # the login; the send after it is not judged
    assert len(judgement.notes) == 2


# ---------------------------------------------------------------------------------------------------- the runner


def test_answers_are_classified_by_the_refusals_type() -> None:
    from cck.codec import ExceptionType
    from cck.conformance.explore._security_runner import _classified
    from cck.reference.client import BrokerRefused, CallTimeout

    assert (
        _classified(BrokerRefused(ExceptionType.SECURITY_EXCEPTION, "AMQ229032", "CREATE_QUEUE"), True)[0] == "refused"
    )
    # the security check comes before the existence check: an existing queue was let past it
    assert _classified(BrokerRefused(ExceptionType.QUEUE_EXISTS, "AMQ229019", "CREATE_QUEUE"), True)[0] == "allowed"
    assert _classified(BrokerRefused(ExceptionType.QUEUE_EXISTS, "AMQ229019", "CREATE_CONSUMER"), False)[0] == "error"
    assert _classified(CallTimeout("send", 3000), False)[0] == "unknown"


# ---------------------------------------------------------------------------------------------------- the suite


def _suite_settings() -> dict[str, dict[str, tuple[str, ...]]]:
    from cck.conformance.suite._security_kit import FQQN_RULES, RULES

    settings: dict[str, dict[str, tuple[str, ...]]] = {}
    for rule in (*RULES, *FQQN_RULES):
        settings.setdefault(rule.match, {})[rule.permission] = rule.roles
    return settings


def _suite_user(name: str) -> Identity:
    from cck.conformance.suite._security_kit import USERS as SUITE_USERS

    user = next(u for u in SUITE_USERS if u.name == name)
    return Identity(user.name, frozenset(user.roles), user.name)


@pytest.mark.parametrize(
    ("suffix", "allowed"),
    [("plain", True), ("narrow.one", False), ("narrow.exact", True), ("star.one", False), ("star.one.two", True)],
)
def test_the_model_agrees_with_the_suites_match_cases(suffix: str, allowed: bool) -> None:
    """security.match.1-5: the send of the user granted send on match.#, consume only on match.narrow.# and
    match.star.*, and send again on match.narrow.exact."""
    settings = _suite_settings()
    assert authorize(_suite_user("matcher"), "send", f"cck.sec.match.{suffix}", settings=settings) is allowed


@pytest.mark.parametrize(("queue", "allowed"), [("cck.sec.fqqn.q1", True), ("cck.sec.fqqn.q2", False)])
def test_the_model_agrees_with_the_suites_fqqn_cases(queue: str, allowed: bool) -> None:
    """security.fqqn.1-2: consume granted on the FQQN of the address's first queue only."""
    settings = _suite_settings()
    assert authorize(_suite_user("fqqn"), "consume", "cck.sec.fqqn.address", queue, settings=settings) is allowed


@pytest.mark.parametrize(
    "permission", ["send", "consume", "browse", "createDurableQueue", "createNonDurableQueue", "createAddress"]
)
def test_the_model_agrees_with_the_suites_authorization_cases(permission: str) -> None:
    """security.authz: a user holding only the permission may, one holding every other one may not."""
    settings = _suite_settings()
    address = f"cck.sec.authz.{permission}.x"
    assert authorize(_suite_user(f"only-{permission}"), permission, address, f"{address}.q", settings=settings)
    assert not authorize(_suite_user(f"all-but-{permission}"), permission, address, f"{address}.q", settings=settings)
