"""Artemis's address wildcard syntax, as security-settings and address-settings matches use it.

Words are separated by ``.``; ``*`` stands for exactly one word and ``#`` for any number of words
(zero included): ``news.#`` matches ``news``, ``news.europe`` and ``news.europe.sport``;
``news.*`` matches ``news.europe`` only; ``#`` alone matches every address.  Artemis rejects a
match with ``#`` anywhere but at its end.

When several matches apply, Artemis orders them (``HierarchicalObjectRepository``):

1. an exact match (a match without wildcards equal to the address) first;
2. then the wildcard matches, those without ``#`` before those with ``#``;
3. among two matches with ``#``: the longer one first;
4. among two matches with ``*`` (and no ``#``): one without ``*`` first; otherwise, word by word,
   the one whose word is not ``*`` where the other's is comes first, and a match with more words
   comes first when one is a prefix of the other; otherwise the shorter one first.

Security settings use only the first (most specific) match; address settings merge them all in
that order.  One deliberate difference: Artemis turns a match into a regular expression escaping
only ``.`` and ``$``, so other regex characters in a match act as regex syntax there; here every
character other than ``*`` and ``#`` is literal.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = ["invalid_match_reason", "is_wild", "matches", "matches_in_order"]

DELIMITER = "."
SINGLE_WORD = "*"
ANY_WORDS = "#"


def is_wild(match: str) -> bool:
    return SINGLE_WORD in match or ANY_WORDS in match


def invalid_match_reason(match: str) -> str | None:
    """Why Artemis refuses ``match`` (``None``: it is valid)."""
    if ANY_WORDS in match and match.index(ANY_WORDS) < len(match) - 1:
        return "'#' may only be the last character of a match"
    return None


@functools.lru_cache(maxsize=1024)
def _pattern(match: str) -> re.Pattern[str]:
    if match == ANY_WORDS:
        return re.compile(r".*", re.DOTALL)
    # "a.#" means the same as "a#": "a" and everything below it
    text = match.replace(DELIMITER + ANY_WORDS, ANY_WORDS)
    out: list[str] = []
    for ch in text:
        if ch == SINGLE_WORD:
            out.append(f"[^{re.escape(DELIMITER)}]+")
        elif ch == ANY_WORDS:
            out.append(f"(?:{re.escape(DELIMITER)}.+)*")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def matches(match: str, address: str) -> bool:
    """Whether ``match`` (wildcards allowed) applies to ``address``."""
    if not is_wild(match):
        return match == address
    return _pattern(match).fullmatch(address) is not None


def _compare(a: str, b: str) -> int:
    if (ANY_WORDS in a) != (ANY_WORDS in b):
        return 1 if ANY_WORDS in a else -1
    if ANY_WORDS in a:  # both
        return len(b) - len(a)
    if (SINGLE_WORD in a) != (SINGLE_WORD in b):
        return 1 if SINGLE_WORD in a else -1
    if SINGLE_WORD in a:  # both
        left, right = a.split(DELIMITER), b.split(DELIMITER)
        for i, word in enumerate(left):
            if i >= len(right):
                return -1
            if word == SINGLE_WORD and right[i] != SINGLE_WORD:
                return 1
            if word != SINGLE_WORD and right[i] == SINGLE_WORD:
                return -1
    return len(a) - len(b)


def matches_in_order(address: str, candidates: Iterable[str]) -> list[str]:
    """The candidates that apply to ``address``, most specific first (see the module doc)."""
    exact: list[str] = []
    wild: list[str] = []
    for m in candidates:
        if not is_wild(m):
            if m == address:
                exact.append(m)
        elif matches(m, address):
            wild.append(m)
    return exact[:1] + sorted(wild, key=functools.cmp_to_key(_compare))
