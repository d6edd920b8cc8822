"""The usage ledger's records: ``calls.jsonl``, one record per model call (schema, identity, cost).

The client (:mod:`memcost.llm.ledger`) writes these records; analysis reads them with
:func:`read_calls` and prices them here, without importing the client. Cost tables are computed
from these records and :mod:`memcost.prices`, never typed in.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from memcost.io import read_jsonl
from memcost.prices import UnknownPriceError, price_for

OFFLINE = "offline"  # backend and provider name in every offline record

# Ledger stage labels (docs/architecture.md, calls.jsonl).
STAGES = ("extract", "update", "embed", "read", "long_context", "judge")

# The record schema (docs/architecture.md), in this order; the request's tags follow.
BASE_FIELDS = (
    "timestamp",
    "stage",
    "provider",
    "model",
    "backend",
    "request_hash",
    "prompt_version",
    "cached",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "attempts",
    "error",
    "sample_index",
)
# Fields a record has only when the provider reports them: ``billed_usd`` (the provider's own
# charge, OpenRouter's ``usage.cost``) and ``served_by`` (the upstream that served the call).
# They are facts about the call, not tags: they take no part in its identity.
# ``execution`` is how the call was sent when not interactively (``batch``: the Batch API,
# ``flex``: Flex processing), which sets its price (memcost.prices.ModelPrice.cost).
# ``repaired`` marks a record rebuilt from the cache by repair-ledger: how it was written.
OPTIONAL_FIELDS = ("billed_usd", "served_by", "execution", "repaired")
# Tags every record has (null when the stage did not set them), so the table has fixed columns.
STANDARD_TAGS = ("dataset", "conversation_id", "question_id", "system")
RESERVED_FIELDS = BASE_FIELDS + OPTIONAL_FIELDS


def canonical_json(obj: Any) -> str:
    """One text per value: sorted keys, no whitespace, UTF-8 kept as is, no NaN."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise_tags(tags: Mapping[str, Any]) -> dict[str, Any]:
    """Tags as they will read back from the JSONL file (standard tags first, JSON types)."""
    merged = {name: None for name in STANDARD_TAGS}
    merged.update(tags)
    return json.loads(json.dumps(merged, ensure_ascii=False, default=str))


def call_key(request_hash: str, tags: Mapping[str, Any]) -> str:
    """Identity of one logical call in a run: the same request asked for two different items
    (two systems giving the same answer to the judge) is two calls."""
    return sha256_hex(request_hash + "\n" + canonical_json(normalise_tags(tags)))


def record_call_key(record: Mapping[str, Any]) -> str:
    tags = {k: v for k, v in record.items() if k not in RESERVED_FIELDS}
    return sha256_hex(str(record.get("request_hash")) + "\n" + canonical_json(tags))


def read_calls(path: str | os.PathLike[str], *, missing_ok: bool = True) -> list[dict[str, Any]]:
    """The records of one ledger file, in the order they were written."""
    return read_jsonl(path, missing_ok=missing_ok)


def record_cost(
    record: Mapping[str, Any], price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> float | None:
    """Dollars of one record: what the provider billed where it reported it (``billed_usd``),
    else the list price of its usage (``None`` when the model has no price)."""
    billed = record.get("billed_usd")
    if billed is not None:
        return float(billed)
    return list_cost(record, price_overrides)


def list_cost(
    record: Mapping[str, Any], price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> float | None:
    """List-price dollars of one record's usage (``None`` when the model has no price)."""
    try:
        price = price_for(str(record["model"]), price_overrides)
    except UnknownPriceError:
        return None
    prompt = int(record.get("prompt_tokens") or 0)
    return price.cost(
        prompt_tokens=prompt,
        cached_prompt_tokens=min(int(record.get("cached_prompt_tokens") or 0), prompt),
        completion_tokens=int(record.get("completion_tokens") or 0),
        batch=record.get("execution") == "batch",
        flex=record.get("execution") == "flex",
    )


def is_paid(record: Mapping[str, Any]) -> bool:
    """Did this call cost money in this run (sent to a real API, not served from the cache)?

    A failed call is paid when tokens were billed for it: a reply cut off by its output limit,
    withheld by a filter or refused still used (and charged) its prompt and output."""
    if record.get("backend") == OFFLINE or record.get("cached"):
        return False
    if not record.get("error"):
        return True
    return bool(record.get("prompt_tokens") or record.get("completion_tokens"))


def spent_usd(
    records: Iterable[Mapping[str, Any]],
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> float:
    """Dollars the records' run paid (cached and offline calls cost nothing)."""
    return sum(record_cost(r, price_overrides) or 0.0 for r in records if is_paid(r))
