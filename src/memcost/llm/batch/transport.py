"""The Batch API's calls (upload a file, create, retrieve and find a batch, download a file),
each retried like an interactive request when it fails transiently.

The SDK itself stays in :mod:`memcost.llm.providers`: these go through
:meth:`EndpointClient.sdk_call`, which turns the SDK's errors into ours.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memcost.llm.batch.files import COMPLETION_WINDOW
from memcost.llm.errors import TransientError
from memcost.llm.providers import EndpointClient
from memcost.llm.retry import RetryPolicy

# A batch in one of these states will not change any more.
TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchState:
    """What the provider says about one batch."""

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
    """The Batch API of one endpoint."""

    def __init__(self, client: EndpointClient, retry: RetryPolicy, stop: threading.Event):
        self.client = client
        self.retry = retry
        self.stop = stop
        self._rng = random.Random()

    def _call(self, what: str, call: Callable[[Any], Any]) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return self.client.sdk_call(what, call)
            except TransientError as exc:
                if attempt >= self.retry.max_attempts:
                    raise TransientError(
                        f"{exc} ({what}: gave up after {attempt} attempts)", status=exc.status
                    ) from None
                if self.stop.wait(self.retry.delay(attempt, exc.retry_after, self._rng)):
                    raise

    def upload(self, data: bytes) -> str:
        """Upload an input file; its id."""
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
        """The batch made from input file ``file_id``, if one was created (the newest first)."""

        def look(sdk: Any) -> Any:
            for batch in sdk.batches.list(limit=100):  # newest first; the SDK pages on
                if str(batch.input_file_id) == file_id:
                    return batch
            return None

        found = self._call("batch listing", look)
        return None if found is None else _state(found)

    def content(self, file_id: str) -> str:
        """An output or error file's text."""
        response = self._call("batch file download", lambda sdk: sdk.files.content(file_id))
        return response.text
