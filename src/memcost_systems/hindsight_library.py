"""``hindsight``: the Hindsight memory server itself (retain, consolidation, recall), through the
metering gateway."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

import memcost_systems.stored as store
from memcost.io import Bar
from memcost.llm import CallResult, ChatRequest, LLMClient
from memcost.memory.base import ITEM_COLUMNS, Recall, SystemBuild, read_done
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.text import content_words, count_tokens
from memcost_pgvector.store import SERVER_DIR, PgServer, alive, stop_orphaned_server
from memcost_systems.gateway import PLACEHOLDER_KEY, Gateway, Route
from memcost_systems.libraries import (
    LibraryEnvironment,
    LibrarySystem,
    keyless_environ,
    session_chunks,
    user_slot,
)
from memcost_systems.live import (
    Calls,
    HistoryLine,
    Ingest,
    IngestCall,
    LiveMemory,
    Shown,
    fact_line,
    user_lines,
)
from memcost_systems.offline import (
    offline_hindsight_consolidate,
    offline_hindsight_dedup,
    offline_hindsight_retain,
)
from memcost_systems.stored import item_rows

PINNED = "1.1.0"
ENVIRONMENT = LibraryEnvironment(
    system="hindsight",
    package="hindsight-api-slim",
    pinned=PINNED,
    supported=("1.1.0", "1.2.0"),
    venv=".venv-hindsight",
    python_env="MEMCOST_HINDSIGHT_PYTHON",
    why="Hindsight needs sqlalchemy < 2.1 and runs as a server",
    below=(
        (
            "dateparser",
            "1.5.0",
            "Hindsight 1.1.0 calls a dateparser internal that 1.5 changed, and its temporal "
            "search then fails on every question",
        ),
    ),
)
SCHEMA = "hindsight"
# For the pre-run estimate's count of write calls (HindsightLibrary.write_calls): Hindsight's
# default retain_chunk_size; characters of a retained session's "speaker: text" lines per token
# of its text, and consolidation calls per retain call, both measured on two LoCoMo
# conversations (122,174 characters for 22,245 tokens; 238 consolidations after 57 retains)
RETAIN_CHUNK_CHARS = 3_000
CHARS_PER_TOKEN = 5.5
CONSOLIDATIONS_PER_RETAIN = 238 / 57
_PROMPTS = {  # the opening of each chat call's instructions: (stage, ledger step, stand-in)
    "Extract SIGNIFICANT facts from text.": (
        "extract",
        "hindsight/retain",
        offline_hindsight_retain,
    ),
    "You are a memory consolidation system.": (
        "update",
        "hindsight/consolidate",
        offline_hindsight_consolidate,
    ),
    # consolidation's merge-or-keep verdict on a new observation close to an existing one
    # (a user message alone, once a bank holds similar observations)
    "You reconcile long-term memory observations.": (
        "update",
        "hindsight/dedup",
        offline_hindsight_dedup,
    ),
}
_PENDING = ("pending", "processing", "queued", "running")


def route(body: Mapping[str, Any]) -> Route:
    """Hindsight's chat calls told apart by their instructions (the system prompt's opening, else
    the first message's)."""
    messages = body.get("messages") or [{}]
    system = next((m for m in messages if m.get("role") == "system"), None)
    text = str((system or messages[0]).get("content") or "")
    for opening, (stage, step, offline) in _PROMPTS.items():
        if text.startswith(opening) or (system is None and f"\n{opening}" in text):
            name = step.split("/")[1]
            return Route(stage, step, f"hindsight_{name}+hindsight@{PINNED}", offline, None)
    raise ValueError(f"a Hindsight request the adapter does not know (it opens {text[:60]!r})")


def retain_item(lines: list[HistoryLine], document: str) -> dict[str, Any]:
    """Messages as one Hindsight item: ``speaker: text`` lines, speakers, a document id, the first
    message's date."""
    speakers = list(dict.fromkeys(x.speaker for x in lines))
    item = {
        "content": "\n".join(f"{x.speaker}: {x.text}" for x in lines),
        "context": f"a conversation between {' and '.join(speakers)}",
        "document_id": document,
    }
    if lines[0].session_datetime:
        item["timestamp"] = lines[0].session_datetime
    return item


