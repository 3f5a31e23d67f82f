"""What an authenticated session may do: the permission checks of the session packets and the refusal they answer.

The broker does not know the roles or the ``security-settings``: whoever assembles it (``reference.__main__``)
gives :class:`~._settings.BrokerSettings` an authenticator, which turns credentials into an opaque principal, and
an authoriser, which says whether that principal holds a permission on an address (and queue).  Without an
authoriser every session may do everything (security disabled, or a test's settings).

Rules of this module:
* A check comes before the operation changes anything, at the point where Artemis makes it (``ServerSessionImpl``
  and ``ActiveMQServerImpl.destroyQueue``); the handlers call :meth:`Authorization.check` there.
* A refusal is a :class:`BrokerError` of type SECURITY_EXCEPTION (105) with Artemis's text: AMQ229032 names the
  address, AMQ229213 the queue and its address (``SecurityStoreImpl.check``).
* The user a refusal names is the one the client gave, or else the principal's (a guest login), or ``null``
  (Artemis 2.33 on; before, the one the client gave or ``null``).
* A session that logged in with the cluster credentials holds every permission (Artemis skips the check for the
  cluster user); the broker makes that principal itself (:class:`BrokerLogin`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cck.codec import ExceptionType

from ._errors import BrokerError
from ._model import split_fqqn

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["Authenticator", "Authorization", "Authorizer", "BrokerLogin", "CertificateAuthenticator", "CheckType",
           "Principal"]


class CheckType(enum.StrEnum):
    """The permissions a check asks for, spelled as Artemis's ``CheckType`` (and its refusals) spell them."""

    SEND = "SEND"
    CONSUME = "CONSUME"
    BROWSE = "BROWSE"
    MANAGE = "MANAGE"
    CREATE_ADDRESS = "CREATE_ADDRESS"
    DELETE_ADDRESS = "DELETE_ADDRESS"
    CREATE_DURABLE_QUEUE = "CREATE_DURABLE_QUEUE"
    DELETE_DURABLE_QUEUE = "DELETE_DURABLE_QUEUE"
    CREATE_NON_DURABLE_QUEUE = "CREATE_NON_DURABLE_QUEUE"
    DELETE_NON_DURABLE_QUEUE = "DELETE_NON_DURABLE_QUEUE"

    @classmethod
    def create_queue(cls, durable: bool) -> CheckType:
        return cls.CREATE_DURABLE_QUEUE if durable else cls.CREATE_NON_DURABLE_QUEUE

    @classmethod
    def delete_queue(cls, durable: bool) -> CheckType:
        return cls.DELETE_DURABLE_QUEUE if durable else cls.DELETE_NON_DURABLE_QUEUE


class Principal(Protocol):
    """Who a session is, as the authenticator made it; the broker reads only the user name (for refusals)."""

    @property
    def user(self) -> str | None: ...


#: (user, password) -> the principal, or ``None`` to refuse the login
Authenticator = Callable[[str | None, str | None], Principal | None]
#: (user, password, the client certificate the connection presented, DER) -> the principal, or ``None`` to refuse
CertificateAuthenticator = Callable[[str | None, str | None, bytes], Principal | None]
#: (principal, permission, address, queue or ``None``) -> granted?
Authorizer = Callable[[Principal, str, str, str | None], bool]


@dataclass(frozen=True)
class BrokerLogin:
    """A principal the broker makes itself: when it has no authenticator (the ``users`` of its settings, or
    anonymous), and for the cluster user (``every_permission``)."""

    user: str | None
    every_permission: bool = False


class Authorization:
    """The permission checks, through the authoriser of the settings (``None``: everything is allowed)."""

    def __init__(self, authorizer: Authorizer | None) -> None:
        self._authorizer = authorizer

    def check(self, session: Session, check: CheckType, address: str, queue: str | None = None) -> None:
        """Refuse (raise) unless the session's principal holds ``check`` on ``address`` (and ``queue``).  A fully
        qualified name (``address::queue``) is checked as its address and queue, as Artemis does."""
        if self._authorizer is None:
            return
        address, queue = _bare(address, queue)
        principal = session.principal
        if isinstance(principal, BrokerLogin) and principal.every_permission:
            return
        if principal is not None and self._authorizer(principal, check.value, address, queue):
            return
        user = session.username if session.username is not None or principal is None else principal.user
        raise _refusal(user, check, address, queue)

    def auto_create(self, session: Session, address: str, *, queue: bool) -> None:
        """A send is about to create ``address`` (and, anycast, its durable queue of the same name).  Both are
        checked before either is created, the address first, as Artemis 2.29 on does (it creates the address
        before it checks the queue, so there a refused queue leaves the address behind; 2.28 checked the queue,
        then the address, and created nothing when refused).  The queue's refusal names the queue."""
        self.check(session, CheckType.CREATE_ADDRESS, address)
        if queue:
            self.check(session, CheckType.CREATE_DURABLE_QUEUE, address, address)


def _refusal(user: str | None, check: CheckType, address: str, queue: str | None = None) -> BrokerError:
    """The SECURITY_EXCEPTION Artemis answers a refused check with (a missing user reads ``null``, as in Java)."""
    who = "null" if user is None else user
    if queue is None:
        text = f"AMQ229032: User: {who} does not have permission='{check.value}' on address {address}"
    else:
        text = f"AMQ229213: User: {who} does not have permission='{check.value}' for queue {queue} on address {address}"
    return BrokerError(ExceptionType.SECURITY_EXCEPTION, text)


def _bare(address: str, queue: str | None) -> tuple[str, str | None]:
    """The address and queue parts of names that may be fully qualified (``address::queue``)."""
    address_part, fq_queue = split_fqqn(address)
    if address_part is not None:
        address, queue = address_part, queue if queue is not None else fq_queue
    return address, None if queue is None else split_fqqn(queue)[1]
