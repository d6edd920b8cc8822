"""The OpenAI Batch API for stages that can wait, as a pre-fill of the run's store of calls
(docs/architecture.md, "Batch API")."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memcost.catalog import DISCOUNT_BACKEND, price_for
from memcost.io import (
    Bar,
    JsonlAppender,
    atomic_open,
    jsonl_line,
    read_jsonl,
    sign_of_life,
)
from memcost.llm.accounting import BudgetStop
from memcost.llm.config import BATCH_RETRY_MODES, batch_options  # noqa: F401 - re-exported
from memcost.llm.providers import (
    Endpoint,
    EndpointClient,
    chat_body,
    embedding_body,
)
from memcost.llm.requests import (
    BudgetExceeded,
    ChatRequest,
    EmbeddingRequest,
    FatalAPIError,
    LLMError,
    request_from_record,
    request_record,
)
from memcost.paths import RUNS_DIR
from memcost.text import count_tokens

# --- The Batch API's files ---------------------------------------------------------------------

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
    """``lines`` of one model and URL cut, in order, into files within the limits (a line above
    ``max_tokens`` alone)."""
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
        """Expired, cancelled, or failed on the server: asking again may help."""
        return self.status is None or self.status in RETRYABLE_STATUSES


def read_answers(text: str) -> list[Answer]:
    """The lines of an output or error file (blank or torn lines skipped)."""
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
    """A chat completion body as an interactive call's reply."""
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
    """An embeddings body as an interactive call's reply; ``ValueError`` when not whole."""
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


# --- The journal -------------------------------------------------------------------------------

FILE_NAME = "batches.jsonl"
REQUESTS_FOLDER = "batches"  # beside it: each batch's requests, by input file id
EVENTS = ("uploaded", "created", "finished")


def journal_path(run_root: str | Path) -> Path:
    return Path(run_root) / FILE_NAME


