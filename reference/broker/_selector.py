"""Message selectors: the SQL-92 subset Artemis uses for queue and consumer filters.

``compile_selector("color = 'red' AND weight > 2")`` returns a predicate over a :class:`CoreMessage`;
a malformed selector raises :class:`SelectorError` naming the position.  Evaluation uses SQL's
three-valued logic: a missing property is NULL, a comparison with NULL (or between a number and a
string) is unknown, and a message is selected only when the whole expression is TRUE.

Supported: literals (strings in single quotes with ``''`` for a quote, integers, decimals and
exponents, TRUE/FALSE), identifiers (message properties, and the headers AMQPriority,
AMQTimestamp, AMQExpiration, AMQDurable, AMQAddress, AMQUserID, AMQSize with their JMS aliases),
``+ - * /``, ``= <> < <= > >=``, ``[NOT] BETWEEN a AND b``, ``[NOT] IN ('a', ...)``,
``[NOT] LIKE 'pat' [ESCAPE 'c']``, ``IS [NOT] NULL``, ``NOT``, ``AND``, ``OR`` and parentheses.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from cck.codec import CoreMessage

__all__ = ["Selector", "SelectorError", "compile_selector"]

Value = bool | int | float | str | bytes | None
Term = Callable[[CoreMessage], Value]
Selector = Callable[[CoreMessage], bool]


class SelectorError(ValueError):
    """A selector that does not parse; ``position`` is the offset of the offending text."""

    def __init__(self, text: str, position: int, problem: str) -> None:
        self.text, self.position = text, position
        super().__init__(f"{problem} at offset {position} of selector {text!r}")


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>'(?:[^']|'')*')
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[lLfFdD]?)
    | (?P<name>[A-Za-z_$][A-Za-z0-9_$.]*)
    | (?P<op><>|<=|>=|[=<>+\-*/(),])
    )""", re.VERBOSE)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE"}


@dataclass(frozen=True)
class _Token:
    kind: str  # string, number, name, keyword, op, end
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise SelectorError(text, at + len(text[at:]) - len(text[at:].lstrip()), "unexpected character")
        kind = match.lastgroup or "op"
        value = match.group(kind)
        start = match.start(kind)
        if kind == "name" and value.upper() in _KEYWORDS:
            kind, value = "keyword", value.upper()
        out.append(_Token(kind, value, start))
        at = match.end()
    out.append(_Token("end", "", len(text)))
    return out


def _header(name: str) -> Term | None:
    headers: dict[str, Term] = {
        "AMQPriority": lambda m: m.priority, "JMSPriority": lambda m: m.priority,
        "AMQTimestamp": lambda m: m.timestamp, "JMSTimestamp": lambda m: m.timestamp,
        "AMQExpiration": lambda m: m.expiration, "JMSExpiration": lambda m: m.expiration,
        "AMQDurable": lambda m: "DURABLE" if m.durable else "NON_DURABLE",
        "JMSDeliveryMode": lambda m: "PERSISTENT" if m.durable else "NON_PERSISTENT",
        "AMQAddress": lambda m: m.address,
        "AMQUserID": lambda m: None if m.user_id is None else f"ID:{uuid.UUID(bytes=m.user_id)}",
        "JMSMessageID": lambda m: None if m.user_id is None else f"ID:{uuid.UUID(bytes=m.user_id)}",
        "AMQSize": lambda m: len(m.body),
    }  # fmt: skip
    return headers.get(name)


