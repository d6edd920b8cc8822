"""A line now and then while requests are slow: how many are in flight, and the oldest's age.

A server that accepts a request and never answers used to be silent until the request timeout
(``request_timeout_s``) and every retry had run out. :class:`Heartbeat` wraps the work of one
batch (:meth:`memcost.llm.items.ItemRunner.run`): it notes when each item starts and ends, and
while any item has been in flight longer than ``slow_s`` it prints, every ``every_s``::

    extract facts: 8 requests in flight, the oldest for 95 s (request_timeout_s=300)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from memcost.io import sign_of_life

T = TypeVar("T")
EVERY_S = 30.0  # seconds between two lines
SLOW_S = 30.0  # an item in flight longer than this makes the batch "slow"


class Heartbeat:
    """Tracks the items of one batch in flight; a background thread reports slow ones."""

    def __init__(
        self,
        desc: str,
        *,
        timeout_s: float | None = None,
        every_s: float = EVERY_S,
        slow_s: float = SLOW_S,
        out: TextIO | None = None,
    ):
        self.desc, self.timeout_s = desc, timeout_s
        self.every_s, self.slow_s = every_s, slow_s
        self.out = out
        self.lines: list[str] = []  # what it printed (tests read it)
        self._started: dict[int, float] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def track(self, work: Callable[[Any], T]) -> Callable[[Any], T]:
        """``work`` that notes its start and end."""

        def tracked(item: Any) -> T:
            token = id(threading.current_thread()) ^ id(item)
            with self._lock:
                self._started[token] = time.monotonic()
            try:
                return work(item)
            finally:
                with self._lock:
                    self._started.pop(token, None)

        return tracked

    def status(self) -> str | None:
        """The line to print now, or ``None`` when nothing is slow."""
        now = time.monotonic()
        with self._lock:
            ages = [now - t for t in self._started.values()]
        if not ages or max(ages) < self.slow_s:
            return None
        limit = (
            f" (request_timeout_s={self.timeout_s:g})"
            if self.timeout_s
            else " (timeouts sized to each request's model and prompt)"
            if self.timeout_s == 0
            else ""
        )
        return (
            f"{self.desc}: {len(ages)} request{'s' if len(ages) != 1 else ''} in flight, "
            f"the oldest for {max(ages):.0f} s{limit}"
        )

    def _beat(self) -> None:
        while not self._done.wait(self.every_s):
            line = self.status()
            if line is not None:
                self.lines.append(line)
                sign_of_life(line, self.out)

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._beat, name="memcost-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