def session_items(turns: pd.DataFrame) -> tuple[list[dict[str, Any]], dict[str, list]]:
    sessions: dict[int, list[HistoryLine]] = {}
    for line in user_lines(turns):
        sessions.setdefault(line.session_index, []).append(line)
    items, lines = [], {}
    for index, session in sessions.items():
        document = f"session-{index}"
        items.append(retain_item(session, document))
        lines[document] = [(f"{x.speaker}: {x.text}", x.position) for x in session]
    return items, lines


def memory_positions(
    memories: list[Mapping[str, Any]], lines: Mapping[str, list]
) -> dict[str, list[int]]:
    """The turns each memory came from: a fact's, its session's lines sharing most of its words (two
    at least, else the whole session); an observation's, its facts'."""
    out: dict[str, list[int]] = {}
    for m in memories:
        session = lines.get(str(m.get("document_id")), [])
        what = set(content_words(str(m["text"]).split(" | ")[0]))
        overlap = [(len(what & set(content_words(text))), p) for text, p in session]
        best = max((n for n, _ in overlap), default=0)
        if best >= 2:
            out[str(m["id"])] = [p for n, p in overlap if n == best]
        else:
            out[str(m["id"])] = [p for _, p in session]
    for m in memories:
        sources = m.get("source_memory_ids") or []
        if m.get("fact_type") == "observation" or sources:
            found = sorted({p for f in sources for p in out.get(str(f), [])})
            out[str(m["id"])] = found
    return out


def server_for(
    gateway: Gateway, dsn: str, llm_model: str, embedding_model: str, log: Path
) -> Server:
    env = keyless_environ()  # the gateway holds the client's key
    env.update(
        {
            "HINDSIGHT_API_DATABASE_URL": dsn,
            "HINDSIGHT_API_DATABASE_SCHEMA": SCHEMA,
            "HINDSIGHT_API_LLM_PROVIDER": "openai",
            "HINDSIGHT_API_LLM_BASE_URL": gateway.base_url,
            "HINDSIGHT_API_LLM_API_KEY": PLACEHOLDER_KEY,
            "HINDSIGHT_API_LLM_MODEL": llm_model,
            "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": gateway.base_url,
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": PLACEHOLDER_KEY,
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": embedding_model,
            "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",  # no local model, no hub
            "HINDSIGHT_API_WORKER_ID": "memcost",  # its background worker, this process's
            "HINDSIGHT_API_HOST": "127.0.0.1",
        }
    )
    return Server(ENVIRONMENT.python(), env, log)


def wait_for_consolidation(server: Server, bank: str, give_up: Callable[[], str | None]) -> None:
    while True:
        operations = server.call("GET", bank + "/operations")["operations"]
        pending = [o for o in operations if o.get("status") in _PENDING]
        failed = [o for o in operations if o.get("status") == "failed"]
        if failed:
            raise RuntimeError(f"consolidation failed: {failed[0].get('error_message')}")
        if not pending:
            return
        if reason := give_up():
            raise RuntimeError(f"stopped: {reason}")
        time.sleep(0.2)


