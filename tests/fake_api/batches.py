"""The Batch API of the local test server: ``/v1/files`` and ``/v1/batches``.

Enough of the API for the client's batch path to run for real through the ``openai`` SDK:
upload a JSONL file (multipart, ``purpose=batch``), download a file's content, create,
retrieve, list and cancel a batch. A batch answers each line as the server would answer it
interactively, and writes an output file (answers and HTTP errors as ``response``) and an
error file (failed requests, and those that never ran: ``batch_expired``, ``batch_cancelled``).

It can be told to take its time (``delay_s``: a batch is ``in_progress`` that long after its
creation), to fail some requests once (``fail_once``: a status for a line, e.g. 500), to let the
next batches expire with only their first ``expire_done`` share of requests run
(``expire_next``), and it counts the batches created (``created``), so a test can tell a
re-attached batch from a resubmitted one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

TERMINAL = ("completed", "failed", "expired", "cancelled")
CHAT_URL = "/v1/chat/completions"
EMBEDDINGS_URL = "/v1/embeddings"


def _error(message: str, code: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }


@dataclass
class BatchService:
    """The files and batches of one :class:`FakeOpenAIServer` (``server``), which answers each
    line (``server.chat_response(body, action)``)."""

    server: Any
    action: Any  # the server's default Action: a normal answer
    delay_s: float = 0.0
    fail_once: Callable[[dict[str, Any]], int | None] | None = None
    expire_next: int = 0
    expire_done: float = 0.5
    created: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    ran: list[dict[str, Any]] = field(default_factory=list)  # every line answered, in order
    _failed: set[str] = field(default_factory=set)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # ---------------------------------------------------------------- routing

    def handle(self, method: str, path: str, content_type: str, raw: bytes) -> tuple[int, bytes]:
        """``(status, body)`` for one request under /v1/files or /v1/batches."""
        parts = path.rstrip("/").split("/")[2:]  # ["files", id, "content"] / ["batches", ...]
        with self._lock:
            if parts == ["files"] and method == "POST":
                return self._json(*self._upload(content_type, raw))
            if parts[0] == "files" and len(parts) == 3 and parts[2] == "content":
                data = self.files.get(parts[1])
                if data is None:
                    return self._json(404, _error(f"No such File object: {parts[1]}"))
                return 200, data
            if parts == ["batches"] and method == "POST":
                return self._json(*self._create(json.loads(raw or b"{}")))
            if parts == ["batches"]:
                data = [
                    self._view(b) for b in sorted(self.batches.values(), key=lambda b: -b["seq"])
                ]
                return self._json(200, {"object": "list", "data": data, "has_more": False})
            batch = self.batches.get(parts[1]) if len(parts) > 1 else None
            if parts[0] == "batches" and batch is not None:
                if len(parts) == 3 and parts[2] == "cancel" and method == "POST":
                    if batch["status"] not in TERMINAL:
                        batch["status"] = "cancelling"
                return self._json(200, self._view(batch))
            return self._json(404, _error(f"Invalid URL ({method} {path})"))

    @staticmethod
    def _json(status: int, payload: dict[str, Any]) -> tuple[int, bytes]:
        return status, json.dumps(payload).encode()

    # ---------------------------------------------------------------- files

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        fields = {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.iter_parts()
        }
        if fields.get("purpose") != b"batch" or not fields.get("file"):
            return 400, _error("a batch file needs 'file' and purpose=batch")
        return 200, self._store(fields["file"], "requests.jsonl", "batch")

    def _store(self, data: bytes, name: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1:06d}"
        self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    # ---------------------------------------------------------------- batches

    def _create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        file_id = body.get("input_file_id")
        if file_id not in self.files or body.get("completion_window") != "24h":
            return 400, _error("input_file_id must be an uploaded file; completion_window 24h")
        self.created += 1
        expire = self.expire_next > 0
        self.expire_next -= int(expire)
        batch_id = f"batch_{self.created:06d}"
        self.batches[batch_id] = {
            "id": batch_id,
            "seq": self.created,
            "input_file_id": file_id,
            "endpoint": body.get("endpoint"),
            "metadata": body.get("metadata") or {},
            "status": "validating",
            "created": time.monotonic(),
            "expire": expire,
            "output_file_id": None,
            "error_file_id": None,
            "counts": [0, 0, 0],
        }
        return 200, self._view(self.batches[batch_id])

    def _view(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The batch as the API shows it, moved on as far as time allows."""
        self._advance(batch)
        completed, failed, total = batch["counts"]
        return {
            "id": batch["id"],
            "object": "batch",
            "endpoint": batch["endpoint"],
            "input_file_id": batch["input_file_id"],
            "completion_window": "24h",
            "status": batch["status"],
            "output_file_id": batch["output_file_id"],
            "error_file_id": batch["error_file_id"],
            "created_at": int(time.time()),
            "metadata": batch["metadata"],
            "errors": None,
            "request_counts": {"completed": completed, "failed": failed, "total": total},
        }

    def _advance(self, batch: dict[str, Any]) -> None:
        if batch["status"] in TERMINAL:
            return
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].splitlines() if x]
        batch["counts"][2] = len(lines)
        if batch["status"] == "cancelling":
            self._finish(batch, lines, 0, "cancelled", "batch_cancelled")
        elif time.monotonic() - batch["created"] < self.delay_s:
            batch["status"] = "in_progress"
        elif batch["expire"]:
            self._finish(
                batch, lines, int(len(lines) * self.expire_done), "expired", "batch_expired"
            )
        else:
            self._finish(batch, lines, len(lines), "completed", "")

    def _finish(
        self, batch: dict[str, Any], lines: list[dict[str, Any]], run: int, status: str, why: str
    ) -> None:
        """Answer the first ``run`` lines; the rest never ran (``why``)."""
        output, errors = [], []
        for number, line in enumerate(lines):
            ident = {"id": f"batch_req_{batch['seq']}_{number}", "custom_id": line["custom_id"]}
            if number >= run:
                message = f"This request was not run before the batch was {status}."
                errors.append(
                    {**ident, "response": None, "error": {"code": why, "message": message}}
                )
                continue
            code, body = self._answer(line)
            result = {
                **ident,
                "response": {"status_code": code, "request_id": ident["id"], "body": body},
                "error": None,
            }
            (output if code == 200 else errors).append(result)
        batch["counts"][:2] = [len(output), len(errors)]
        for name, rows in (("output_file_id", output), ("error_file_id", errors)):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[name] = self._store(data, f"{batch['id']}_{name}.jsonl", "batch_output")["id"]
        batch["status"] = status

    def _answer(self, line: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        body, url = line.get("body") or {}, line.get("url")
        self.ran.append(line)
        status = self.fail_once(line) if self.fail_once else None
        if status and line["custom_id"] not in self._failed:
            self._failed.add(line["custom_id"])
            return status, _error(f"Error {status} while answering this request")
        if url == CHAT_URL:
            return self.server.chat_response(body, self.action)
        if url == EMBEDDINGS_URL:
            return self.server.embeddings_response(body, self.action)
        return 400, _error(f"unsupported url {url}")
