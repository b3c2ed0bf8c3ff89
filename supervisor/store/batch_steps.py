"""Steps on the batch tier as the store keeps them (SPEC 20): which provider batch each step's
request went in, written before the batch is sent; the book both backends keep them in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grove.supervisor.errors import StoreError
from grove.supervisor.store.codec import describe, encode_json, validate_record

HEX_NAME = r"^[0-9a-f]{8,64}$"


class BatchStepRecord(BaseModel):
    """One step's request in a provider batch. `account` names the API key it went with (a
    fingerprint: never the key); `batch_id` is the vendor's, None until the batch is sent."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    step: str = Field(pattern=HEX_NAME)
    agent: str = Field(min_length=1, max_length=200)
    provider: Literal["anthropic", "openai", "google"]
    account: str = Field(pattern=HEX_NAME)
    attempt: int = Field(ge=1, le=1000)
    batch_id: str | None = Field(default=None, min_length=1, max_length=400)
    sent_at: float = Field(ge=0)

    @property
    def custom_id(self) -> str:
        """The request's name in its batch: the step and which try it is."""
        return f"{self.step}-{self.attempt}"


def encoded_steps(records: Sequence[BatchStepRecord]) -> dict[str, str]:
    """Each step's record as the stores write it (JSON), checked again (one made with
    model_construct skips its checks); StoreError when one is not a valid record or a step
    comes twice, and nothing is written."""
    checked: dict[str, BatchStepRecord] = {}
    for record in records:
        try:
            again = BatchStepRecord.model_validate(record.model_dump())
        except (ValidationError, AttributeError) as exc:
            reason = describe(exc) if isinstance(exc, ValidationError) else "not a record"
            raise StoreError(f"Invalid batch step: {reason}; nothing was written") from exc
        if again.step in checked:
            raise StoreError(f"Batch step {again.step} given twice; nothing was written")
        checked[again.step] = again
    return {
        step: encode_json(record.model_dump(), "a batch step") for step, record in checked.items()
    }


def stored_step(raw: str | bytes, step: str) -> BatchStepRecord:
    """A stored step read back, or StoreError naming it (its key and body must agree)."""
    record = validate_record(BatchStepRecord, raw, f"batch step {step}")
    if record.step != step:
        raise StoreError(f"Corrupted batch step {step} in the store: it names {record.step}")
    return record


class BatchStepBook(Protocol):
    """The steps on the batch tier a store keeps, by step."""

    def put(self, records: Sequence[BatchStepRecord]) -> None:
        """Write these steps (replacing the stored ones of the same step) in one write."""
        ...

    def drop(self, steps: Collection[str]) -> None:
        """Forget these steps (those not stored are ignored)."""
        ...

    def all(self) -> list[BatchStepRecord]:
        """Every stored step, by step."""
        ...
