"""Pacing each model's requests to the account's rate limits, before the provider has to say no.

A provider counts requests and tokens per minute for each model, as buckets that refill
continuously, and answers 429 when one is empty. :class:`Pacer` keeps a copy of each bucket on
this side: a request waits until its model's buckets hold one request and its tokens (its prompt,
counted before it is sent, plus its output limit), takes them, and is settled on the reply: its
headers say what the provider counted (OpenAI counts the output limit on arrival), and without
them the reserved output tokens it did not use go back. The limits come from ``rate_limits``
(stated up front, such as a usage tier's) and are corrected by the ``x-ratelimit-limit-*`` and
``x-ratelimit-remaining-*`` headers of every reply: a reply that shows less room than this side
thinks lowers the bucket to it, a limit above the stated one raises it. Concurrency is adaptive
within ``max_concurrency``: it grows by one after each reply that shows headroom and halves on a
429, whose retries then leave at the bucket's refill rate, one by one with jitter, instead of all
together when the wait ends (the thundering herd that earns a second round of 429s).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memcost.llm.retry import parse_duration
from memcost.models import per_model

WINDOW_S = 60.0  # the providers' limits are per minute
SAFETY = 0.95  # pace to this share of a limit: replies and clocks are never exactly in step
HEADROOM = 0.10  # a reply showing more than this share of a limit left is headroom to grow
START_CONCURRENCY = 4  # requests in flight before any reply has shown headroom


@dataclass(frozen=True)
class Limits:
    """A model's stated limits: requests and tokens per minute (``None``: not stated)."""

    rpm: float | None = None
    tpm: float | None = None


def parse_rate_limits(value: Any, known: Any = None) -> dict[str, Limits]:
    """``rate_limits`` as ``{model: Limits}``: ``{gpt-5-mini: {rpm: 500, tpm: 500000}}``.

    ``known(model)`` says whether a model name is known (a name that is not would never be
    paced, so it is an error rather than a silent no-op). Raises ``ValueError`` in one line."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"rate_limits={value!r}: expected a mapping of model to "
            "{rpm: ..., tpm: ...}, e.g. {gpt-5-mini: {rpm: 500, tpm: 500000}}"
        )
    out: dict[str, Limits] = {}
    for model, limits in value.items():
        if known is not None and not known(str(model)):
            raise ValueError(
                f"rate_limits[{model!r}]: unknown model; give the limits of a "
                "model this run calls (or declare it in model_capabilities)"
            )
        if not isinstance(limits, Mapping) or not limits or set(limits) - {"rpm", "tpm"}:
            raise ValueError(
                f"rate_limits[{model!r}] = {limits!r}: expected {{rpm: N, tpm: N}} (either or both)"
            )
        numbers = {}
        for key, n in limits.items():
            if (
                isinstance(n, bool)
                or not isinstance(n, (int, float))
                or not n > 0
                or not math.isfinite(n)
            ):
                raise ValueError(
                    f"rate_limits[{model!r}].{key} = {n!r}: must be a positive number (per minute)"
                )
            numbers[key] = float(n)
        out[str(model)] = Limits(**numbers)
    return out


@dataclass(frozen=True)
class Reading:
    """What one reply's ``x-ratelimit-*`` headers say (``None``: not sent)."""

    limit_requests: float | None = None
    limit_tokens: float | None = None
    remaining_requests: float | None = None
    remaining_tokens: float | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str] | None) -> Reading | None:
        if not headers:
            return None

        def number(name: str) -> float | None:
            value = headers.get(name)
            if value is None:
                return None
            seconds = parse_duration(str(value))  # plain numbers parse as themselves
            return seconds if seconds is not None and math.isfinite(seconds) else None

        reading = cls(
            number("x-ratelimit-limit-requests"),
            number("x-ratelimit-limit-tokens"),
            number("x-ratelimit-remaining-requests"),
            number("x-ratelimit-remaining-tokens"),
        )
        return None if reading == cls() else reading