def bank_path(slot: str) -> str:
    return "/v1/default/banks/" + urllib.parse.quote(slot)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``hindsight-api`` as a child process, ready when entered."""

    START_TIMEOUT_S = 180.0

    def __init__(self, python: Path, env: Mapping[str, str], log: Path):
        self.python, self.env, self.log = python, dict(env), log
        self.port = _free_port()
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        command = [str(self.python.parent / "hindsight-api"), "--host", "127.0.0.1"]
        with self.log.open("a", encoding="utf-8") as log:
            self._process = subprocess.Popen(
                [*command, "--port", str(self.port), "--log-level", "warning"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.env, "HINDSIGHT_API_PORT": str(self.port)},
            )
        deadline = time.monotonic() + self.START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise RuntimeError(f"the Hindsight server ended at start (exit {code}): {self.log}")
            try:
                self.call("GET", "/health", timeout=2)
                return self
            except (OSError, RuntimeError):
                time.sleep(0.25)
        self.__exit__()
        raise RuntimeError(f"the Hindsight server did not start in {self.START_TIMEOUT_S:.0f} s")

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float = 600
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return json.loads(reply.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            raise RuntimeError(
                f"HTTP {exc.code} from Hindsight {method} {path}: {detail}"
            ) from None
        except OSError as exc:  # refused, reset, timed out: say whether the server is gone
            why = self.gone(wait_s=2.0) or "no answer from the Hindsight server"
            raise RuntimeError(f"{why} ({method} {path}: {exc})") from None

    def gone(self, wait_s: float = 0.0) -> str | None:
        """Why the server's process is no longer running (``None`` while it runs)."""
        process = self._process
        if process is None:
            return None
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None
        code = process.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        return f"the Hindsight server ended ({how}; its log: {self.log})"

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class HindsightLibrary(LibrarySystem):
    name = "hindsight"
    answers_as = "memory_hindsight"
    describes = "the Hindsight server (hindsight-api 1.1.0): retain, consolidation, recall"
    route = staticmethod(route)
    environment = ENVIRONMENT
    embedding_step = "hindsight/embed"
    defaults = {
        "llm_model": EXTRACTION_MODEL,
        "embedding_model": EMBEDDING_MODEL,
        "budget": "mid",  # recall's search breadth: low | mid | high (Hindsight's default mid)
        "max_tokens": 4096,  # recall's token budget (Hindsight's default)
        # served turn by turn (notebook 06): messages per retained item (Total Recall §3's
        # ingest interval, as for Mem0)
        "retain_interval": 10,
    }
    # A fact extraction per chunk and a consolidation per batch of new facts, each behind long
    # instructions (12,500 and 17,000 characters), the consolidation also with the observations
    # it may touch. On two LoCoMo conversations (offline stand-ins, measured ledger) the write
    # cost 5.1 times the paper's memory's, nearly all of it consolidation prompts (3.3M tokens
    # in 238 calls); ten passes price it at five times (the estimate's unit: see cognee's)
    write_passes = 10.0
    write_update_phase = False
    write_model_setting = "llm_model"

    @classmethod
    def write_calls(cls, settings, stats, segments):
        """Retain calls, one per chunk of ``RETAIN_CHUNK_CHARS`` of a session; consolidation calls
        at the rate measured on two LoCoMo conversations (238 for 57 retains)."""
        chunks = session_chunks(stats, RETAIN_CHUNK_CHARS / CHARS_PER_TOKEN)
        return int(chunks * (1 + CONSOLIDATIONS_PER_RETAIN)), 1.0

    @classmethod
    def uses_run_server(cls, settings: Mapping[str, Any]) -> bool:
        return True  # the Hindsight server's database is the run's private PostgreSQL

    _pg: PgServer | None = None

    def _library(self, gateway: Gateway) -> Server:
        if self._pg is None:
            self._pg = PgServer(self.ds.root.parent / SERVER_DIR)
        return server_for(
            gateway,
            self._pg.start(),
            str(self.settings["llm_model"]),
            str(self.settings["embedding_model"]),
            self.folder / "hindsight.log",
        )

    def close(self) -> None:
        if self._pg is not None:
            self._pg.stop()
            self._pg = None

    def _bank(self, user: str) -> str:
        return bank_path(user_slot(self.dataset, user))

    def _build_user(
        self,
        server: Server,
        gateway: Gateway,
        user: str,
        turns: pd.DataFrame,
        fingerprint: str,
        report: SystemBuild,
    ) -> None:
        bank = self._bank(user)
        items, lines = session_items(turns)
        memories, error = None, None
        with gateway.context(conversation_id=user, question_id=None):
            try:
                try:  # a user redone after a failure starts from an empty bank
                    server.call("DELETE", bank)
                except RuntimeError:
                    pass  # no such bank yet
                server.call("POST", bank + "/memories", {"async": False, "items": items})
                wait_for_consolidation(
                    server, bank, lambda: gateway.first_failure(conversation_id=user)
                )
                memories = server.call("GET", bank + "/memories/list?limit=100000")["items"]
            except RuntimeError as exc:
                error = f"Hindsight: {exc}"
        if not self._held(gateway, user, report, error) or memories is None:
            return
        positions = memory_positions(memories, lines)
        rows = [
            {
                "item_id": m["id"],
                "kind": "observation" if m.get("fact_type") == "observation" else "fact",
                "text": m["text"],
                "session_datetime": m.get("mentioned_at"),
                "positions": positions[str(m["id"])],
            }
            for m in sorted(memories, key=lambda m: (str(m.get("date")), str(m["text"])))
        ]
        self._write(gateway, user, item_rows(rows), fingerprint, report)

    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        out: dict[str, Recall] = {}
        built = set(read_done(self.folder))
        todo = [q for q in questions.to_dict("records") if str(q["conversation_id"]) in built]
        for q in questions.to_dict("records"):  # a user whose build failed: nothing to recall
            if str(q["conversation_id"]) not in built:
                out[str(q["question_id"])] = Recall(pd.DataFrame(columns=list(ITEM_COLUMNS)), 0.0)
        if not todo:
            return out
        positions: dict[str, dict[str, list[int]]] = {}
        try:
            with self._gateway(client) as gateway, self._library(gateway) as server:
                for q in Bar(todo, desc="hindsight recall", unit="question"):
                    user, qid = str(q["conversation_id"]), str(q["question_id"])
                    if user not in positions:
                        stored = store.read_user(self.folder, user)[0]
                        pairs = zip(stored["item_id"], stored["positions"], strict=True)
                        positions[user] = dict(pairs)
                    with gateway.context(conversation_id=user, question_id=qid):
                        t0 = time.perf_counter()
                        try:
                            found = server.call(
                                "POST",
                                self._bank(user) + "/memories/recall",
                                {
                                    "query": str(q["question"]),
                                    "budget": self.settings["budget"],
                                    "max_tokens": int(self.settings["max_tokens"]),
                                },
                            )["results"]
                        except RuntimeError:
                            gateway.raise_fatal()
                            raise
                        latency = time.perf_counter() - t0
                    gateway.raise_fatal()
                    rows = [
                        {
                            "item_id": m["id"],
                            "kind": "observation" if m.get("type") == "observation" else "fact",
                            "text": m["text"],
                            "session_datetime": m.get("mentioned_at"),
                            "score": (m.get("scores") or {}).get("final"),
                            "tokens": count_tokens(m["text"]),
                            "positions": list(positions[user].get(m["id"], [])),
                        }
                        for m in found
                    ]
                    out[qid] = Recall(pd.DataFrame(rows, columns=list(ITEM_COLUMNS)), latency)
        finally:
            self.close()
        return out

    def live(self, user: str) -> HindsightLive:
        return HindsightLive(self, user)


