"""The security files an Artemis instance keeps beside ``broker.xml``.

* ``login.config``: the JAAS configuration; the domain (``activemq`` unless ``bootstrap.xml``
  names another in ``<jaas-security domain="...">``) lists login modules with their flags.
  PropertiesLoginModule, GuestLoginModule and TextFileCertificateLoginModule are implemented; any
  other module is reported and never logs anyone in.
* ``<jaas-security certificate-domain="...">`` names a second domain of the file: a connection that
  presented a client certificate is authenticated there instead (Artemis's "Dual Authentication").
* TextFileCertificateLoginModule's users file (option ``org.apache.activemq.jaas.textfiledn.user``)
  maps user names to subject DNs, each the exact string ``reference._tls.subject_dn`` makes or
  ``/regex/`` (the whole DN must match; an invalid one is reported and ignored); its roles file
  (``...textfiledn.role``) is ``role = user,user`` like the properties module's.
* ``artemis-users.properties`` (``user = password``) and ``artemis-roles.properties``
  (``role = user1,user2``): Java properties files, named by the PropertiesLoginModule options
  ``org.apache.activemq.jaas.properties.user`` / ``.role`` and resolved against the directory
  of ``login.config``.  A hashed ``ENC(...)`` password is reported: the reference broker does not
  verify hashes, so that user cannot log in.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType

from lxml import etree

from ._errors import ConfigError, ConfigWarning
from ._model import LoginConfig, LoginFlag, LoginModule, UserEntry

__all__ = ["DEFAULT_DOMAIN", "load_login_config", "parse_login_config", "parse_properties"]

DEFAULT_DOMAIN = "activemq"
_JAAS = "org.apache.activemq.artemis.spi.core.security.jaas."
PROPERTIES_MODULE = _JAAS + "PropertiesLoginModule"
GUEST_MODULE = _JAAS + "GuestLoginModule"
USER_FILE_OPTION = "org.apache.activemq.jaas.properties.user"
ROLE_FILE_OPTION = "org.apache.activemq.jaas.properties.role"
GUEST_USER_OPTION = "org.apache.activemq.jaas.guest.user"
GUEST_ROLE_OPTION = "org.apache.activemq.jaas.guest.role"
CERTIFICATE_MODULE = _JAAS + "TextFileCertificateLoginModule"
DN_USER_FILE_OPTION = "org.apache.activemq.jaas.textfiledn.user"
DN_ROLE_FILE_OPTION = "org.apache.activemq.jaas.textfiledn.role"
# PropertiesLoginModule's fallback file names when the options are absent (PropertiesLoader)
_USER_FILE_FALLBACK = "user"
_ROLE_FILE_FALLBACK = "role"
# options the two implemented modules read; anything else is reported
_KNOWN_OPTIONS = {
    "properties": {USER_FILE_OPTION, ROLE_FILE_OPTION, "debug", "reload", "baseDir"},
    "guest": {GUEST_USER_OPTION, GUEST_ROLE_OPTION, "debug", "credentialsInvalidate"},
    "certificate": {DN_USER_FILE_OPTION, DN_ROLE_FILE_OPTION, "debug", "reload", "baseDir"},
}


# --------------------------------------------------------------------------- Java properties


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> list[tuple[str, str, int]]:
    """A Java ``.properties`` file as ``(key, value, line)``, in file order (java.util.Properties
    syntax: ``#``/``!`` comments, ``=``, ``:`` or blank as separator, ``\\`` continuations)."""
    entries: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        logical = lines[i].lstrip()
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while (len(logical) - len(logical.rstrip("\\"))) % 2 == 1 and i < len(lines):
            logical = logical[:-1] + lines[i].lstrip()
            i += 1
        j = 0
        while j < len(logical):
            if logical[j] == "\\":
                j += 2
                continue
            if logical[j] in "=: \t\f":
                break
            j += 1
        key = logical[:j]
        # the separator: blanks, at most one '=' or ':', blanks
        rest = logical[j:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        entries.append((_unescape(key), _unescape(rest), start + 1))
    return entries


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror}", file=str(path)) from None


def _is_hashed(password: str) -> bool:
    # PasswordMaskingUtil.isEncMasked: ENC( ... )
    return password.startswith("ENC(") and password.endswith(")")


def _load_roles(roles_file: Path, warnings: list[ConfigWarning]) -> dict[str, set[str]]:
    roles: dict[str, set[str]] = {}
    if roles_file.exists():
        for role, value, _line in parse_properties(_read(roles_file, "roles file")):
            for user in value.split(","):
                if user.strip():
                    roles.setdefault(user.strip(), set()).add(role.strip())
    else:
        warnings.append(ConfigWarning("login.config", roles_file.name, "roles file not found: users have no roles",
                                      str(roles_file)))
    return roles


def _load_users(
    users_file: Path, roles_file: Path, warnings: list[ConfigWarning]
) -> MappingProxyType[str, UserEntry]:
    passwords: dict[str, tuple[str, int]] = {}
    for key, value, line in parse_properties(_read(users_file, "users file")):
        passwords[key] = (value, line)
    roles = _load_roles(roles_file, warnings)
    users: dict[str, UserEntry] = {}
    for name, (password, line) in passwords.items():
        if _is_hashed(password):
            warnings.append(ConfigWarning(
                users_file.name, name,
                f"user '{name}' has a hashed password (ENC(...)); the reference broker does not verify hashed "
                "passwords, so this user cannot log in (store the password in plain text to use it)",
                str(users_file), line,
            ))
            users[name] = UserEntry(name, None, frozenset(roles.get(name, ())))
        else:
            users[name] = UserEntry(name, password, frozenset(roles.get(name, ())))
    return MappingProxyType(users)


def _load_certificate_users(users_file: Path, roles_file: Path, warnings: list[ConfigWarning]
                            ) -> tuple[tuple[tuple[str, str], ...], MappingProxyType[str, UserEntry]]:
    """``(user, DN)`` of TextFileCertificateLoginModule's users file, and each user's roles (no password)."""
    dns: dict[str, str] = {}
    for name, dn, line in parse_properties(_read(users_file, "certificate users file")):
        if len(dn) > 1 and dn.startswith("/") and dn.endswith("/"):
            try:
                re.compile(dn[1:-1])
            except re.error as exc:
                warnings.append(ConfigWarning(users_file.name, name, f"invalid regular expression {dn!r} ({exc}): "
                                              "ignored, as Artemis ignores it", str(users_file), line))
                continue
        dns[name] = dn
    roles = _load_roles(roles_file, warnings)
    users = {name: UserEntry(name, None, frozenset(roles.get(name, ()))) for name in dns}
    return tuple(dns.items()), MappingProxyType(users)


# --------------------------------------------------------------------------- login.config

_TOKEN = re.compile(r'\s+|/\*.*?\*/|//[^\n]*|"(?:[^"\\]|\\.)*"|[{};=]|[^\s{};="]+', re.DOTALL)


def _tokens(text: str, file: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    pos = 0
    while pos < len(text):
        m = None if text.startswith("/*", pos) and "*/" not in text[pos + 2 :] else _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise ConfigError("cannot read login.config (unterminated comment or quote?)", file=file, line=line,
                              found=text[pos : pos + 20])
        tok = m.group(0)
        line = text.count("\n", 0, pos) + 1
        pos = m.end()
        if tok.isspace() or tok.startswith(("/*", "//")):
            continue
        out.append((tok, line))
    return out


def parse_login_config(
    text: str, *, domain: str = DEFAULT_DOMAIN, file: str = "login.config"
) -> dict[str, list[tuple[str, str, dict[str, str], int]]]:
    """The domains of a JAAS file: ``{domain: [(class, flag, options, line), ...]}``."""
    toks = _tokens(text, file)
    domains: dict[str, list[tuple[str, str, dict[str, str], int]]] = {}
    i = 0

    def expect(value: str) -> None:
        nonlocal i
        if i >= len(toks) or toks[i][0] != value:
            found, line = toks[i] if i < len(toks) else ("end of file", None)
            raise ConfigError(f"expected '{value}'", file=file, line=line, found=found)
        i += 1

    while i < len(toks):
        name, _ = toks[i]
        i += 1
        expect("{")
        entries: list[tuple[str, str, dict[str, str], int]] = []
        while i < len(toks) and toks[i][0] != "}":
            cls, line = toks[i]
            if i + 1 >= len(toks):
                raise ConfigError("a login module needs a flag", file=file, line=line, found=cls)
            flag = toks[i + 1][0]
            i += 2
            options: dict[str, str] = {}
            while i < len(toks) and toks[i][0] != ";":
                key = toks[i][0]
                i += 1
                expect("=")
                if i >= len(toks):
                    raise ConfigError("option without a value", file=file, line=line, found=key)
                value = toks[i][0]
                i += 1
                if value.startswith('"'):
                    value = value[1:-1].replace('\\"', '"')
                options[key] = value
            expect(";")
            entries.append((cls, flag, options, line))
        expect("}")
        if i < len(toks) and toks[i][0] == ";":
            i += 1
        domains[name] = entries
    return domains


def _bootstrap_domains(etc: Path) -> tuple[str, str | None]:
    """``<jaas-security domain="..." certificate-domain="...">`` of ``bootstrap.xml`` (the defaults without it)."""
    bootstrap = etc / "bootstrap.xml"
    if not bootstrap.exists():
        return DEFAULT_DOMAIN, None
    try:
        root = etree.parse(str(bootstrap), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
    except etree.XMLSyntaxError as exc:
        raise ConfigError(f"malformed XML: {exc.msg}", file=str(bootstrap), line=exc.lineno) from None
    for el in root.iter():
        if isinstance(el.tag, str) and etree.QName(el).localname == "jaas-security":
            return str(el.get("domain") or DEFAULT_DOMAIN), el.get("certificate-domain") or None
    return DEFAULT_DOMAIN, None


def load_login_config(etc: Path, warnings: list[ConfigWarning], *, domain: str | None = None) -> LoginConfig | None:
    """Read ``login.config`` in ``etc`` (``None`` if there is none)."""
    path = etc / "login.config"
    if not path.exists():
        return None
    configured, certificate_domain = _bootstrap_domains(etc)
    domain = domain or configured
    domains = parse_login_config(_read(path, "login.config"), file=str(path))
    for name in (domain, certificate_domain):
        if name is not None and name not in domains:
            raise ConfigError(f"login.config has no '{name}' domain (it has: {', '.join(domains) or 'none'})",
                              file=str(path))
    certificate = () if certificate_domain is None else _modules(
        certificate_domain, domains[certificate_domain], etc, path, warnings)
    return LoginConfig(domain, _modules(domain, domains[domain], etc, path, warnings), str(path),
                       certificate_domain, certificate)


def _modules(domain: str, entries: list[tuple[str, str, dict[str, str], int]], etc: Path, path: Path,
             warnings: list[ConfigWarning]) -> tuple[LoginModule, ...]:
    modules: list[LoginModule] = []
    for cls, flag_text, options, line in entries:
        try:
            flag = LoginFlag(flag_text.lower())
        except ValueError:
            raise ConfigError("login module flag must be required, requisite, sufficient or optional",
                              file=str(path), line=line, element=cls, found=flag_text) from None
        frozen_options = MappingProxyType(dict(options))
        base = Path(options["baseDir"]) if "baseDir" in options else etc
        if cls == PROPERTIES_MODULE:
            kind = "properties"
            users_file = base / options.get(USER_FILE_OPTION, _USER_FILE_FALLBACK)
            roles_file = base / options.get(ROLE_FILE_OPTION, _ROLE_FILE_FALLBACK)
            if not users_file.exists():
                raise ConfigError("the users file of PropertiesLoginModule does not exist", file=str(path), line=line,
                                  element=USER_FILE_OPTION, found=str(users_file))
            users = _load_users(users_file, roles_file, warnings)
            modules.append(LoginModule(cls, flag, kind, frozen_options, users))
        elif cls == CERTIFICATE_MODULE:
            kind = "certificate"
            users_file = base / options.get(DN_USER_FILE_OPTION, "")
            roles_file = base / options.get(DN_ROLE_FILE_OPTION, "")
            if not users_file.is_file():
                raise ConfigError("the users file of TextFileCertificateLoginModule does not exist", file=str(path),
                                  line=line, element=DN_USER_FILE_OPTION, found=str(users_file))
            dns, users = _load_certificate_users(users_file, roles_file, warnings)
            modules.append(LoginModule(cls, flag, kind, frozen_options, users, certificate_users=dns))
        elif cls == GUEST_MODULE:
            kind = "guest"
            modules.append(LoginModule(
                cls, flag, kind, frozen_options,
                guest_user=options.get(GUEST_USER_OPTION, "guest"),
                guest_role=options.get(GUEST_ROLE_OPTION, "guests"),
                credentials_invalidate=options.get("credentialsInvalidate", "").lower() == "true",
            ))
        else:
            kind = "unsupported"
            warnings.append(ConfigWarning(
                f"login.config/{domain}", cls.rsplit(".", 1)[-1],
                f"unsupported login module '{cls}' ({flag.value}): it never logs anyone in on the reference broker",
                str(path), line,
            ))
            modules.append(LoginModule(cls, flag, kind, frozen_options))
            continue
        for key in options:
            if key not in _KNOWN_OPTIONS[kind]:
                warnings.append(ConfigWarning(
                    f"login.config/{domain}/{cls.rsplit('.', 1)[-1]}", key,
                    f"unsupported login module option '{key}': ignored by the reference broker", str(path), line,
                ))
    return tuple(modules)