class _Bucket:
    """One per-minute limit as a bucket refilled continuously, as a provider counts it."""

    def __init__(self, per_minute: float):
        self.limit = per_minute
        self.level = self.capacity

    @property
    def capacity(self) -> float:
        return self.limit * SAFETY

    @property
    def rate(self) -> float:
        return self.capacity / WINDOW_S

    def refill(self, elapsed: float) -> None:
        self.level = min(self.capacity, self.level + elapsed * self.rate)

    def wait_s(self, amount: float) -> float:
        """Seconds until ``amount`` fits (a request larger than the bucket waits for a full
        one, then goes: the provider accepts it, or says why in its 400)."""
        amount = min(amount, self.capacity)
        return 0.0 if self.level >= amount else (amount - self.level) / self.rate

    def learn(self, limit: float | None, remaining: float | None, outstanding: float) -> bool:
        """A reply's headers: the provider's limit replaces ours, and its remaining count (less
        what is in flight since) caps our level. Returns whether it showed headroom."""
        if limit is not None and limit > 0:
            self.limit = limit
            self.level = min(self.level, self.capacity)
        if remaining is None:
            return True
        self.level = min(self.level, remaining * SAFETY - outstanding)
        return limit is None or remaining > HEADROOM * limit


@dataclass
class Ticket:
    """One request let through: what it reserved, and when."""

    model: str
    tokens: float
    sent: float
    serial: int