# --------------------------------------------------------------------------- served turn by turn
class TurnRelay:
    """The gateway's client while banks are served turn by turn: Hindsight's requests go to the
    served turn's calls (a retain's, as its ingest calls)."""

    STAGES = {"extract": "ingest_extract", "update": "ingest_update"}

    def __init__(self) -> None:
        self.calls: Calls | None = None
        self.done: Ingest | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def serving(self, calls: Calls, done: Ingest | None) -> Iterator[None]:
        self.calls, self.done = calls, done
        try:
            yield
        finally:
            self.calls, self.done = None, None

    def chat(self, request: ChatRequest, offline: Callable[[ChatRequest], str]) -> CallResult:
        if self.calls is None:
            raise RuntimeError("a Hindsight call outside a served turn")
        stage = self.STAGES.get(request.stage, request.stage)
        result = self.calls.chat(request, offline, None, stage=stage)
        if self.done is not None:
            with self._lock:  # the server may call from several threads
                self.done.calls.append(IngestCall(stage, result))
        return result

    def embed(
        self, texts: list[str], *, model: str, dimensions: Any = None, tags: Any = None, **_: Any
    ) -> Any:
        if self.calls is None:
            raise RuntimeError("a Hindsight call outside a served turn")
        vectors = self.calls.embed(list(texts), model=model, tags=dict(tags or {}))
        if self.done is not None:
            with self._lock:
                self.done.embedded_tokens += sum(count_tokens(t) for t in texts)
        return vectors


SERVING_ROOT = "memcost-hindsight-serving"  # under the system's temporary folder


def serving_folder(root: Path | None = None) -> Path:
    """A new folder for a served Hindsight's database and log; those of processes gone are removed
    first."""
    root = root or Path(tempfile.gettempdir()) / SERVING_ROOT
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        owner = old.name.split("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not alive(int(owner)):
            stop_orphaned_server(old / SERVER_DIR / "pgdata")
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))


