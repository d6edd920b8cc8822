"""Running many calls: a bounded worker pool with ordered dependencies and per-prefix pacing, a
progress bar, and a heartbeat while requests are slow (docs/architecture.md, "Model calls")."""

from __future__ import annotations

import heapq
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TextIO, TypeVar

from memcost.io import Bar, sign_of_life

T = TypeVar("T")
EVERY_S = 30.0  # seconds between two heartbeat lines
SLOW_S = 30.0  # an item in flight longer than this makes the batch "slow"


class ProgressBar:
    """A bar with a live postfix (cache hits, dollars so far)."""

    def __init__(self, total: int, desc: str, postfix: Callable[[], str], unit: str = "req"):
        self._postfix = postfix
        self._bar = Bar(total=total, desc=desc, unit=unit, mininterval=0.5)
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        self._bar.update(n)
        now = time.monotonic()
        if now - self._last >= 0.5:  # the postfix costs more than the update itself
            self._last = now
            self._bar.set_postfix_str(self._postfix(), refresh=False)

    def close(self) -> None:
        self._bar.set_postfix_str(self._postfix(), refresh=False)
        self._bar.close()


class _Ready:
    """Ready items grouped by prefix: which may go now, and how long until one may."""

    WINDOW_S = 60.0
    SLACK = 1.1  # a send counts a tenth of a window longer: it may still be on its way

    def __init__(self, prefixes: Sequence[Any] | None, limit: int | None) -> None:
        self.prefixes, self.limit = prefixes, limit
        self.groups: dict[Any, list[int]] = defaultdict(list)
        self.sent: dict[Any, deque[float]] = defaultdict(deque)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def push(self, i: int) -> None:
        heapq.heappush(self.groups[self.prefixes[i] if self.prefixes else None], i)
        self.size += 1

    def _recent(self, prefix: Any, now: float) -> int:
        sent = self.sent[prefix]
        while sent and now - sent[0] >= self.WINDOW_S * self.SLACK:
            sent.popleft()
        return len(sent)

    def pop(self) -> int | None:
        """The next item to send (``None``: every ready prefix is at its limit)."""
        now = time.monotonic()
        best: tuple[int, int, Any] | None = None
        for prefix, heap in self.groups.items():
            if not heap:
                continue
            recent = self._recent(prefix, now) if prefix is not None else 0
            if self.limit and prefix is not None and recent >= self.limit:
                continue
            if best is None or (recent, heap[0]) < best[:2]:
                best = (recent, heap[0], prefix)
        if best is None:
            return None
        self.size -= 1
        return heapq.heappop(self.groups[best[2]])

    def sent_now(self, i: int) -> None:
        if self.prefixes and self.prefixes[i] is not None:
            self.sent[self.prefixes[i]].append(time.monotonic())

    def wait_s(self) -> float:
        now = time.monotonic()
        waits = [self.WINDOW_S * self.SLACK - (now - self.sent[p][0])
                 for p, h in self.groups.items()
                 if h and self.sent.get(p)]  # fmt: skip
        return max(0.01, min(waits)) if waits else 0.01


class _Schedule:
    def __init__(self, n: int, after, on_result, on_failure, progress, ready: _Ready) -> None:
        self.results: list[Any] = [None] * n
        self.dependents: dict[int, list[int]] = defaultdict(list)
        self.ready = ready
        for i in range(n):
            first = after[i] if after is not None else None
            if first is None:
                self.ready.push(i)
            else:
                self.dependents[first].append(i)
        self.failure: BaseException | None = None
        self.inflight: dict[Future[Any], int] = {}
        self.on_result, self.on_failure, self.progress = on_result, on_failure, progress

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            if self.on_failure is not None:
                self.on_failure(exc)

    def finish(self, i: int, value: Any) -> None:
        self.results[i] = value
        for j in self.dependents.pop(i, ()):
            self.ready.push(j)
        if self.progress is not None:
            self.progress.update()
        if self.on_result is not None:
            self.on_result(value)

    def collect(self, done: set[Future[Any]]) -> None:
        for future in done:
            i = self.inflight.pop(future)
            try:
                value = future.result()
            except BaseException as exc:  # noqa: BLE001
                self.fail(exc)
                continue
            try:
                self.finish(i, value)
            except BaseException as exc:  # noqa: BLE001 - e.g. the caller's on_result
                self.fail(exc)