class ModelPacer:
    """The buckets and the concurrency window of one model (see the module's docstring)."""

    def __init__(self, model: str, stated: Limits | None, ceiling: int, rng: random.Random):
        stated = stated or Limits()
        self.model, self.ceiling, self.rng = model, max(1, ceiling), rng
        self.requests = _Bucket(stated.rpm) if stated.rpm else None
        self.tokens = _Bucket(stated.tpm) if stated.tpm else None
        self.window = float(min(self.ceiling, START_CONCURRENCY))
        self.inflight: dict[int, Ticket] = {}
        self.serial = 0
        self.waited_s = 0.0
        self.rate_limited = 0
        self._clock = time.monotonic()
        self._cond = threading.Condition()
        self._next_release = 0.0  # after a 429: the earliest time the next request may go
        self._drain_serial = 0  # the last request sent before the drain began

    # ------------------------------------------------------------------ sending

    def acquire(self, tokens: float, stop: threading.Event | None = None) -> Ticket | None:
        """Block until a request of ``tokens`` may go; ``None`` when ``stop`` was set."""
        start = time.monotonic()
        with self._cond:
            while True:
                if stop is not None and stop.is_set():
                    return None
                wait = self._wait_s(tokens)
                if wait <= 0:
                    break
                self._cond.wait(min(wait, 0.5))
            now = time.monotonic()
            for bucket, amount in ((self.requests, 1.0), (self.tokens, tokens)):
                if bucket is not None:
                    bucket.level -= amount
            if self._next_release > 0:  # draining after a 429: space the next one too
                self._next_release = now + self._spacing()
            self.serial += 1
            ticket = Ticket(self.model, float(tokens), now, self.serial)
            self.inflight[ticket.serial] = ticket
            self.waited_s += now - start
            return ticket

    def _wait_s(self, tokens: float) -> float:
        now = time.monotonic()
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.refill(now - self._clock)
        self._clock = now
        if len(self.inflight) >= int(self.window):
            return 0.5  # woken by a settle
        waits = [self._next_release - now]
        if self.requests is not None:
            waits.append(self.requests.wait_s(1.0))
        if self.tokens is not None:
            waits.append(self.tokens.wait_s(tokens))
        return max(waits)

    def _spacing(self) -> float:
        """The gap between two releases while draining: the request bucket's refill interval
        (or a tenth of a second without one), jittered so that retries never line up."""
        base = 1.0 / self.requests.rate if self.requests is not None else 0.1
        return base * (0.5 + self.rng.random())

    # ------------------------------------------------------------------ replies

    def settle(
        self,
        ticket: Ticket | None,
        *,
        used_tokens: float | None = None,
        reading: Reading | None = None,
        rate_limited: bool = False,
        hold_s: float | None = None,
    ) -> None:
        """A reply to ``ticket``'s request: give back unused tokens, learn from the headers,
        and grow (headroom) or halve (a 429) the window. ``hold_s``: a 429's Retry-After, which
        holds every request of the model, not only the refused one."""
        if ticket is None:
            return
        with self._cond:
            self.inflight.pop(ticket.serial, None)
            if (
                self.tokens is not None
                and used_tokens is not None
                and reading is None
                and not rate_limited
            ):  # a provider that sends headers says what it counted
                self.tokens.level += max(0.0, ticket.tokens - used_tokens)
            headroom = self._learn(ticket, reading)
            if rate_limited:
                self.rate_limited += 1
                self.window = max(1.0, self.window / 2)
                self._drain(hold_s)
            else:
                if self._next_release and ticket.serial > self._drain_serial:
                    self._next_release = 0.0  # sent during the drain and answered: it is over
                if headroom and not self._next_release:
                    self.window = min(float(self.ceiling), self.window + 1)
            self._cond.notify_all()

    def _learn(self, ticket: Ticket, reading: Reading | None) -> bool:
        if reading is None:
            return True
        later = [t for t in self.inflight.values() if t.serial > ticket.serial]
        headroom = True
        for name, outstanding in (
            ("requests", float(len(later))),
            ("tokens", sum(t.tokens for t in later)),
        ):
            limit = getattr(reading, f"limit_{name}")
            remaining = getattr(reading, f"remaining_{name}")
            bucket = getattr(self, name)
            if bucket is None and limit:  # a limit nobody stated: learned from the reply
                bucket = _Bucket(limit)
                setattr(self, name, bucket)
            if bucket is not None:
                headroom = bucket.learn(limit, remaining, outstanding) and headroom
        return headroom

    def _drain(self, hold_s: float | None) -> None:
        """After a 429: the buckets are empty as far as anyone knows, nothing goes before the
        server's Retry-After, and requests leave one by one from then on."""
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.level = min(bucket.level, 0.0)
        start = time.monotonic() + (hold_s if hold_s and math.isfinite(hold_s) else 0.0)
        self._next_release = max(self._next_release, start + self._spacing())
        self._drain_serial = self.serial

    def retry_delay_s(self, hinted: float | None) -> float:
        """How long a refused request waits before it queues again: the server's hint when it
        gave one, else the time its bucket needs to hold one request, jittered."""
        with self._cond:
            base = hinted if hinted is not None else max(self._wait_s(0.0), self._spacing())
        return base * (1.0 + 0.5 * self.rng.random())

    def state(self) -> dict[str, Any]:
        """The limits in force, the window and the counts (for the run's records)."""
        with self._cond:
            return {
                "model": self.model,
                "rpm": self.requests.limit if self.requests else None,
                "tpm": self.tokens.limit if self.tokens else None,
                "concurrency": int(self.window),
                "rate_limited": self.rate_limited,
                "waited_s": round(self.waited_s, 3),
            }


class Pacer:
    """Every model's :class:`ModelPacer`, made on first use."""

    def __init__(self, stated: Mapping[str, Limits] | None, ceiling: int):
        self.stated = dict(stated or {})
        self.ceiling = ceiling
        self.rng = random.Random()
        self._models: dict[str, ModelPacer] = {}
        self._lock = threading.Lock()

    def model(self, model: str) -> ModelPacer:
        with self._lock:
            pacer = self._models.get(model)
            if pacer is None:
                pacer = self._models[model] = ModelPacer(
                    model, per_model(self.stated, model), self.ceiling, self.rng
                )
            return pacer

    def state(self) -> list[dict[str, Any]]:
        with self._lock:
            models = list(self._models.values())
        return [m.state() for m in models]