class ServingHindsight:
    """One Hindsight server, its database and gateway, for the serving study's runs of one model
    (:func:`close_served` stops them)."""

    def __init__(self, llm_model: str, embedding_model: str):
        self.relay = TurnRelay()
        self.folder = serving_folder()
        self.gateway = Gateway(
            self.relay,  # type: ignore[arg-type] - the client's two calls, per turn
            route,
            embedding_step=HindsightLibrary.embedding_step,
            tags={"dataset": "serving", "system": HindsightLibrary.answers_as},
        )
        self.pg = PgServer(self.folder / SERVER_DIR)
        self.gateway.__enter__()
        try:
            log = self.folder / "hindsight.log"
            dsn = self.pg.start()
            self.server = server_for(self.gateway, dsn, llm_model, embedding_model, log)
            self.server.__enter__()
        except BaseException:
            self.pg.stop()
            self.gateway.__exit__()
            raise

    def call(
        self, calls: Calls, method: str, path: str, body: Any = None, *, done: Ingest | None = None
    ) -> dict[str, Any]:
        """One request, its model calls through ``calls`` (kept in ``done``); a run-level stop is
        raised again."""
        with self.relay.serving(calls, done):
            try:
                return self.server.call(method, path, body)
            finally:
                self.gateway.raise_fatal()

    def retain(self, calls: Calls, bank: str, item: Mapping[str, Any], done: Ingest) -> None:

        before = len(self.gateway.failures())

        def failed() -> str | None:  # a call of this retain failed, or one the gateway refused
            refused = self.gateway.failures()[before:]
            return next((c.result.error for c in done.calls if not c.result.ok), None) or (
                refused[0]["error"] if refused else None
            )

        self.call(calls, "POST", bank + "/memories", {"async": False, "items": [item]}, done=done)
        with self.relay.serving(calls, done):
            try:
                wait_for_consolidation(self.server, bank, failed)
            finally:
                self.gateway.raise_fatal()

    def close(self) -> None:
        self.server.__exit__()
        self.pg.stop()
        self.gateway.__exit__()
        shutil.rmtree(self.folder / SERVER_DIR, ignore_errors=True)


_SERVED: dict[tuple[str, str], ServingHindsight] = {}
_BANKS = itertools.count(1)


def close_served() -> None:
    while _SERVED:
        _SERVED.popitem()[1].close()


atexit.register(close_served)


class HindsightLive(LiveMemory):
    """One user's bank served turn by turn: a recall each message; every ``retain_interval``
    messages a retain, its consolidation waited for."""

    def __init__(self, system: HindsightLibrary, user: str):
        self.system, self.user = system, user
        self.bank = bank_path(f"serving-{next(_BANKS)}-{user}")
        self.pending: list[HistoryLine] = []
        self.memories: list[str] = []  # what the bank holds (facts and observations)
        self.memory_tokens = 0

    def _key(self) -> tuple[str, str]:
        settings = self.system.settings
        return str(settings["llm_model"]), str(settings["embedding_model"])

    def _service(self) -> ServingHindsight:
        key = self._key()
        if key not in _SERVED:
            type(self.system).check_available()
            _SERVED[key] = ServingHindsight(*key)
        return _SERVED[key]

    def state(self) -> dict[str, int]:
        return {
            "memory_items": len(self.memories),
            "memory_tokens": self.memory_tokens,
            "pending_tokens": sum(count_tokens(f"{x.speaker}: {x.text}\n") for x in self.pending),
        }

    def recall(self, calls: Calls, text: str) -> list[Shown]:
        if not self.memories:
            return []
        settings = self.system.settings
        body = {
            "query": text,
            "budget": settings["budget"],
            "max_tokens": int(settings["max_tokens"]),
        }
        found = self._service().call(calls, "POST", self.bank + "/memories/recall", body)
        texts = [str(m["text"]) for m in found["results"]]
        lines = [fact_line(t) for t in texts]
        return [Shown(t, line, count_tokens(line)) for t, line in zip(texts, lines, strict=True)]

    def add(self, calls: Calls, line: HistoryLine) -> Ingest:
        self.pending.append(line)
        interval = int(self.system.settings["retain_interval"])
        if len(self.pending) < interval:
            return Ingest()
        done = Ingest([f"{len(self.pending)} turns since the last retain (interval {interval})"])
        lines, self.pending = self.pending, []
        item = retain_item(lines, f"turns-{lines[0].position}-{lines[-1].position}")
        service = self._service()
        try:
            service.retain(calls, self.bank, item, done)
        except RuntimeError:
            if all(c.result.ok for c in done.calls):
                raise  # the server failed, not a call of this turn: the replay stops
            return done  # a failed call is this turn's failed row; its messages are dropped
        listed = service.call(calls, "GET", self.bank + "/memories/list?limit=100000")
        self.memories = [str(m["text"]) for m in listed["items"]]
        self.memory_tokens = sum(count_tokens(fact_line(t)) for t in self.memories)
        return done

    def close(self) -> None:
        service = _SERVED.get(self._key())
        if service is not None and self.memories:
            try:
                service.server.call("DELETE", self.bank)
            except RuntimeError:
                pass  # a bank left in a temporary database is gone with it
