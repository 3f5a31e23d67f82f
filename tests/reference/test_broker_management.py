"""The management message API as the reference answers it (a pure function of the request and the queues): a
queue attribute read, the answer's JSON body and success flag, the reply-to address without its JMS prefix, the
correlation, and the requests it does not implement answered "not succeeded" with the reason."""

from __future__ import annotations

import json
import uuid

import pytest

from cck.codec import CoreMessage, MessageType, PropertyType, RoutingType, TypedProperties
from cck.reference.broker._management import answer_request
from cck.reference.broker._model import Queue


def _queues() -> dict[str, Queue]:
    return {"orders": Queue("orders", "orders", int(RoutingType.ANYCAST), durable=True)}


def _request(*entries: tuple[str, str], user_id: bytes | None = None) -> CoreMessage:
    return CoreMessage(address="activemq.management", user_id=user_id,
                       properties=TypedProperties.typed(*((k, PropertyType.STRING, v) for k, v in entries)))


def test_a_queue_attribute_is_answered_as_a_json_array_to_the_reply_address() -> None:
    answer = answer_request(_request(("_AMQ_ResourceName", "queue.orders"), ("_AMQ_Attribute", "messageCount"),
                                     ("JMSReplyTo", "queue://replies")), _queues(), 42)
    assert answer.address == "replies"
    assert answer.message.message_id == 42
    assert answer.message.type == MessageType.TEXT
    assert answer.message.properties.get("_AMQ_OperationSucceeded") is True
    assert json.loads(answer.message.text or "") == [0]


@pytest.mark.parametrize(("attribute", "expected"), [
    ("MessageCount", 0), ("durable", True), ("routingType", "ANYCAST"), ("address", "orders"), ("filter", None)])
def test_attribute_names_and_values(attribute: str, expected: object) -> None:
    answer = answer_request(_request(("_AMQ_ResourceName", "queue.orders"), ("_AMQ_Attribute", attribute)),
                            _queues(), 1)
    assert answer.address is None  # no reply-to: nothing to send
    assert answer.message.properties.get("_AMQ_OperationSucceeded") is True
    assert answer.message.text == (None if expected is None else json.dumps([expected]))


@pytest.mark.parametrize(("entries", "reason"), [
    ((("_AMQ_ResourceName", "queue.missing"), ("_AMQ_Attribute", "messageCount")), "no queue named 'missing'"),
    ((("_AMQ_ResourceName", "queue.orders"), ("_AMQ_Attribute", "colour")), "no attribute 'colour'"),
    ((("_AMQ_ResourceName", "broker"), ("_AMQ_Attribute", "version")), "no management resource 'broker'"),
    ((("_AMQ_ResourceName", "queue.orders"), ("_AMQ_OperationName", "removeAllMessages")),
     "no management operation 'removeAllMessages'"),
])
def test_what_it_does_not_know_is_not_succeeded_with_the_reason(entries: tuple[tuple[str, str], ...],
                                                                reason: str) -> None:
    answer = answer_request(_request(*entries), _queues(), 1)
    assert answer.message.properties.get("_AMQ_OperationSucceeded") is False
    [text] = json.loads(answer.message.text or "")
    assert reason in text


def test_a_request_asking_nothing_gets_an_empty_answer() -> None:
    answer = answer_request(_request(("JMSReplyTo", "replies")), _queues(), 1)
    assert answer.address == "replies"
    assert answer.message.body == b""
    assert answer.message.properties.get("_AMQ_OperationSucceeded") is None


def test_the_correlation_is_the_requests_or_else_its_user_id() -> None:
    given = answer_request(_request(("JMSCorrelationID", "c-1"), ("_AMQ_Attribute", "x")), _queues(), 1)
    assert given.message.properties.get("JMSCorrelationID") == "c-1"
    user_id = uuid.uuid4()
    derived = answer_request(_request(("_AMQ_Attribute", "x"), user_id=user_id.bytes), _queues(), 1)
    assert derived.message.properties.get("JMSCorrelationID") == str(user_id)