@dataclass
class Entry:
    """One batch as the journal knows it."""

    input_file_id: str
    model: str
    url: str
    stage: str
    endpoint: str  # the endpoint's identity (never a key)
    keys: list[str]
    estimate_usd: float = 0.0
    submitted_at: str = ""
    batch_id: str | None = None
    status: str | None = None  # the final status, once finished
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status is not None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class BatchJournal:
    """``batches.jsonl`` of one run: what was uploaded and created, so a rerun re-attaches."""

    def __init__(self, run_root: str | Path):
        self.path = journal_path(run_root)
        self.requests_folder = Path(run_root) / REQUESTS_FOLDER

    def _requests_path(self, input_file_id: str) -> Path:
        return self.requests_folder / f"{input_file_id}.requests.jsonl"

    def save_requests(self, input_file_id: str, requests: dict[str, Any]) -> None:
        self.requests_folder.mkdir(parents=True, exist_ok=True)
        with atomic_open(self._requests_path(input_file_id)) as out:
            for key, request in requests.items():
                out.write(jsonl_line({"key": key, **request_record(request)}) + "\n")

    def load_requests(self, entry: Entry) -> dict[str, Any]:
        records = read_jsonl(self._requests_path(entry.input_file_id), missing_ok=True)
        return {str(r.pop("key")): request_from_record(r) for r in records}

    def entries(self) -> list[Entry]:
        """Every batch in submission order, with its latest state."""
        by_file: dict[str, Entry] = {}
        for event in read_jsonl(self.path, missing_ok=True):
            kind, file_id = event.get("event"), str(event.get("input_file_id", ""))
            if kind == "uploaded":
                by_file[file_id] = Entry(
                    input_file_id=file_id,
                    model=str(event["model"]),
                    url=str(event["url"]),
                    stage=str(event["stage"]),
                    endpoint=str(event["endpoint"]),
                    keys=[str(k) for k in event["keys"]],
                    estimate_usd=float(event.get("estimate_usd") or 0.0),
                    submitted_at=str(event.get("at", "")),
                )
            elif file_id in by_file and kind == "created":
                by_file[file_id].batch_id = str(event["batch_id"])
            elif file_id in by_file and kind == "finished":
                by_file[file_id].status = str(event["status"])
                by_file[file_id].extra = {
                    k: event.get(k)
                    for k in (
                        "output_file_id",
                        "error_file_id",
                        "completed",
                        "failed",
                        "not_asked",
                        "unused",
                    )
                }
        return list(by_file.values())

    def open_entries(self, endpoint: str) -> list[Entry]:
        return [e for e in self.entries() if not e.finished and e.endpoint == endpoint]

    def _append(self, record: dict[str, Any]) -> None:
        with JsonlAppender(self.path, fsync=True) as out:
            out.write({"event": record.pop("event"), "at": _now(), **record})

    def uploaded(self, entry: Entry) -> None:
        self._append(
            {
                "event": "uploaded",
                "input_file_id": entry.input_file_id,
                "model": entry.model,
                "url": entry.url,
                "stage": entry.stage,
                "endpoint": entry.endpoint,
                "estimate_usd": round(entry.estimate_usd, 6),
                "requests": len(entry.keys),
                "keys": entry.keys,
            }
        )
        entry.submitted_at = _now()

    def created(self, entry: Entry, batch_id: str) -> None:
        self._append(
            {"event": "created", "input_file_id": entry.input_file_id, "batch_id": batch_id}
        )
        entry.batch_id = batch_id

    def forget(self, batch_id: str) -> Entry:
        """Give up an open batch the provider lost: finished as ``forgotten``, so a rerun sends its
        requests again."""
        open_ones = [e for e in self.entries() if not e.finished]
        entry = next((e for e in open_ones if e.batch_id == batch_id), None)
        if entry is None:
            known = ", ".join(str(e.batch_id) for e in open_ones) or "none"
            raise KeyError(f"{self.path} has no open batch {batch_id} (open batches: {known})")
        self.finished(
            entry,
            status="forgotten",
            output_file_id=None,
            error_file_id=None,
            completed=0,
            failed=0,
            not_asked=len(entry.keys),
        )
        return entry

    def finished(
        self,
        entry: Entry,
        *,
        status: str,
        output_file_id: str | None,
        error_file_id: str | None,
        completed: int,
        failed: int,
        not_asked: int = 0,
        unused: int = 0,
    ) -> None:
        self._append(
            {
                "event": "finished",
                "input_file_id": entry.input_file_id,
                "batch_id": entry.batch_id,
                "status": status,
                "output_file_id": output_file_id,
                "error_file_id": error_file_id,
                "completed": completed,
                "failed": failed,
                "not_asked": not_asked,
                "unused": unused,
            }
        )
        entry.status = status


# --- The Batch API's calls ---------------------------------------------------------------------

# A batch in one of these states will not change any more.
TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchState:
    id: str
    status: str
    input_file_id: str
    completed: int = 0
    failed: int = 0
    total: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: str = ""  # why a batch failed validation, when it did

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


def _state(batch: Any) -> BatchState:
    counts = getattr(batch, "request_counts", None)
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    said = "; ".join(f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}" for e in errors[:3])
    return BatchState(
        id=str(batch.id),
        status=str(batch.status),
        input_file_id=str(batch.input_file_id),
        completed=int(getattr(counts, "completed", 0) or 0),
        failed=int(getattr(counts, "failed", 0) or 0),
        total=int(getattr(counts, "total", 0) or 0),
        output_file_id=getattr(batch, "output_file_id", None),
        error_file_id=getattr(batch, "error_file_id", None),
        errors=said,
    )


