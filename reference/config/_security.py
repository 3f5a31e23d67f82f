"""Authentication and authorization as an Artemis instance does them.

Authentication (``SecurityStoreImpl.authenticate`` and JAAS):

* security disabled: everyone is let in, with or without credentials;
* the ``cluster-user`` (with the ``cluster-password``) is let in with every permission, and with
  a wrong password is refused without asking the login modules;
* otherwise the modules of the JAAS domain decide, with the JAAS flags: a failing ``requisite``
  refuses at once; a failing ``required`` refuses at the end; the first ``sufficient`` success
  (with no ``required`` failure before it) admits at once; with neither ``required`` nor
  ``requisite`` modules at least one module must succeed.  PropertiesLoginModule admits a known
  user whose plain-text password matches; GuestLoginModule admits anyone as its guest user with
  its guest role (unless ``credentialsInvalidate=true`` and a password was given).  So anonymous
  access exists only when security is off or a GuestLoginModule is configured -- and, as in
  Artemis, a wrong password then falls through to the guest identity when the guest module is
  ``sufficient`` after the properties module.
* a connection that presented a client certificate is authenticated by the certificate domain's
  modules when ``bootstrap.xml`` names one (``ActiveMQJAASSecurityManager``), by the main domain's
  otherwise; TextFileCertificateLoginModule admits the user whose DN is the certificate's subject
  (``reference._tls.subject_dn``; an exact DN first, then the first ``/regex/`` that matches it
  whole) with that user's roles.  The credentials of CREATESESSION play no part there, but the
  cluster user's are checked first, as everywhere.

Authorization (``SecurityStoreImpl.check``): the most specific security-setting match for the
address (see :mod:`._wildcard`) alone decides; the principal needs one of its roles that has the
permission.  No match: refused.  For a fully qualified queue name, an exact match on
``address::queue`` takes precedence over the address's match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

from .._tls import subject_dn
from ._model import BrokerConfig, LoginConfig, LoginFlag, LoginModule, Permission, SecuritySetting
from ._wildcard import matches_in_order

__all__ = ["Principal", "SecurityModel"]


@dataclass(frozen=True)
class Principal:
    """Who a session is: the validated user name (``None``: anonymous, security disabled), its
    roles, and whether it is the cluster user (every permission) or a guest login."""

    user: str | None
    roles: frozenset[str] = frozenset()
    cluster: bool = False
    guest: bool = False


class SecurityModel:
    """Authentication and authorization over a :class:`BrokerConfig` (and its ``login``)."""

    def __init__(self, config: BrokerConfig, login: LoginConfig | None = None) -> None:
        self.config = config
        self.login = login if login is not None else config.login

    @property
    def enabled(self) -> bool:
        return self.config.security_enabled

    @property
    def anonymous_allowed(self) -> bool:
        return not self.enabled or (self.login is not None and self.login.guest_module is not None)

    @property
    def guest_role(self) -> str | None:
        guest = None if self.login is None else self.login.guest_module
        return None if guest is None else guest.guest_role

    # ------------------------------------------------------------------ authentication

    def authenticate(self, user: str | None, password: str | None,
                     certificate: x509.Certificate | None = None) -> Principal | None:
        """The principal for these credentials (and the client certificate the connection presented, if any),
        or ``None`` when the broker refuses them."""
        if not self.enabled:
            return Principal(user)
        if user is not None and user == self.config.cluster_user:
            if password == self.config.cluster_password:
                return Principal(user, cluster=True)
            return None
        if self.login is None:
            return None
        name: str | None = None
        roles: set[str] = set()
        guest = False
        required_failed = False
        has_required = False
        succeeded = False
        modules = self.login.modules
        if certificate is not None and self.login.certificate_domain is not None:
            modules = self.login.certificate_modules
        dn = None if certificate is None else subject_dn(certificate)
        for module in modules:
            result = _try_module(module, user, password, dn)
            if module.flag in (LoginFlag.REQUIRED, LoginFlag.REQUISITE):
                has_required = True
                if result is None:
                    if module.flag is LoginFlag.REQUISITE:
                        return None
                    required_failed = True
                    continue
            elif result is None or (module.flag is LoginFlag.SUFFICIENT and required_failed):
                continue
            succeeded = True
            module_user, module_roles = result
            if name is None:
                name = module_user
                guest = module.kind == "guest"
            roles |= module_roles
            if module.flag is LoginFlag.SUFFICIENT:
                break
        if required_failed or not (succeeded or has_required):
            return None
        return Principal(name, frozenset(roles), guest=guest)

    # ------------------------------------------------------------------ authorization

    def setting_for(self, address: str) -> SecuritySetting | None:
        """The security setting that decides for ``address`` (the most specific match)."""
        settings = self.config.security_settings
        order = matches_in_order(address, [s.match for s in settings])
        if not order:
            return None
        return next(s for s in settings if s.match == order[0])

    def authorize(self, principal: Principal, permission: Permission, address: str, queue: str | None = None) -> bool:
        if not self.enabled or principal.cluster:
            return True
        setting = self.setting_for(address)
        if queue is not None:
            fqqn = f"{address}::{queue}"
            exact = next((s for s in self.config.security_settings if s.match == fqqn), None)
            if exact is not None:
                setting = exact
        if setting is None:
            return False
        return bool(setting.roles_with(permission) & principal.roles)


def _certificate_user(module: LoginModule, dn: str) -> str | None:
    """The user TextFileCertificateLoginModule finds for ``dn``: an exact DN first, then a ``/regex/``."""
    patterns = [(name, v[1:-1]) for name, v in module.certificate_users if len(v) > 1 and v[0] == v[-1] == "/"]
    exact = [(name, v) for name, v in module.certificate_users if (name, v[1:-1]) not in patterns]
    found = next((name for name, value in exact if value == dn), None)
    return found or next((name for name, pattern in patterns if re.fullmatch(pattern, dn)), None)


def _try_module(module: LoginModule, user: str | None, password: str | None,
                dn: str | None = None) -> tuple[str, frozenset[str]] | None:
    if module.kind == "certificate":
        # the module reads the certificate only: no certificate, or a DN no user has, fails the login
        name = None if dn is None else _certificate_user(module, dn)
        if name is None:
            return None
        return name, module.users[name].roles
    if module.kind == "properties":
        if user is None:
            return None
        entry = module.users.get(user)
        if entry is None or entry.password is None:
            return None
        if entry.password != (password or ""):
            return None
        return user, entry.roles
    if module.kind == "guest":
        if module.credentials_invalidate and password is not None:
            return None
        return module.guest_user, frozenset({module.guest_role})
    return None
