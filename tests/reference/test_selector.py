"""The reference broker's message selectors: SQL-92 three-valued logic over properties and headers."""

from __future__ import annotations

import pytest

from cck.codec import CoreMessage, TypedProperties
from cck.reference.broker._selector import SelectorError, compile_selector

MESSAGE = CoreMessage(
    b"12345", address="orders", durable=True, priority=7,
    properties=TypedProperties.of(color="red", weight=3, price=2.5, vip=True, note="it's"),
)  # fmt: skip


@pytest.mark.parametrize(("selector", "selected"), [
    ("color = 'red'", True),
    ("color = 'blue'", False),
    ("color <> 'blue'", True),
    ("weight > 2 AND price < 3", True),
    ("weight > 5 OR color = 'red'", True),
    ("NOT (weight > 5)", True),
    ("weight BETWEEN 1 AND 3", True),
    ("weight NOT BETWEEN 1 AND 3", False),
    ("color IN ('green', 'red')", True),
    ("color NOT IN ('green', 'red')", False),
    ("color LIKE 'r_d'", True),
    ("color LIKE 'b%'", False),
    ("note LIKE 'it''s'", True),
    ("color LIKE 'r!%' ESCAPE '!'", False),
    ("missing IS NULL", True),
    ("color IS NOT NULL", True),
    ("vip = TRUE", True),
    ("weight * 2 + 1 = 7", True),
    ("weight / 2 = 1", True),  # integer division, as Java's
    ("-weight < 0", True),
    ("AMQPriority = 7 AND AMQDurable = 'DURABLE' AND AMQAddress = 'orders' AND AMQSize = 5", True),
    ("JMSPriority >= 5 AND JMSDeliveryMode = 'PERSISTENT'", True),
    ("0x10 = 16 AND 1.5e1 = 15", True),
    # unknown (NULL) is not selected, and NOT unknown is still unknown
    ("missing = 1", False),
    ("NOT (missing = 1)", False),
    ("missing = 1 OR color = 'red'", True),
    ("missing = 1 AND color = 'blue'", False),
    ("color > 'a'", False),  # strings compare only for equality
    ("color = 3", False),  # a string and a number: unknown
    ("", True),
])  # fmt: skip
def test_selection(selector: str, selected: bool) -> None:
    assert compile_selector(selector)(MESSAGE) is selected


@pytest.mark.parametrize(("selector", "offset"), [
    ("color = ", 8),
    ("color = 'red", 8),
    ("(weight > 1", 11),
    ("color IN (1)", 10),
    ("weight NOT = 3", 11),
    ("color LIKE 'x' ESCAPE 'ab'", 22),
    ("weight > 1 weight", 11),
    ("color # 1", 6),
])  # fmt: skip
def test_a_malformed_selector_names_where(selector: str, offset: int) -> None:
    with pytest.raises(SelectorError) as caught:
        compile_selector(selector)
    assert caught.value.position == offset
    assert f"offset {offset}" in str(caught.value)