def run_scheduled(
    items: Sequence[Any],
    work: Callable[[Any], T],
    *,
    after: Sequence[int | None] | None = None,
    inline: Callable[[Any], bool] = lambda item: False,
    max_concurrency: int = 8,
    on_result: Callable[[T], None] | None = None,
    on_failure: Callable[[BaseException], None] | None = None,
    progress: ProgressBar | None = None,
    prefixes: Sequence[Any] | None = None,
    per_prefix_per_minute: int | None = None,
) -> tuple[list[T | None], BaseException | None]:
    """Run ``work`` over ``items``: ``(results in input order, first failure)``. ``after[i] = j``
    holds ``i`` until ``j`` has finished; ``on_result`` runs in this thread per item,
    ``on_failure`` at the first failure; ``prefixes`` with ``per_prefix_per_minute`` caps a
    prefix's requests a minute."""
    ready = _Ready(prefixes, per_prefix_per_minute)
    s = _Schedule(len(items), after, on_result, on_failure, progress, ready)
    pool: ThreadPoolExecutor | None = None
    try:
        while True:
            held = False
            while s.ready and s.failure is None and len(s.inflight) < max_concurrency:
                i = s.ready.pop()
                if i is None:
                    held = True
                    break
                if inline(items[i]):
                    try:
                        s.finish(i, work(items[i]))
                    except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                        s.fail(exc)
                    continue
                if pool is None:
                    pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="memcost-llm")
                s.ready.sent_now(i)
                s.inflight[pool.submit(work, items[i])] = i
            if not s.inflight and not (held and s.failure is None):
                break
            if not s.inflight:  # every ready prefix is at its limit: wait for a slot
                time.sleep(s.ready.wait_s())
                continue
            timeout = s.ready.wait_s() if held else None
            done, _ = wait(s.inflight, timeout=timeout, return_when=FIRST_COMPLETED)
            s.collect(done)
    except BaseException as exc:  # an interrupt while waiting: let the calls in flight land
        s.fail(exc)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if progress is not None:
            progress.close()
    return s.results, s.failure


class Heartbeat:
    """Tracks the items in flight; a thread reports slow ones."""

    def __init__(
        self,
        desc: str,
        *,
        timeout_s: float | None = None,
        every_s: float = EVERY_S,
        slow_s: float = SLOW_S,
        out: TextIO | None = None,
        waiting: Callable[[], list[str]] | None = None,
    ):
        self.desc, self.timeout_s = desc, timeout_s
        self.waiting = waiting  # why started requests are not being sent (the transport's)
        self.every_s, self.slow_s = every_s, slow_s
        self.out = out
        self.lines: list[str] = []  # what it printed (tests read it)
        self._started: dict[object, float] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def track(self, work: Callable[[Any], T]) -> Callable[[Any], T]:

        def tracked(item: Any) -> T:
            token = object()  # this call's own key (ids of a thread and an item can collide)
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
        # a request waiting out a 429 or a back-off is not "in flight": say what it waits for
        reasons = Counter(self.waiting() if self.waiting is not None else [])
        sending = max(0, len(ages) - sum(reasons.values()))
        parts = [
            f"{sending} request{'s' if sending != 1 else ''} in flight, the oldest for "
            f"{max(ages):.0f} s{limit}"
            if sending
            else "no request in flight"
        ]
        parts += [f"{n} {why}" for why, n in reasons.most_common()]
        return f"{self.desc}: " + "; ".join(parts)

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
