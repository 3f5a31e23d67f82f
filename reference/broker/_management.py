"""Management requests: a core message sent to ``activemq.management``, read as Artemis's management service reads
it (Artemis user manual, Management: the management message API).  The request names a resource
(``_AMQ_ResourceName``) and either an attribute to read (``_AMQ_Attribute``) or an operation to invoke
(``_AMQ_OperationName``); the answer is a TEXT message whose body is a JSON array holding the one result, with
``_AMQ_OperationSucceeded`` saying whether there is a result or the reason there is none, sent to the request's
``JMSReplyTo`` (``queue://`` and the other JMS prefixes taken off, as Artemis does).  The request itself is routed
nowhere.

The reference answers the attributes of queues (resource ``queue.<name>``) a client needs to look at a queue;
every other attribute, resource and operation is answered "not succeeded" with the reason, which is how Artemis
answers one it does not know.  (The cluster's own request, ``sendQueueInfoToQueue`` from a bridge, is the
cluster hooks' to answer.)  Everything here is a pure function of the request and the queues: the caller routes
the answer, so the caller's transaction and sequencing rules apply to it as to any send.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cck.codec import CoreMessage, MessageType, PropertyType, PropertyValue, TypedProperties

from ._model import Queue

__all__ = ["MANAGEMENT_REPLY_PREFIXES", "ManagementAnswer", "answer_request"]

RESOURCE_KEY = "_AMQ_ResourceName"
ATTRIBUTE_KEY = "_AMQ_Attribute"
OPERATION_KEY = "_AMQ_OperationName"
SUCCEEDED_KEY = "_AMQ_OperationSucceeded"
REPLY_TO_KEY = "JMSReplyTo"
CORRELATION_KEY = "JMSCorrelationID"
QUEUE_RESOURCE = "queue."
#: the JMS destination prefixes a reply-to address may carry, which Artemis takes off before sending the answer
MANAGEMENT_REPLY_PREFIXES = ("queue://", "topic://", "temp-queue://", "temp-topic://")

_ROUTING_NAMES = {0: "MULTICAST", 1: "ANYCAST"}

#: a queue's readable attributes, by the name a request gives (Artemis reads ``getX``/``isX`` of the control, so
#: the first letter may be either case)
_QUEUE_ATTRIBUTES: dict[str, Callable[[Queue], object]] = {
    "name": lambda q: q.name,
    "address": lambda q: q.address,
    "messageCount": lambda q: q.message_count,
    "consumerCount": lambda q: len(q.consumers),
    "durable": lambda q: q.durable,
    "temporary": lambda q: q.temporary,
    "filter": lambda q: q.filter_string,
    "routingType": lambda q: _ROUTING_NAMES.get(q.routing_type, str(q.routing_type)),
    "maxConsumers": lambda q: q.max_consumers,
    "purgeOnNoConsumers": lambda q: q.purge_on_no_consumers,
    "autoCreated": lambda q: q.auto_created,
}


@dataclass(frozen=True)
class ManagementAnswer:
    """The answer to send and where to (``address`` None: the request named no reply-to; nothing is sent)."""

    message: CoreMessage
    address: str | None


def _string(properties: TypedProperties, key: str) -> str | None:
    value = properties.get(key) if properties else None
    return None if value is None else str(value)


def _reply_address(request: CoreMessage) -> str | None:
    reply_to = _string(request.properties, REPLY_TO_KEY)
    if reply_to is None:
        return None
    for prefix in MANAGEMENT_REPLY_PREFIXES:
        if reply_to.startswith(prefix):
            return reply_to[len(prefix):]
    return reply_to


def _attribute(queues: Mapping[str, Queue], resource: str | None, attribute: str) -> tuple[bool, object]:
    if resource is None or not resource.startswith(QUEUE_RESOURCE):
        return False, f"the reference broker has no management resource {resource!r}"
    queue = queues.get(resource[len(QUEUE_RESOURCE):])
    if queue is None:
        return False, f"no queue named {resource[len(QUEUE_RESOURCE):]!r}"
    read = _QUEUE_ATTRIBUTES.get(attribute[:1].lower() + attribute[1:])
    if read is None:
        return False, f"queues have no attribute {attribute!r} in the reference broker"
    return True, read(queue)


def answer_request(request: CoreMessage, queues: Mapping[str, Queue], message_id: int) -> ManagementAnswer:
    """The answer to ``request`` (a message to the management address), with ``message_id`` for its ID."""
    resource = _string(request.properties, RESOURCE_KEY)
    operation = _string(request.properties, OPERATION_KEY)
    attribute = _string(request.properties, ATTRIBUTE_KEY)
    succeeded: bool
    result: object
    if operation is not None:
        succeeded, result = False, f"the reference broker implements no management operation {operation!r}"
    elif attribute is not None:
        succeeded, result = _attribute(queues, resource, attribute)
    else:  # Artemis answers a request naming neither with an empty body and no success flag
        succeeded, result = False, None
    entries: list[tuple[str, PropertyType, PropertyValue]] = []
    asked = operation is not None or attribute is not None
    if asked:
        entries.append((SUCCEEDED_KEY, PropertyType.BOOLEAN, succeeded))
    reply_to = _string(request.properties, REPLY_TO_KEY)
    if reply_to is not None:  # the answer names it again, as Artemis's does
        entries.append((REPLY_TO_KEY, PropertyType.STRING, reply_to))
    correlation = _string(request.properties, CORRELATION_KEY)
    if correlation is not None:
        entries.append((CORRELATION_KEY, PropertyType.STRING, correlation))
    elif request.user_id is not None:  # Artemis falls back to the request's user ID, printed as Java prints a UUID
        entries.append((CORRELATION_KEY, PropertyType.STRING, str(uuid.UUID(bytes=request.user_id))))
    # a JSON array of the one result; a request asking nothing gets an empty body
    body = CoreMessage.text_body(None if result is None else json.dumps([result], separators=(",", ":"),
                                                                         ensure_ascii=False)) if asked else b""
    message = CoreMessage(body=body, message_id=message_id, type=MessageType.TEXT,
                          properties=TypedProperties.typed(*entries))
    return ManagementAnswer(message, _reply_address(request))
