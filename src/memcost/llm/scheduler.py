"""Running many calls: a bounded worker pool, ordered dependencies, and a progress bar.

Items are dispatched in input order among those that are ready, at most ``max_concurrency`` at
a time. An item may wait for another (``after``): the questions of a conversation go out only
after its first question has returned, so the provider's prompt cache holds the conversation
when they arrive; other conversations proceed meanwhile. Work that needs no network (offline
methods, cache hits) runs inline in the calling thread, where a thread hop would cost more than
the work.

The first exception stops dispatching; the calls already in flight finish (their workers cache
and record them) before it is handed back, so a stopped stage loses nothing it paid for.
"""

from __future__ import annotations

import heapq
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

T = TypeVar("T")


class Progress:
    """A tqdm bar (stderr, so it shows in notebooks and logs) with a live postfix such as
    cache hits and dollars so far."""

    def __init__(self, total: int, desc: str, postfix: Callable[[], str]):
        from tqdm import tqdm

        self._postfix = postfix
        self._bar = tqdm(
            total=total, desc=desc, unit="req", file=sys.stderr, mininterval=0.5, dynamic_ncols=True
        )
        self._last = 0.0

    def update(self) -> None:
        self._bar.update(1)
        now = time.monotonic()
        if now - self._last >= 0.5:  # the postfix costs more than the update itself
            self._last = now
            self._bar.set_postfix_str(self._postfix(), refresh=False)

    def close(self) -> None:
        self._bar.set_postfix_str(self._postfix(), refresh=False)
        self._bar.close()


def run_scheduled(
    items: Sequence[Any],
    work: Callable[[Any], T],
    *,
    after: Sequence[int | None] | None = None,
    inline: Callable[[Any], bool] = lambda item: False,
    max_concurrency: int = 8,
    on_result: Callable[[T], None] | None = None,
    on_failure: Callable[[BaseException], None] | None = None,
    progress: Progress | None = None,
) -> tuple[list[T | None], BaseException | None]:
    """Run ``work`` over ``items``; returns ``(results in input order, first failure)``.

    ``after[i] = j`` holds item ``i`` back until item ``j`` has finished. ``on_result`` is called
    in this thread as each item finishes (so a caller can append its output file item by item);
    ``on_failure`` as soon as the first failure is seen (so workers can stop retrying). Items
    not run because of a failure are ``None`` in the results.
    """
    n = len(items)
    results: list[Any] = [None] * n
    dependents: dict[int, list[int]] = defaultdict(list)
    ready: list[int] = []
    for i in range(n):
        first = after[i] if after is not None else None
        if first is None:
            ready.append(i)
        else:
            dependents[first].append(i)
    heapq.heapify(ready)
    failure: BaseException | None = None
    inflight: dict[Future[Any], int] = {}
    pool: ThreadPoolExecutor | None = None

    def fail(exc: BaseException) -> None:
        nonlocal failure
        if failure is None:
            failure = exc
            if on_failure is not None:
                on_failure(exc)

    def finish(i: int, value: Any) -> None:
        results[i] = value
        for j in dependents.pop(i, ()):
            heapq.heappush(ready, j)
        if progress is not None:
            progress.update()
        if on_result is not None:
            on_result(value)

    try:
        while True:
            while ready and failure is None and len(inflight) < max_concurrency:
                i = heapq.heappop(ready)
                if inline(items[i]):
                    try:
                        finish(i, work(items[i]))
                    except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                        fail(exc)
                    continue
                if pool is None:
                    pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="memcost-llm")
                inflight[pool.submit(work, items[i])] = i
            if not inflight:
                break
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for future in done:
                i = inflight.pop(future)
                try:
                    value = future.result()
                except BaseException as exc:  # noqa: BLE001
                    fail(exc)
                    continue
                try:
                    finish(i, value)
                except BaseException as exc:  # noqa: BLE001 - e.g. the caller's on_result
                    fail(exc)
    except BaseException as exc:  # an interrupt while waiting: let the calls in flight land
        fail(exc)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if progress is not None:
            progress.close()
    return results, failure
