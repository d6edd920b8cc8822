"""Per-model rate limits on the local test server, counted and reported the way OpenAI does.

:class:`AccountLimits` holds, for each limited model, a requests-per-minute and a
tokens-per-minute bucket that refill continuously over ``window_s`` (60 s, as the API; a test
or benchmark shortens it to keep the minute short). A request is admitted when its model's
buckets hold one request and its tokens (the prompt's tokens plus the output limit it asks for,
as the API counts before answering); otherwise it gets the API's 429 ``rate_limit_exceeded``
with the limit, the usage, the request and how long to wait in its message. Every answer for a
limited model, 200 or 429, carries ``x-ratelimit-limit-*``, ``x-ratelimit-remaining-*`` and
``x-ratelimit-reset-*`` (the time until the bucket is full again, as ``1s`` / ``6m0s``).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from memcost.text import count_tokens


@dataclass
class _AccountBucket:
    limit: float
    window_s: float
    level: float = math.nan
    at: float = 0.0

    def __post_init__(self) -> None:
        self.level, self.at = self.limit, time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.limit / self.window_s)
        self.at = now

    def wait_s(self, amount: float) -> float:
        return max(0.0, (amount - self.level) * self.window_s / self.limit)

    def reset_s(self) -> float:
        return (self.limit - self.level) * self.window_s / self.limit


def duration(seconds: float) -> str:
    """``0.24`` → ``"240ms"``, ``75.5`` → ``"1m15.5s"``, as the API writes its resets."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    rest = f"{rest:.3g}s"
    return f"{int(minutes)}m{rest}" if minutes else rest


@dataclass
class AccountLimits:
    """``limits``: ``{model: {"rpm": N, "tpm": N}}`` (either or both); other models are
    unlimited. ``admitted`` and ``refused`` count requests per model."""

    limits: dict[str, dict[str, float]] = field(default_factory=dict)
    window_s: float = 60.0
    admitted: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    _buckets: dict[tuple[str, str], _AccountBucket] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def set(self, model: str, *, rpm: float | None = None, tpm: float | None = None) -> None:
        """Limit ``model`` from now on (its buckets start full)."""
        with self._lock:
            self.limits[model] = {k: v for k, v in (("rpm", rpm), ("tpm", tpm)) if v}
            for kind in ("rpm", "tpm"):
                self._buckets.pop((model, kind), None)

    def admit(
        self, path: str, body: dict[str, Any]
    ) -> tuple[tuple[int, dict[str, Any]] | None, dict[str, str]]:
        """``(refusal or None, headers)`` for one request."""
        model = str(body.get("model"))
        limits = self.limits.get(model)
        if not limits:
            return None, {}
        tokens = _requested_tokens(path, body)
        with self._lock:
            now = time.monotonic()
            buckets = {}
            for kind, limit in limits.items():
                bucket = self._buckets.get((model, kind))
                if bucket is None:
                    bucket = _AccountBucket(float(limit), self.window_s)
                    self._buckets[(model, kind)] = bucket
                bucket.refill(now)
                buckets[kind] = bucket
            needs = {"rpm": 1.0, "tpm": float(tokens)}
            short = [(k, b) for k, b in buckets.items() if b.level < needs[k]]
            refusal = None
            if short:
                kind, bucket = short[0]
                self.refused[model] = self.refused.get(model, 0) + 1
                refusal = 429, _error(model, kind, bucket, needs[kind])
            else:
                for kind, bucket in buckets.items():
                    bucket.level -= needs[kind]
                self.admitted[model] = self.admitted.get(model, 0) + 1
            return refusal, _headers(buckets)


def _requested_tokens(path: str, body: dict[str, Any]) -> int:
    if path.endswith("/embeddings"):
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        return sum(count_tokens(str(t)) for t in inputs)
    prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages") or [])
    return prompt + int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)


def _headers(buckets: dict[str, _AccountBucket]) -> dict[str, str]:
    headers = {}
    for kind, name in (("rpm", "requests"), ("tpm", "tokens")):
        bucket = buckets.get(kind)
        if bucket is not None:
            headers[f"x-ratelimit-limit-{name}"] = str(int(bucket.limit))
            headers[f"x-ratelimit-remaining-{name}"] = str(max(0, int(bucket.level)))
            headers[f"x-ratelimit-reset-{name}"] = duration(bucket.reset_s())
    return headers


def _error(model: str, kind: str, bucket: _AccountBucket, requested: float) -> dict[str, Any]:
    what = "requests per min (RPM)" if kind == "rpm" else "tokens per min (TPM)"
    used = int(bucket.limit - max(0.0, bucket.level))
    message = (
        f"Rate limit reached for {model} in organization org-memcost-test on {what}: "
        f"Limit {int(bucket.limit)}, Used {used}, Requested {int(requested)}. Please try "
        f"again in {duration(bucket.wait_s(requested))}. Visit "
        "https://platform.openai.com/account/rate-limits to learn more."
    )
    return {
        "error": {
            "message": message,
            "type": "requests" if kind == "rpm" else "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
