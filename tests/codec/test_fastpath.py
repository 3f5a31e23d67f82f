"""The hand-written fast paths agree with the construct formats exactly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cck.codec import (
    CodecError,
    NullResponseMessage,
    PacketsConfirmedMessage,
    SessionAcknowledgeMessage,
    SessionConsumerFlowCreditMessage,
    SessionIndividualAcknowledgeMessage,
    SessionProducerCreditsMessage,
    SessionReceiveMessage,
    SessionRequestProducerCreditsMessage,
    SessionSendMessage,
    decode_body,
    encode_body,
    encode_packet,
)
from cck.codec import _fastpath as fast
from cck.codec._constants import COMPATIBLE_VERSIONS
from cck.codec._format import field_values, parse_format

from .strategies import packets_of

VERSIONS = st.sampled_from([0, *COMPATIBLE_VERSIONS])
CASES = [
    (SessionSendMessage, fast.decode_send, fast.encode_send),
    (SessionReceiveMessage, fast.decode_receive, fast.encode_receive),
    (PacketsConfirmedMessage, fast.decode_confirmed, fast.encode_confirmed),
    (NullResponseMessage, fast.decode_null_response, fast.encode_null_response),
    (SessionProducerCreditsMessage, fast.decode_producer_credits, fast.encode_producer_credits),
    (SessionRequestProducerCreditsMessage, fast.decode_request_credits, fast.encode_request_credits),
    (SessionAcknowledgeMessage, fast.decode_acknowledge, fast.encode_acknowledge),
    (SessionIndividualAcknowledgeMessage, fast.decode_individual_acknowledge, fast.encode_individual_acknowledge),
    (SessionConsumerFlowCreditMessage, fast.decode_flow_credit, fast.encode_flow_credit),
]
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _slow_decode(cls: type, body: bytes, version: int) -> object:
    fields = parse_format(cls.FORMAT, body, what=cls.type_name(), version=version)
    return cls.from_fields(fields)


@pytest.mark.parametrize(("cls", "decode", "encode"), CASES, ids=lambda c: getattr(c, "__name__", ""))
@SETTINGS
@given(data=st.data(), version=VERSIONS)
def test_fast_path_matches_format(cls: type, decode: object, encode: object, data: st.DataObject, version: int) -> None:
    packet = data.draw(packets_of(cls))
    slow_bytes = encode_body(packet, version=version)
    fast_bytes = encode(packet, version)  # type: ignore[operator]
    assert fast_bytes is None or fast_bytes == slow_bytes
    fast_packet = decode(slow_bytes, version)  # type: ignore[operator]
    assert fast_packet is None or fast_packet == _slow_decode(cls, slow_bytes, version)


@pytest.mark.parametrize(("cls", "decode", "encode"), CASES, ids=lambda c: getattr(c, "__name__", ""))
@SETTINGS
@given(data=st.data(), version=VERSIONS)
def test_fast_path_accepts_only_what_the_format_accepts(
    cls: type, decode: object, encode: object, data: st.DataObject, version: int
) -> None:
    body = bytearray(encode_body(data.draw(packets_of(cls)), version=version))
    for _ in range(data.draw(st.integers(0, 3))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    body = body[: data.draw(st.integers(0, len(body)))]
    fast_packet = decode(bytes(body), version)  # type: ignore[operator]
    try:
        slow = _slow_decode(cls, bytes(body), version)
    except CodecError:
        assert fast_packet is None
    else:
        assert fast_packet is None or fast_packet == slow
        assert decode_body(int(cls.TYPE), bytes(body), version=version) == slow


def test_fast_encoder_defers_unrepresentable_values_to_the_format() -> None:
    from cck.codec import CoreMessage, EncodeError, PropertyType, TypedProperties

    bad = CoreMessage(properties=TypedProperties.typed(("x", PropertyType.INT, 2**40)))
    assert fast.encode_send(SessionSendMessage(bad), 136) is None
    with pytest.raises(EncodeError, match="properties"):
        encode_packet(SessionSendMessage(bad), 10)
    assert field_values(PacketsConfirmedMessage(3)) == {"command_id": 3}


@SETTINGS
@given(data=st.data())
def test_stored_message_encoding_matches_the_format(data: st.DataObject) -> None:
    from cck.codec import decode_message, encode_message
    from cck.codec._structures import encode_message as encode_with_format

    from .strategies import core_messages

    message = data.draw(core_messages())
    assert encode_message(message) == encode_with_format(message)
    assert decode_message(encode_message(message)) == message
