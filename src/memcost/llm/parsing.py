"""JSON answers: a forgiving parser, and the re-ask sent when a model's reply does not parse.

The re-ask's wording is the prompt ``memcost.prompts.JSON_REASK``; this module only builds the
request from it.

A re-ask is a new request (the bad reply and a short correction appended), so its cache key
differs from the original's and the cache can never hand back the same bad answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memcost.llm.requests import ChatRequest
from memcost.prompts import JSON_REASK

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def parse_json(text: str) -> Any:
    """JSON from a model reply: accepts a bare value, a fenced block, or the outermost
    ``{...}``/``[...]`` inside prose. Raises ``ValueError`` when there is none."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = stripped.find(open_), stripped.rfind(close)
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON value in the reply (starts {stripped[:60]!r})")


def parse_json_object(text: str) -> dict[str, Any]:
    """Like :func:`parse_json`, but the value must be an object."""
    value = parse_json(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def reask_request(previous: ChatRequest, bad_reply: str, error: str, number: int) -> ChatRequest:
    """The ``number``-th re-ask (1-based): ``previous`` (the request that got ``bad_reply``) with
    the reply and a correction appended. Each re-ask extends the last one, so even a model that
    repeats itself word for word never produces the same request twice."""
    correction = JSON_REASK.messages(error=error[:300])
    suffix = f"+{JSON_REASK.id}"
    version = previous.prompt_version
    return previous.replace(
        messages=(*previous.messages, ("assistant", bad_reply), *correction),
        prompt_version=version if version.endswith(suffix) else version + suffix,
        tags={**previous.tags, "reask": number},
    )
