"""The Batch API's files: the JSONL of requests we upload, and the output and error files.

An input line is ``{"custom_id", "method": "POST", "url", "body"}``; ``custom_id`` is the
request's cache key, so a result goes back to its request (and into the disk cache) by that
key alone. One file holds requests to one model and one URL, at most 50,000 lines and 200 MB
(the API's limits), and at most the model's enqueued-token limit when one is given: a batch
above it fails validation.

An output line is ``{"custom_id", "response": {"status_code", "body"}, "error"}``. The error
file holds the requests that failed (an HTTP error in ``response``), and those never run
(``response`` null, ``error.code`` ``batch_expired`` or ``batch_cancelled``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CHAT_URL = "/v1/chat/completions"
EMBEDDINGS_URL = "/v1/embeddings"
MAX_REQUESTS = 50_000  # lines per input file
MAX_BYTES = 200 * 1024 * 1024  # bytes per input file
COMPLETION_WINDOW = "24h"
# Statuses worth asking again: the request never ran, or the server failed on it.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Line:
    """One request as a line of an input file."""

    key: str  # the request's cache key, sent as custom_id
    model: str
    url: str
    data: bytes  # the JSON line, newline included
    tokens: int  # prompt tokens, against the model's enqueued-token limit


def request_line(key: str, model: str, url: str, body: Mapping[str, Any], tokens: int) -> Line:
    record = {"custom_id": key, "method": "POST", "url": url, "body": dict(body)}
    data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    return Line(key, model, url, data, tokens)


def split_lines(
    lines: Sequence[Line],
    *,
    max_requests: int = MAX_REQUESTS,
    max_bytes: int = MAX_BYTES,
    max_tokens: int | None = None,
) -> list[list[Line]]:
    """``lines`` (of one model and URL) cut, in order, into files within the limits.

    A single line above ``max_tokens`` gets a file of its own (the API judges it, not us)."""
    parts: list[list[Line]] = []
    current: list[Line] = []
    size = tokens = 0
    for line in lines:
        full = current and (
            len(current) >= max_requests
            or size + len(line.data) > max_bytes
            or (max_tokens is not None and tokens + line.tokens > max_tokens)
        )
        if full:
            parts.append(current)
            current, size, tokens = [], 0, 0
        current.append(line)
        size += len(line.data)
        tokens += line.tokens
    if current:
        parts.append(current)
    return parts


@dataclass(frozen=True)
class Answer:
    """One line of an output or error file."""

    key: str
    status: int | None  # the request's HTTP status (None: it never ran)
    body: dict[str, Any] | None  # the response body (an answer, or the API's error)
    message: str  # why it failed ("" for an answer)

    @property
    def ok(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict)

    @property
    def retryable(self) -> bool:
        """Asking again may help: it expired, was cancelled, or the server failed on it."""
        return self.status is None or self.status in RETRYABLE_STATUSES


def read_answers(text: str) -> list[Answer]:
    """The lines of an output or error file (blank or torn lines are skipped)."""
    out = []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(line, dict) or "custom_id" not in line:
            continue
        response = line.get("response") or None
        error = line.get("error") or None
        status = int(response["status_code"]) if response and "status_code" in response else None
        body = response.get("body") if response else None
        message = ""
        if error:
            message = f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
        elif status != 200:
            inner = (body or {}).get("error", body) if isinstance(body, dict) else body
            said = inner.get("message") if isinstance(inner, dict) else inner
            message = f"HTTP {status}: {str(said)[:300]}"
        out.append(Answer(str(line["custom_id"]), status, body, message))
    return out


def chat_reply(body: Mapping[str, Any]) -> dict[str, Any]:
    """A chat completion body as the client's reply dict (what an interactive call returns)."""
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage = body.get("usage")
    parsed = None
    if usage:
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        parsed = {
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "cached_prompt_tokens": int(prompt_details.get("cached_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0),
        }
    return {
        "text": message.get("content") or "",
        "usage": parsed,
        "served_model": body.get("model"),
        "finish_reason": choice.get("finish_reason"),
        "refusal": message.get("refusal"),
        "billed_usd": None,
        "served_by": None,
    }


def embedding_reply(body: Mapping[str, Any], inputs: int) -> dict[str, Any]:
    """An embeddings body as the client's reply dict; ``ValueError`` when it is not whole."""
    data = sorted(body.get("data") or [], key=lambda d: d.get("index", 0))
    if len(data) != inputs:
        raise ValueError(f"{len(data)} vectors for {inputs} inputs")
    vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
    usage = body.get("usage") or {}
    prompt = usage.get("prompt_tokens")
    return {
        "vectors": vectors,
        "prompt_tokens": None if prompt is None else int(prompt),
        "served_model": body.get("model"),
    }


def joined(lines: Iterable[Line]) -> bytes:
    return b"".join(line.data for line in lines)
