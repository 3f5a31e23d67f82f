"""reference.config security: Artemis wildcard matching and its "most specific match" order,
authorization by security-settings, authentication through login.config (JAAS flags),
artemis-users.properties / artemis-roles.properties."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from cck.reference.config import (
    BrokerConfig,
    ConfigError,
    LoginConfig,
    LoginFlag,
    LoginModule,
    Permission,
    Principal,
    SecurityModel,
    UserEntry,
    load_config,
    matches_in_order,
    parse_broker_xml,
    wildcard_matches,
)
from cck.reference.config._login import parse_login_config, parse_properties

DATA = Path(__file__).parent / "data"

# (match, address, matches?) -- the wildcard syntax chapter's examples and their edges
WILDCARD_CASES = [
    ("#", "anything.at.all", True),
    ("#", "a", True),
    ("news.#", "news", True),
    ("news.#", "news.europe", True),
    ("news.#", "news.europe.sport", True),
    ("news.#", "newsy", False),
    ("news.#", "new", False),
    ("news.#", "sport.news", False),
    ("news#", "news.europe", True),
    ("news.*", "news.europe", True),
    ("news.*", "news", False),
    ("news.*", "news.europe.sport", False),
    ("news.*.sport", "news.europe.sport", True),
    ("news.*.sport", "news.sport", False),
    ("news.*.sport", "news.europe.uk.sport", False),
    ("*.sport", "news.sport", True),
    ("*", "news", True),
    ("*", "news.europe", False),
    ("news.europe", "news.europe", True),
    ("news.europe", "news.europeX", False),
    ("a+b.(c)", "a+b.(c)", True),  # regex characters are literal here
    ("$sys.*", "$sys.x", True),
]


@pytest.mark.parametrize(("match", "address", "expected"), WILDCARD_CASES)
def test_wildcard_syntax(match: str, address: str, expected: bool) -> None:
    assert wildcard_matches(match, address) is expected


ORDER_CASES = [
    (
        "news.europe.sport",
        ["#", "news.#", "news.europe.#", "news.*", "news.*.sport", "news.europe.sport"],
        ["news.europe.sport", "news.*.sport", "news.europe.#", "news.#", "#"],
    ),
    ("a.b.c", ["*.b.c", "a.*.c", "#"], ["a.*.c", "*.b.c", "#"]),
    ("a.b.c", ["a.*.c", "a.b.*"], ["a.b.*", "a.*.c"]),
    ("a.b", ["a.#", "a.b.#", "#"], ["a.b.#", "a.#", "#"]),
    ("x", ["y", "y.#"], []),
]


@pytest.mark.parametrize(("address", "candidates", "expected"), ORDER_CASES)
def test_most_specific_match_first(address: str, candidates: list[str], expected: list[str]) -> None:
    assert matches_in_order(address, candidates) == expected
    assert matches_in_order(address, list(reversed(candidates))) == expected


def _security() -> SecurityModel:
    return SecurityModel(parse_broker_xml(DATA / "security.xml"))


def _p(*roles: str) -> Principal:
    return Principal("u", frozenset(roles))


# (roles, permission, address, queue, allowed?)
AUTHZ_CASES = [
    (("editor",), Permission.SEND, "news", None, True),  # news.# (news.* needs a second word)
    (("editor",), Permission.SEND, "news.uk", None, False),  # news.* beats news.#: only "wire" sends
    (("wire",), Permission.SEND, "news.uk", None, True),
    (("reader",), Permission.CONSUME, "news.uk", None, False),  # the most specific setting alone decides
    (("reader",), Permission.CONSUME, "news.europe.politics", None, True),
    (("eu-editor",), Permission.SEND, "news.europe.politics", None, True),
    (("editor",), Permission.SEND, "news.europe.politics", None, False),
    (("sport-desk",), Permission.SEND, "news.us.sport", None, True),
    (("sport-desk",), Permission.SEND, "news.europe.sport", None, False),  # exact match wins
    (("eu-sport-desk",), Permission.SEND, "news.europe.sport", None, True),
    (("eu-sport-desk",), Permission.CREATE_NON_DURABLE_QUEUE, "news.europe.sport", None, True),  # createTempQueue
    (("admin",), Permission.MANAGE, "anything", None, True),
    (("admin",), Permission.SEND, "news.x", None, False),
    (("reader", "wire"), Permission.SEND, "news.x", None, True),
    (("shop",), Permission.BROWSE, "orders", None, True),
    (("shop",), Permission.BROWSE, "orders", "audit", False),  # the exact FQQN setting wins
    (("auditor",), Permission.BROWSE, "orders", "audit", True),
    (("auditor",), Permission.BROWSE, "orders", None, False),
    (("auditor",), Permission.BROWSE, "orders", "other", False),
    ((), Permission.CONSUME, "anything", None, False),
]


@pytest.mark.parametrize(("roles", "permission", "address", "queue", "allowed"), AUTHZ_CASES)
def test_authorize(roles: tuple[str, ...], permission: Permission, address: str, queue: str | None,
                   allowed: bool) -> None:
    assert _security().authorize(_p(*roles), permission, address, queue) is allowed


def test_every_permission_type_is_read() -> None:
    config = parse_broker_xml(DATA / "security.xml")
    orders = next(s for s in config.security_settings if s.match == "orders")
    (shop,) = orders.roles
    assert shop.permissions == frozenset(Permission) - {Permission.CONSUME, Permission.MANAGE}
    (warning,) = config.warnings
    assert warning.element == "view"
    assert "not supported" in warning.message


def test_no_matching_setting_denies() -> None:
    config = parse_broker_xml(
        '<core xmlns="urn:activemq:core"><security-settings><security-setting match="a.#">'
        '<permission type="send" roles="r"/></security-setting></security-settings></core>'
    )
    security = SecurityModel(config)
    assert security.setting_for("b") is None
    assert not security.authorize(_p("r"), Permission.SEND, "b")
    assert security.authorize(_p("r"), Permission.SEND, "a.b")


def test_cluster_user() -> None:
    security = _security()
    assert security.authenticate("cluster", "wrong") is None
    principal = security.authenticate("cluster", "cluster-pw")
    assert principal is not None
    assert principal.cluster
    assert security.authorize(principal, Permission.DELETE_ADDRESS, "anything")


def test_security_disabled_lets_everyone_do_everything() -> None:
    security = SecurityModel(BrokerConfig(security_enabled=False))
    principal = security.authenticate("whoever", "whatever")
    assert principal is not None
    assert principal.user == "whoever"
    assert security.anonymous_allowed
    assert security.authorize(Principal(None), Permission.MANAGE, "x")


def _users(**users: tuple[str | None, set[str]]) -> MappingProxyType[str, UserEntry]:
    return MappingProxyType({n: UserEntry(n, pw, frozenset(r)) for n, (pw, r) in users.items()})


PROPS = LoginModule("PropertiesLoginModule", LoginFlag.REQUIRED, "properties",
                    users=_users(alice=("pw", {"a"}), hashed=(None, {"a"})))
GUEST = LoginModule("GuestLoginModule", LoginFlag.SUFFICIENT, "guest", guest_user="anon", guest_role="guests")


def _jaas(*modules: LoginModule) -> SecurityModel:
    return SecurityModel(BrokerConfig(), LoginConfig("activemq", modules))


def _flag(module: LoginModule, flag: LoginFlag, **changes: object) -> LoginModule:
    import dataclasses

    return dataclasses.replace(module, flag=flag, **changes)  # type: ignore[arg-type]


def test_required_properties_module() -> None:
    security = _jaas(PROPS)
    alice = security.authenticate("alice", "pw")
    assert alice == Principal("alice", frozenset({"a"}))
    assert security.authenticate("alice", "bad") is None
    assert security.authenticate("bob", "pw") is None
    assert security.authenticate(None, None) is None
    assert security.authenticate("hashed", "") is None
    assert not security.anonymous_allowed


def test_required_failure_is_not_rescued_by_a_sufficient_guest() -> None:
    security = _jaas(PROPS, GUEST)
    assert security.authenticate("alice", "bad") is None
    assert security.authenticate(None, None) is None
    assert security.anonymous_allowed  # configured, but this stack never lets anyone in anonymously


def test_sufficient_stack_as_artemis_create_allow_anonymous() -> None:
    security = _jaas(_flag(PROPS, LoginFlag.SUFFICIENT), GUEST)
    assert security.authenticate("alice", "pw") == Principal("alice", frozenset({"a"}))
    guest = Principal("anon", frozenset({"guests"}), guest=True)
    assert security.authenticate(None, None) == guest
    assert security.authenticate("alice", "bad") == guest


def test_requisite_failure_stops_at_once() -> None:
    security = _jaas(_flag(PROPS, LoginFlag.REQUISITE), GUEST)
    assert security.authenticate(None, None) is None


def test_optional_modules_need_one_success_and_merge_roles() -> None:
    security = _jaas(_flag(PROPS, LoginFlag.OPTIONAL), _flag(GUEST, LoginFlag.OPTIONAL))
    both = security.authenticate("alice", "pw")
    assert both is not None
    assert both.user == "alice"
    assert both.roles == frozenset({"a", "guests"})
    assert security.authenticate(None, None) == Principal("anon", frozenset({"guests"}), guest=True)
    assert _jaas(_flag(PROPS, LoginFlag.OPTIONAL)).authenticate("alice", "bad") is None


def test_guest_credentials_invalidate() -> None:
    security = _jaas(_flag(GUEST, LoginFlag.REQUIRED, credentials_invalidate=True))
    assert security.authenticate(None, None) is not None
    assert security.authenticate("x", "password") is None


def test_login_config_syntax() -> None:
    text = """
    /* block
       comment */
    other { org.example.Module required; };
    // line comment
    activemq {
       org.apache.activemq.artemis.spi.core.security.jaas.PropertiesLoginModule sufficient
           debug=false
           org.apache.activemq.jaas.properties.user="my users.properties"
           org.apache.activemq.jaas.properties.role=roles.properties;
       org.apache.activemq.artemis.spi.core.security.jaas.GuestLoginModule optional;
    };
    """
    domains = parse_login_config(text)
    assert list(domains) == ["other", "activemq"]
    (props, guest) = domains["activemq"]
    assert props[1] == "sufficient"
    assert props[2]["org.apache.activemq.jaas.properties.user"] == "my users.properties"
    assert props[2]["org.apache.activemq.jaas.properties.role"] == "roles.properties"
    assert guest[1:3] == ("optional", {})


def test_properties_syntax() -> None:
    text = "# comment\n! also\na=b\nc : d\ne f\nlong = one, \\\n    two\nk\\=ey = v\nu = \\u0041\nempty=\n"
    assert [(k, v) for k, v, _ in parse_properties(text)] == [
        ("a", "b"), ("c", "d"), ("e", "f"), ("long", "one, two"), ("k=ey", "v"), ("u", "A"), ("empty", ""),
    ]


def _instance(tmp_path: Path, login: str, users: str = "alice=pw\n", roles: str = "a=alice\n",
              bootstrap: str | None = None) -> Path:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "broker.xml").write_bytes((DATA / "security.xml").read_bytes())
    (etc / "login.config").write_text(login, encoding="utf-8")
    (etc / "artemis-users.properties").write_text(users, encoding="utf-8")
    (etc / "artemis-roles.properties").write_text(roles, encoding="utf-8")
    if bootstrap is not None:
        (etc / "bootstrap.xml").write_text(bootstrap, encoding="utf-8")
    return etc / "broker.xml"


_PROPS_ENTRY = (
    "org.apache.activemq.artemis.spi.core.security.jaas.PropertiesLoginModule required "
    'org.apache.activemq.jaas.properties.user="artemis-users.properties" '
    'org.apache.activemq.jaas.properties.role="artemis-roles.properties";'
)


def test_domain_from_bootstrap_xml(tmp_path: Path) -> None:
    login = f"activemq {{ org.example.Nope required; }};\nmine {{ {_PROPS_ENTRY} }};"
    bootstrap = '<broker xmlns="http://activemq.apache.org/schema"><jaas-security domain="mine"/></broker>'
    config = load_config(_instance(tmp_path, login, bootstrap=bootstrap))
    assert config.login is not None
    assert config.login.domain == "mine"
    assert SecurityModel(config).authenticate("alice", "pw") == Principal("alice", frozenset({"a"}))


def test_unsupported_login_module_and_option_are_reported(tmp_path: Path) -> None:
    login = (
        "activemq { org.apache.activemq.artemis.spi.core.security.jaas.LDAPLoginModule sufficient "
        f'connectionURL="ldap://x"; {_PROPS_ENTRY[:-1]} reload=true fancy=yes; }};'
    )
    config = load_config(_instance(tmp_path, login))
    messages = {w.element: w.message for w in config.warnings}
    assert "LDAPLoginModule" in messages
    assert "never logs anyone in" in messages["LDAPLoginModule"]
    assert "fancy" in messages
    assert SecurityModel(config).authenticate("alice", "pw") is not None


@pytest.mark.parametrize(
    ("login", "reason"),
    [
        ("other { x required; };", "no 'activemq' domain"),
        (f"activemq {{ {_PROPS_ENTRY.replace('required', 'mandatory')} }};", "flag must be"),
        ("activemq { x required ", "expected"),
        ("activemq { /* never closed", "unterminated"),
    ],
    ids=["no-domain", "bad-flag", "truncated", "comment"],
)
def test_bad_login_config(tmp_path: Path, login: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_instance(tmp_path, login))
    assert reason in str(info.value)
    assert info.value.file.endswith("login.config")


def test_missing_users_file_is_an_error(tmp_path: Path) -> None:
    broker = _instance(tmp_path, f"activemq {{ {_PROPS_ENTRY} }};")
    (broker.parent / "artemis-users.properties").unlink()
    with pytest.raises(ConfigError, match="users file"):
        load_config(broker)
