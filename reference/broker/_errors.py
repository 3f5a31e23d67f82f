"""Errors the broker answers with an EXCEPTION packet."""

from __future__ import annotations

from cck.codec import ExceptionType

__all__ = ["BrokerError"]


class BrokerError(Exception):
    """A request the broker refuses; ``code`` is the ActiveMQExceptionType sent back."""

    def __init__(self, code: ExceptionType | int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