def _number(value: Value) -> int | float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _like(pattern: str, escape: str | None) -> re.Pattern[str]:
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if escape is not None and char == escape and index + 1 < len(pattern):
            out.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        out.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.index = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def _take(self, kind: str, text: str | None = None) -> _Token | None:
        token = self.token
        if token.kind == kind and (text is None or token.text == text):
            self.index += 1
            return token
        return None

    def _expect(self, kind: str, text: str | None = None, what: str = "") -> _Token:
        token = self._take(kind, text)
        if token is None:
            found = self.token.text or "the end"
            raise SelectorError(self.text, self.token.at, f"expected {what or text or kind}, found {found!r}")
        return token

    def parse(self) -> Term:
        term = self._or()
        if self.token.kind != "end":
            raise SelectorError(self.text, self.token.at, f"unexpected {self.token.text!r}")
        return term

    def _or(self) -> Term:
        term = self._and()
        while self._take("keyword", "OR"):
            left, right = term, self._and()
            term = functools.partial(_or, left, right)
        return term

    def _and(self) -> Term:
        term = self._not()
        while self._take("keyword", "AND"):
            left, right = term, self._not()
            term = functools.partial(_and, left, right)
        return term

    def _not(self) -> Term:
        if self._take("keyword", "NOT"):
            inner = self._not()
            return lambda m: None if (v := inner(m)) is None or not isinstance(v, bool) else not v
        return self._comparison()

    def _comparison(self) -> Term:
        left = self._additive()
        negate = bool(self._take("keyword", "NOT"))
        term: Term
        if self._take("keyword", "BETWEEN"):
            low = self._additive()
            self._expect("keyword", "AND")
            high = self._additive()
            term = functools.partial(_between, left, low, high)
        elif self._take("keyword", "IN"):
            self._expect("op", "(")
            options = [self._string()]
            while self._take("op", ","):
                options.append(self._string())
            self._expect("op", ")")
            term = functools.partial(_in, left, frozenset(options))
        elif self._take("keyword", "LIKE"):
            pattern = self._string()
            escape = self._string() if self._take("keyword", "ESCAPE") else None
            if escape is not None and len(escape) != 1:
                raise SelectorError(self.text, self.tokens[self.index - 1].at, "ESCAPE takes one character")
            term = functools.partial(_matches, left, _like(pattern, escape))
        elif not negate and self._take("keyword", "IS"):
            is_not = bool(self._take("keyword", "NOT"))
            self._expect("keyword", "NULL")
            return (lambda m: left(m) is not None) if is_not else (lambda m: left(m) is None)
        elif not negate and self.token.kind == "op" and self.token.text in ("=", "<>", "<", "<=", ">", ">="):
            op = self._expect("op").text
            return functools.partial(_compare, op, left, self._additive())
        elif negate:
            raise SelectorError(self.text, self.token.at, "expected BETWEEN, IN or LIKE after NOT")
        else:
            return left
        if negate:
            inner = term
            return lambda m: None if (v := inner(m)) is None else not v
        return term

    def _string(self) -> str:
        token = self._expect("string", what="a string literal")
        return token.text[1:-1].replace("''", "'")

    def _additive(self) -> Term:
        term = self._multiplicative()
        while self.token.kind == "op" and self.token.text in "+-":
            op = self._expect("op").text
            term = functools.partial(_arithmetic, op, term, self._multiplicative())
        return term

    def _multiplicative(self) -> Term:
        term = self._unary()
        while self.token.kind == "op" and self.token.text in "*/":
            op = self._expect("op").text
            term = functools.partial(_arithmetic, op, term, self._unary())
        return term

    def _unary(self) -> Term:
        if self._take("op", "-"):
            inner = self._unary()
            return lambda m: None if (n := _number(inner(m))) is None else -n
        if self._take("op", "+"):
            return self._unary()
        return self._primary()

    def _primary(self) -> Term:
        token = self.token
        if self._take("op", "("):
            term = self._or()
            self._expect("op", ")")
            return term
        if self._take("string"):
            text = token.text[1:-1].replace("''", "'")
            return lambda _m: text
        if self._take("number"):
            literal = _parse_number(token.text)
            return lambda _m: literal
        if self._take("keyword", "TRUE"):
            return lambda _m: True
        if self._take("keyword", "FALSE"):
            return lambda _m: False
        if self._take("name"):
            header = _header(token.text)
            if header is not None:
                return header
            name = token.text
            return lambda m: _property(m, name)
        raise SelectorError(self.text, token.at, f"expected a value, found {token.text or 'the end'!r}")


def _parse_number(text: str) -> int | float:
    if text.lower().startswith("0x"):
        return int(text, 16)
    core = text.rstrip("lLfFdD")
    return float(core) if any(c in core for c in ".eE") else int(core)


def _property(message: CoreMessage, name: str) -> Value:
    value = message.properties.get(name) if message.properties else None
    return value if isinstance(value, bool | int | float | str) else None


def _or(left: Term, right: Term, message: CoreMessage) -> Value:
    a, b = left(message), right(message)
    if a is True or b is True:
        return True
    return False if a is False and b is False else None


def _and(left: Term, right: Term, message: CoreMessage) -> Value:
    a, b = left(message), right(message)
    if a is False or b is False:
        return False
    return True if a is True and b is True else None


def _compare(op: str, left: Term, right: Term, message: CoreMessage) -> Value:
    a, b = left(message), right(message)
    if a is None or b is None:
        return None
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        x, y = na, nb
    elif (isinstance(a, str) and isinstance(b, str)) or (isinstance(a, bool) and isinstance(b, bool)):
        if op not in ("=", "<>"):
            return None
        return (a == b) == (op == "=")
    else:
        return None
    return {"=": x == y, "<>": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _arithmetic(op: str, left: Term, right: Term, message: CoreMessage) -> Value:
    a, b = _number(left(message)), _number(right(message))
    if a is None or b is None:
        return None
    if op == "/":
        if b == 0:
            return None
        return a // b if isinstance(a, int) and isinstance(b, int) else a / b
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def _between(value: Term, low: Term, high: Term, message: CoreMessage) -> Value:
    v, lo, hi = _number(value(message)), _number(low(message)), _number(high(message))
    if v is None or lo is None or hi is None:
        return None
    return lo <= v <= hi


def _in(value: Term, options: frozenset[str], message: CoreMessage) -> Value:
    v = value(message)
    return None if not isinstance(v, str) else v in options


def _matches(value: Term, pattern: re.Pattern[str], message: CoreMessage) -> Value:
    v = value(message)
    return None if not isinstance(v, str) else pattern.fullmatch(v) is not None


@functools.lru_cache(maxsize=1024)
def compile_selector(text: str) -> Selector:
    """The predicate of a selector (cached: queues and consumers share their filters' compiled form)."""
    if not text.strip():
        return lambda _m: True
    term = _Parser(text).parse()
    return lambda message: term(message) is True