class BatchTransport:
    def __init__(self, client: EndpointClient):
        self.client = client

    def _call(self, what: str, call: Callable[[Any], Any]) -> Any:
        return self.client.sdk_call(what, call)

    def upload(self, data: bytes) -> str:
        made = self._call(
            "batch file upload",
            lambda sdk: sdk.files.create(file=("requests.jsonl", data), purpose="batch"),
        )
        return str(made.id)

    def create(self, file_id: str, url: str, metadata: Mapping[str, str]) -> BatchState:
        return _state(
            self._call(
                "batch creation",
                lambda sdk: sdk.batches.create(
                    input_file_id=file_id,
                    endpoint=url,
                    completion_window=COMPLETION_WINDOW,
                    metadata=dict(metadata),
                ),
            )
        )

    def retrieve(self, batch_id: str) -> BatchState:
        return _state(self._call("batch status", lambda sdk: sdk.batches.retrieve(batch_id)))

    def find(self, file_id: str) -> BatchState | None:
        """The batch made from input file ``file_id``, if one was created."""

        def look(sdk: Any) -> Any:
            for batch in sdk.batches.list(limit=100):  # newest first; the SDK pages on
                if str(batch.input_file_id) == file_id:
                    return batch
            return None

        found = self._call("batch listing", look)
        return None if found is None else _state(found)

    def content(self, file_id: str) -> str:
        response = self._call("batch file download", lambda sdk: sdk.files.content(file_id))
        return response.text


# --- One wait on the Batch API -----------------------------------------------------------------

MAX_ROUNDS = 3  # batches for the same request, at most (the first and two re-batches)


class BatchWaitExceeded(LLMError):
    """The wait for the Batch API passed ``max_wait_hours``; the batches stay recorded."""


class BatchLost(LLMError):
    """The provider no longer knows a batch this run submitted (404 on its status)."""


@dataclass
class Tracked:
    entry: Entry
    reserved: float | None
    state: BatchState | None = None
    started: float = 0.0


SAY_EVERY_S = 60.0  # the least time between two lines about a batch still being processed


class BatchSession:
    """Send ``todo`` (key → request) through one endpoint's Batch API; ``client`` puts each result
    in the store."""

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
        """Re-batch what expired, was cancelled or failed on the server, or leave it to the
        interactive calls (``batch_retry``); ``False`` when nothing is left."""
        again = sorted(k for k in self.retry if not self.client.store.has_answer(k))
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
        """The batch's state; :class:`BatchLost`, with the way out, when the provider forgot it."""
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
        by_model: dict[tuple[str, str], list[Line]] = {}
        for key in keys:
            line = self.lines[key]
            by_model.setdefault((line.model, line.url), []).append(line)
        limits = self.client.batch_options["queue_tokens"]
        for (model, _), lines in by_model.items():
            self.queue.extend(split_lines(lines, max_tokens=limits.get(model)))

    def _submit_ready(self) -> None:
        """Submit the files the enqueued-token limit lets in (one per model at least)."""
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
        """A finished batch's results into the store; what did not run waits for the next round."""
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
            if self.client.store.has_answer(key):
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
        total = sum(len(t.entry.keys) for t in self.tracked) + sum(len(p) for p in self.queue)
        stage = next(iter(self.todo.values())).stage
        return Bar(total=total, desc=f"batch {stage}", unit="req", mininterval=1.0)

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


# --- The pre-fill ------------------------------------------------------------------------------

Request = ChatRequest | EmbeddingRequest
BATCH_BACKENDS = (DISCOUNT_BACKEND,)  # who has a Batch API (memcost.catalog, the one rule)


def batch_refusal(backend: str, where: str = "") -> str | None:
    if backend in BATCH_BACKENDS or backend == "offline":
        return None
    return (
        f"execution: batch is the OpenAI Batch API, and backend '{backend}'{where} has none "
        "(OpenRouter and vLLM offer no batch endpoint). Set those stages to interactive "
        "(e.g. -p 'client={execution: {}}'), or route the model to backend openai."
    )


