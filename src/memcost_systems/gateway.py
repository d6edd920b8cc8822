"""A metering gateway: an OpenAI-compatible endpoint on 127.0.0.1 that hands every request of a
third-party library (mem0, ...) to the repository's one client."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memcost.calls import canonical_json
from memcost.catalog import generation_params
from memcost.llm import BudgetExceeded, ChatRequest, LLMClient, LLMError

PLACEHOLDER_KEY = "memcost-gateway"  # what the library is given instead of a key


@dataclass(frozen=True)
class Route:
    """How the gateway sends one chat request: its stage, the library's step, prompt version,
    effort, offline stand-in."""

    stage: str
    step: str  # e.g. "mem0/extract"
    prompt_version: str
    offline: Callable[[ChatRequest], str]
    reasoning_effort: str | None = None


@dataclass
class Gateway:
    """One library's endpoint for one stage of a run (``with Gateway(...) as g``)."""

    client: LLMClient
    route: Callable[[Mapping[str, Any]], Route]  # a chat body to its route
    embedding_step: str = "embed"
    tags: dict[str, Any] = field(default_factory=dict)
    _failures: list[dict[str, Any]] = field(default_factory=list)
    _chats: list[dict[str, Any]] = field(default_factory=list)  # the tags of each chat served
    _fatal: BaseException | None = None
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the gateway is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Gateway:
        gateway = self

        class BoundHandler(_GatewayHandler):
            owner = gateway

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), BoundHandler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @contextlib.contextmanager
    def context(self, **tags: Any) -> Iterator[None]:
        """The ledger tags of the calls made inside the block."""
        with self._lock:
            before, self.tags = self.tags, {**self.tags, **tags}
        try:
            yield
        finally:
            with self._lock:
                self.tags = before

    def failures(self, **where: Any) -> list[dict[str, Any]]:
        with self._lock:
            return [
                f for f in self._failures if all(f["tags"].get(k) == v for k, v in where.items())
            ]

    def first_failure(self, **where: Any) -> str | None:
        """The first failed call whose tags include ``where``, or a run-level stop, in one line."""
        if self._fatal is not None:
            return f"{type(self._fatal).__name__}: {self._fatal}"
        failed = self.failures(**where)
        return failed[0]["error"] if failed else None

    def chats(self, **where: Any) -> int:
        with self._lock:
            return sum(all(t.get(k) == v for k, v in where.items()) for t in self._chats)

    def raise_fatal(self) -> None:
        """Re-raise a run-level stop a library may have swallowed."""
        if self._fatal is not None:
            raise self._fatal

    # --- the two endpoints -------------------------------------------------------------------
    def chat(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        route = self.route(body)
        model = str(body.get("model"))
        messages = tuple(
            (str(m.get("role")), _text(m.get("content"))) for m in body.get("messages") or []
        )
        response_format = body.get("response_format") or {}
        schema = response_format.get("json_schema") if isinstance(response_format, dict) else None
        request = ChatRequest(
            model=model,
            messages=messages,
            stage=route.stage,
            prompt_version=route.prompt_version,
            # a JSON schema goes on to the model as the library sent it (cognee's structured
            # output); a bare JSON mode as JSON mode (mem0's)
            json_mode=response_format.get("type") == "json_object",
            json_schema=(
                canonical_json(schema) if response_format.get("type") == "json_schema" else None
            ),
            payload={"messages": [{"role": r, "content": c} for r, c in messages]},
            tags={**self.tags, "library_step": route.step},
            **generation_params(model, route.reasoning_effort),
        )
        with self._lock:
            self._chats.append(dict(request.tags))
        try:
            result = self.client.chat(request, offline=route.offline)
        except LLMError as exc:  # a run-level stop: remembered, and an error for the library
            return self._stop(exc, request.tags)
        if result.error:
            status = 400 if result.failure_kind == "rejected" else 502
            self._record(request.tags, result.error)
            return status, _error(result.error, status)
        return 200, {
            "id": f"chatcmpl-{result.request_hash[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": result.text},
                }
            ],
            "usage": {
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
                "total_tokens": result.usage.prompt_tokens + result.usage.completion_tokens,
            },
        }

    def embeddings(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else [_text(t) for t in inputs or []]
        model = str(body.get("model"))
        tags = {**self.tags, "library_step": self.embedding_step}
        try:
            vectors = self.client.embed(
                texts, model=model, dimensions=body.get("dimensions"), tags=tags, progress=False
            )
        except BudgetExceeded as exc:
            return self._stop(exc, tags)
        except LLMError as exc:
            self._record(tags, str(exc))
            return 502, _error(str(exc), 502)
        return 200, {
            "object": "list",
            "model": model,
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

    def _record(self, tags: Mapping[str, Any], error: str) -> None:
        with self._lock:
            self._failures.append({"tags": dict(tags), "error": error})

    def _stop(self, exc: BaseException, tags: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self._fatal = self._fatal or exc
        self._record(tags, str(exc))
        return 503, _error(str(exc), 503)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _error(message: str, status: int) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "code": None}}


class _GatewayHandler(BaseHTTPRequestHandler):
    owner: Gateway
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # the ledger is the log
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": []})
        else:
            self._send(404, _error(f"no such path {self.path}", 404))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send(400, _error("the body is not JSON", 400))
            return
        try:
            if self.path.endswith("/chat/completions"):
                status, payload = self.owner.chat(body)
            elif self.path.endswith("/embeddings"):
                status, payload = self.owner.embeddings(body)
            else:
                status, payload = 404, _error(f"no such path {self.path}", 404)
        except Exception as exc:  # noqa: BLE001 - a bug or an unknown prompt: the item fails
            message = f"the gateway could not serve this request: {type(exc).__name__}: {exc}"
            self.owner._record(dict(self.owner.tags), message)
            status, payload = 500, _error(message, 500)
        self._send(status, payload)

    def _send(self, status: int, payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
