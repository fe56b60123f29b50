"""A value type only a custom payload converter knows (``binary/money``), as
``test/integration/fixtures/converters/money.ts``: a run must get a real ``Money`` back from a
dispatch and from a fast-forward alike. Sandbox-safe: the workflow side builds the converter too."""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import CompositePayloadConverter, DefaultPayloadConverter, EncodingPayloadConverter

ENCODING = "binary/money"


class Money:
    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.cents, self.currency) == (other.cents, other.currency)

    def __hash__(self) -> int:
        return hash((self.cents, self.currency))


class _MoneyConverter(EncodingPayloadConverter):
    @property
    def encoding(self) -> str:
        return ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        if not isinstance(value, Money):
            return None
        return Payload(metadata={"encoding": ENCODING.encode()}, data=f"{value.cents} {value.currency}".encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        cents, currency = payload.data.decode().split(" ")
        return Money(int(cents), currency)


class MoneyPayloadConverter(CompositePayloadConverter):
    """The default converters, with ``Money`` first."""

    def __init__(self) -> None:
        super().__init__(_MoneyConverter(), *DefaultPayloadConverter.default_encoding_payload_converters)