def check_batch(config: Any) -> None:
    """Refuse ``batch`` where there is no Batch API, before any call (offline: say it means
    nothing)."""
    if "batch" not in config.execution.values():
        return
    refused = batch_refusal(config.backend)
    if refused:
        raise ValueError(refused)
    if config.backend == "offline" and set(config.model_backends.values()) <= {"offline"}:
        print(
            "execution: batch is ignored by the offline backend (it calls no model and "
            "costs nothing)",
            file=sys.stderr,
            flush=True,
        )
    elif config.cache_mode == "off":
        raise ValueError(
            "execution: batch hands its results to the stages through the "
            "response cache; use cache_mode read_write"
        )


class BatchPrefill:
    """The Batch API step of one client: fills its cache (and ledger) before the calls."""

    def __init__(self, run: Any, calls: Any):
        check_batch(calls.config)  # batch where there is no Batch API: refused before any call
        self.run = run
        self.calls = calls
        self.config = calls.config
        self.batch_options = calls.config.batch
        self.store = calls.store
        self.budget = calls.budget
        self.run_id = run.run_id()
        self.progress = calls.config.progress

    def count(self, name: str, n: int = 1) -> None:
        self.calls.accounting.count(name, n)

    def fill(self, requests: Sequence[Request]) -> None:
        """Send the batch stages' requests the store cannot answer through the Batch API,
        and wait."""
        if self.config.cache_mode == "replay_only" or "batch" not in self.config.execution.values():
            return
        wanted: dict[str, tuple[Endpoint, dict[str, Request]]] = {}
        for request in requests:
            if self.config.execution_for(request.stage) != "batch":
                continue
            endpoint = self.calls.transport.endpoint_for(request.model)
            if endpoint is None:
                continue
            refused = batch_refusal(endpoint.backend, f" (serving {request.model})")
            if refused:
                raise ValueError(refused)
            key = request.key(endpoint.identity)
            todo = wanted.setdefault(endpoint.identity, (endpoint, {}))[1]
            if key not in todo and not self.store.has_answer(key):
                todo[key] = request
        for endpoint, todo in wanted.values():
            if todo:
                self._session(endpoint, todo)

    def _session(self, endpoint: Endpoint, todo: dict[str, Request]) -> None:
        lines = {key: self.line(key, request) for key, request in todo.items()}
        transport = BatchTransport(self.calls.transport.client_for(endpoint))
        try:
            BatchSession(self, endpoint, todo, lines, transport).run()
        except BudgetStop as stop:
            raise BudgetExceeded(
                f"budget guard: {stop}. Stopped cleanly; everything done so far is cached and "
                "recorded. Raise max_cost_usd to continue.",
                spent_usd=self.budget.spent,
                limit_usd=self.budget.limit,
            ) from None

    def line(self, key: str, request: Request) -> Line:
        if isinstance(request, EmbeddingRequest):
            tokens = sum(count_tokens(t) for t in request.inputs)
            return request_line(key, request.model, EMBEDDINGS_URL, embedding_body(request), tokens)
        body = chat_body(
            request, self.calls.transport.capabilities(request.model), backend="openai"
        )
        tokens = sum(count_tokens(content) for _, content in request.messages)
        return request_line(key, request.model, CHAT_URL, body, tokens)

    def estimate(self, requests: Sequence[Request]) -> float:
        """What the budget reserves for a batch: each request's generous guess, batch-priced."""
        total = 0.0
        for request in requests:
            rate = price_for(request.model, self.config.price_overrides).execution_rate("batch")
            total += self.budget.estimate(request) * rate
        return total

    def result(
        self,
        request: Request,
        endpoint: Endpoint,
        key: str,
        body: dict[str, Any],
        turnaround_s: float,
        attempts: int,
    ) -> float:
        """One answer of a batch into the store; its batch-priced cost (``ValueError``:
        unreadable)."""
        if isinstance(request, EmbeddingRequest):
            reply = embedding_reply(body, len(request.inputs))
        else:
            reply = chat_reply(body)
        return self.calls.batch_result(request, endpoint, key, reply, turnaround_s, attempts)
