"""One wait on the Batch API: submit what the cache cannot answer, re-attach to what an earlier
process submitted, poll until every batch has ended, and hand each result to the client.

The order that makes a kill harmless: upload the file, journal it, create the batch, journal
its id, then wait (:mod:`memcost.llm.batch.journal`). A rerun re-attaches to every open batch
whose requests it needs, so a batch is never created twice for the same requests.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memcost.io import sign_of_life
from memcost.llm.batch.files import Line, joined, read_answers, split_lines
from memcost.llm.batch.journal import BatchJournal, Entry
from memcost.llm.batch.transport import BatchState, BatchTransport
from memcost.llm.errors import FatalAPIError, LLMError
from memcost.llm.providers import Endpoint
from memcost.paths import RUNS_DIR

MAX_ROUNDS = 3  # batches for the same request, at most (the first and two re-batches)


class BatchWaitExceeded(LLMError):
    """The wait for the Batch API passed ``max_wait_hours``; the batches stay recorded."""


class BatchLost(LLMError):
    """The provider no longer knows a batch this run submitted (404 on its status)."""


@dataclass
class Tracked:
    """A batch this process waits for."""

    entry: Entry
    reserved: float | None
    state: BatchState | None = None
    started: float = 0.0


SAY_EVERY_S = 60.0  # the least time between two lines about a batch still being processed


class BatchSession:
    """Send ``todo`` (cache key → request, none answered by the cache) through one endpoint's
    Batch API; ``client`` is the :class:`memcost.llm.batch.prefill.BatchPrefill` that puts
    results in its cache and ledger (:meth:`memcost.llm.batch.prefill.BatchPrefill.result`)."""

    def __init__(
        self,
        client: Any,
        endpoint: Endpoint,
        todo: Mapping[str, Any],
        lines: Mapping[str, Line],
        transport: BatchTransport,
    ):
        self.client = client
        self.endpoint = endpoint
        self.todo = dict(todo)
        self.lines = dict(lines)
        self.transport = transport
        self.journal = BatchJournal(client.run.root)
        self.tracked: list[Tracked] = []
        self.queue: list[list[Line]] = []
        self.retry: set[str] = set()
        self.round = 1
        self.answered = self.failed = 0
        self._last_said = -SAY_EVERY_S

    # -------------------------------------------------------------------------- the loop

    def run(self) -> None:
        options = self.client.batch_options
        deadline = time.monotonic() + float(options["max_wait_hours"]) * 3600
        covered = self._attach()
        self._plan([k for k in self.todo if k not in covered])
        bar = self._bar()
        try:
            while True:
                self._submit_ready()
                for tracked in self.tracked:
                    if tracked.entry.finished:
                        continue
                    if tracked.state is None or not tracked.state.done:
                        tracked.state = self._retrieve(tracked.entry)
                    if tracked.state.done:
                        self._ingest(tracked)
                self._show(bar)
                if all(t.entry.finished for t in self.tracked) and not self.queue:
                    if not self._next_round():
                        break
                    continue
                if time.monotonic() > deadline:
                    raise BatchWaitExceeded(self._wait_message(options["max_wait_hours"]))
                time.sleep(float(options["poll_s"]))
        finally:
            if bar is not None:
                bar.close()

    def _next_round(self) -> bool:
        """Re-batch what expired, was cancelled or failed on the server's side, or leave it to
        the stage's interactive calls (``batch_retry``); ``False`` when nothing is left."""
        again = sorted(k for k in self.retry if not self.client.cache.contains(k))
        self.retry = set()
        if not again:
            return False
        if self.client.batch_options["retry"] == "batch" and self.round < MAX_ROUNDS:
            self.round += 1
            self._note(
                f"batch: {len(again)} requests not answered; batching them again "
                f"(round {self.round} of {MAX_ROUNDS})"
            )
            self._plan(again)
            return True
        self._note(
            f"batch: {len(again)} requests not answered by the Batch API are sent "
            "interactively (at the list price)"
        )
        return False

    # -------------------------------------------------------------------------- submitting

    def _retrieve(self, entry: Entry) -> BatchState:
        """The batch's state; :class:`BatchLost` with the way out when the provider has
        forgotten it (every rerun would otherwise stop on the same 404)."""
        try:
            return self.transport.retrieve(str(entry.batch_id))
        except FatalAPIError as exc:
            if exc.status != 404:
                raise
            run = self.client.run
            name = run.name if run.root.parent == RUNS_DIR else str(run.root)
            raise BatchLost(
                f"the provider no longer knows batch {entry.batch_id} (HTTP 404 on its status), "
                f"submitted {entry.submitted_at} with {len(entry.keys)} {entry.stage} requests "
                f"and recorded in {self.journal.path}. Give it up, and a rerun sends its "
                f"requests again (any it had answered are paid again): python -m memcost "
                f"forget-batch {name} {entry.batch_id}"
            ) from None

    def _attach(self) -> set[str]:
        """Wait for the open batches an earlier process submitted for these requests."""
        covered: set[str] = set()
        for entry in self.journal.open_entries(self.endpoint.identity):
            if not set(entry.keys) & set(self.todo):
                continue
            if entry.batch_id is None:  # killed between upload and creation: find it
                state = self.transport.find(entry.input_file_id)
                if state is None:
                    state = self.transport.create(
                        entry.input_file_id, entry.url, self._metadata(entry)
                    )
                    self.client.count("batches")
                self.journal.created(entry, state.id)
            reserved = self.client.budget.reserve_batch(entry.estimate_usd, force=True)
            self.tracked.append(Tracked(entry, reserved, started=time.monotonic()))
            covered.update(entry.keys)
            self._note(
                f"batch: re-attached to {entry.batch_id} ({len(entry.keys)} "
                f"{entry.stage} requests, submitted {entry.submitted_at})"
            )
        return covered

    def _plan(self, keys: list[str]) -> None:
        """Files within the API's limits: one model and URL each, in request order."""
        by_model: dict[tuple[str, str], list[Line]] = {}
        for key in keys:
            line = self.lines[key]
            by_model.setdefault((line.model, line.url), []).append(line)
        limits = self.client.batch_options["queue_tokens"]
        for (model, _), lines in by_model.items():
            self.queue.extend(split_lines(lines, max_tokens=limits.get(model)))

    def _submit_ready(self) -> None:
        """Submit the files the enqueued-token limit lets in now (one per model at least)."""
        limits = self.client.batch_options["queue_tokens"]
        waiting: list[list[Line]] = []
        for part in self.queue:
            model = part[0].model
            queued = sum(
                sum(self.lines[k].tokens for k in t.entry.keys if k in self.lines)
                for t in self.tracked
                if not t.entry.finished and t.entry.model == model
            )
            limit = limits.get(model)
            if queued and limit is not None and queued + sum(x.tokens for x in part) > limit:
                waiting.append(part)
            else:
                self._submit(part)
        self.queue = waiting

    def _submit(self, part: list[Line]) -> None:
        requests = [self.todo[line.key] for line in part]
        estimate = self.client.estimate(requests)
        # The whole batch's estimated cost is reserved now: it is spent however long it takes.
        reserved = self.client.budget.reserve_batch(
            estimate, what=f"{len(part)} {requests[0].stage} requests to {part[0].model}"
        )
        file_id = self.transport.upload(joined(part))
        self.journal.save_requests(file_id, {line.key: self.todo[line.key] for line in part})
        entry = Entry(
            input_file_id=file_id,
            model=part[0].model,
            url=part[0].url,
            stage=requests[0].stage,
            endpoint=self.endpoint.identity,
            keys=[line.key for line in part],
            estimate_usd=estimate,
        )
        self.journal.uploaded(entry)
        state = self.transport.create(file_id, entry.url, self._metadata(entry))
        self.journal.created(entry, state.id)
        self.client.count("batches")
        self.tracked.append(Tracked(entry, reserved, state, started=time.monotonic()))

    def _metadata(self, entry: Entry) -> dict[str, str]:
        return {"run_id": str(self.client.run_id), "stage": entry.stage}

    # -------------------------------------------------------------------------- results

    def _ingest(self, tracked: Tracked) -> None:
        """Every result of a batch that ended into the cache and ledger; what did not run (or
        failed on the server's side) waits for the next round."""
        state, entry = tracked.state, tracked.entry
        assert state is not None
        answers = {}
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id:
                answers.update({a.key: a for a in read_answers(self.transport.content(file_id))})
        turnaround = time.monotonic() - tracked.started
        cost, completed, failed, not_asked, unused = 0.0, 0, 0, 0, 0
        saved: dict[str, Any] | None = None  # the batch's requests as asked, read if needed
        for key in entry.keys:
            if self.client.cache.contains(key):
                continue  # answered meanwhile
            request, answer = self.todo.get(key), answers.get(key)
            asked = request is not None
            if not asked:  # a rerun whose calls no longer send it (its parameters changed)
                if answer is None or not answer.ok:
                    continue  # nothing paid to keep
                saved = self.journal.load_requests(entry) if saved is None else saved
                request = saved.get(key)
                if request is None:  # journaled without its requests: paid, not usable
                    unused += 1
                    continue
            elif answer is None or (not answer.ok and answer.retryable):
                self.retry.add(key)
                failed += 1
                continue
            elif not answer.ok:  # a 4xx on this item: its own call records why it fails
                failed += 1
                continue
            try:
                cost += self.client.result(
                    request, self.endpoint, key, answer.body, turnaround, self.round
                )
            except ValueError:  # an answer we cannot read: ask again (if this call asks)
                if asked:
                    self.retry.add(key)
                failed += 1
                continue
            if asked:
                completed += 1
            else:
                not_asked += 1
        self.client.budget.settle_batch(tracked.reserved, cost)
        self.answered += completed
        self.failed += failed
        self.journal.finished(
            entry,
            status=state.status,
            output_file_id=state.output_file_id,
            error_file_id=state.error_file_id,
            completed=completed,
            failed=failed,
            not_asked=not_asked,
            unused=unused,
        )
        if not_asked:
            self._note(
                f"batch {state.id}: {not_asked} of its answers are for requests this call "
                "does not send (the run's parameters changed since it was submitted); "
                "they are paid, so they are in the cache and the ledger, tagged as asked"
            )
        if unused:
            self._note(
                f"batch {state.id}: {unused} answers for requests this call does not send "
                f"are billed but not used: the batch was recorded without its requests. "
                f"They stay in its output file {state.output_file_id}."
            )
        if state.status != "completed":
            why = f": {state.errors}" if state.errors else ""
            self._note(f"batch {state.id} {state.status}{why}")

    # -------------------------------------------------------------------------- showing

    def _bar(self) -> Any:
        if not self.client.progress:
            return None
        from tqdm import tqdm

        total = sum(len(t.entry.keys) for t in self.tracked) + sum(len(p) for p in self.queue)
        stage = next(iter(self.todo.values())).stage
        return tqdm(
            total=total,
            desc=f"batch {stage}",
            unit="req",
            file=sys.stderr,
            mininterval=1.0,
            dynamic_ncols=True,
        )

    def _show(self, bar: Any) -> None:
        states = [t.state for t in self.tracked if t.state is not None]
        done = sum(s.completed for s in states)
        failed = sum(s.failed for s in states)
        running = sum(not s.done for s in states)
        now = time.monotonic()
        if self.client.progress and now - self._last_said >= SAY_EVERY_S:
            # a line the runner shows without --verbose: a wait of hours must not look hung
            self._last_said = now
            total = sum(len(t.entry.keys) for t in self.tracked)
            waited = now - min((t.started for t in self.tracked), default=now)
            stage = next(iter(self.todo.values())).stage
            sign_of_life(
                f"batch {stage}: {done + failed} of {total} requests answered "
                f"({failed} failed), {running} batch(es) running, waited "
                f"{waited / 60:.0f} min (results within 24 h)"
            )
        if bar is None:
            return
        bar.total = max(bar.total, sum(len(t.entry.keys) for t in self.tracked))
        bar.n = min(bar.total, done + failed)
        bar.set_postfix_str(
            f"completed={done} failed={failed} batches running={running}", refresh=True
        )

    def _note(self, line: str) -> None:
        if self.client.progress:
            sign_of_life(line)

    def _wait_message(self, hours: float) -> str:
        running = [t.entry for t in self.tracked if not t.entry.finished]
        ids = ", ".join(str(e.batch_id) for e in running[:5])
        return (
            f"waited max_wait_hours={hours:g} for the Batch API; {len(running)} batch(es) "
            f"still running ({ids}{', ...' if len(running) > 5 else ''}), recorded in "
            f"{self.journal.path}. Stopped cleanly: rerun the same command later (or with "
            "a larger -p 'client={max_wait_hours: <hours>}') and it re-attaches to them; "
            "nothing is submitted twice."
        )
