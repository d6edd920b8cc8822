"""``cognee``: the cognee library itself (remember, then recall), through the metering gateway."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

import memcost_systems.stored as store
from memcost.io import Bar
from memcost.llm import LLMClient
from memcost.memory.base import ITEM_COLUMNS, Recall, SystemBuild, read_done
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.text import count_tokens
from memcost_systems.gateway import PLACEHOLDER_KEY, Gateway, Route
from memcost_systems.libraries import (
    LibraryEnvironment,
    LibrarySystem,
    keyless_environ,
    session_chunks,
    user_slot,
)
from memcost_systems.live import user_lines
from memcost_systems.offline import offline_cognee_graph, offline_cognee_summary
from memcost_systems.stored import item_rows

PINNED = "1.6.5"
ENVIRONMENT = LibraryEnvironment(
    system="cognee",
    package="cognee",
    pinned=PINNED,
    supported=("1.6.0", "1.7.0"),
    venv=".venv-cognee",
    python_env="MEMCOST_COGNEE_PYTHON",
    why="cognee needs pandas < 3",
)
WORKER = Path(__file__).with_name("cognee_worker.py")
# cognee's automatic chunk size: the smaller of the embedding model's input limit
# (text-embedding-3-small: 8,191 tokens) and half its LLM's 16,384 (CogneeLibrary.write_calls)
AUTOMATIC_CHUNK_TOKENS = 8_191
# cognee's structured outputs, by the name of the schema it sends: (ledger step, stand-in)
_SCHEMAS = {
    "KnowledgeGraph": ("cognee/extract_graph", offline_cognee_graph),
    "SummarizedContent": ("cognee/summarize", offline_cognee_summary),
}
# Graph edges cognee draws between its own records (chunk of document, entity in chunk, ...):
# structure, not something the conversation says
_STRUCTURAL = frozenset({"made_from", "is_part_of", "contains", "is_a", "mentioned_in"})


def route(body: Mapping[str, Any]) -> Route:
    response_format = body.get("response_format") or {}
    name = (response_format.get("json_schema") or {}).get("name")
    if name not in _SCHEMAS:
        raise ValueError(
            f"a cognee request the adapter does not know (structured output {name!r}; "
            f"known: {', '.join(_SCHEMAS)})"
        )
    step, offline = _SCHEMAS[name]
    # cognee sends no reasoning effort: the model's default, as a cognee user gets it
    return Route("extract", step, f"cognee_{name}+cognee@{PINNED}", offline, None)


def dataset_name(dataset: str, user: str) -> str:
    return user_slot(dataset, user)


def session_documents(turns: pd.DataFrame) -> tuple[list[str], dict[str, int]]:
    by_session: dict[int, list[str]] = {}
    positions: dict[str, int] = {}
    for line in user_lines(turns):
        lines = by_session.setdefault(line.session_index, [])
        if not lines and line.session_datetime:
            lines.append(f"Session date: {line.session_datetime}")
        text = f"{line.speaker}: {line.text}"
        lines.append(text)
        positions.setdefault(text, line.position)
    return ["\n".join(lines) for lines in by_session.values()], positions


def _chunk_positions(text: str, positions: Mapping[str, int]) -> list[int]:
    return sorted({positions[t] for t in text.splitlines() if t in positions})


def _date_of(text: str) -> str | None:
    first = text.lstrip().split("\n", 1)[0]
    if not first.startswith("Session date:"):
        return None
    return first.removeprefix("Session date:").strip()


def stored_items(graph: Mapping[str, Any], positions: Mapping[str, int]) -> pd.DataFrame:
    """What cognee keeps for a user: chunks, summaries, entities, relations."""
    rows = []
    for node in graph["nodes"]:
        kind = node.get("type")
        if kind == "DocumentChunk":
            text = str(node.get("text") or "")
            rows.append(
                {
                    "item_id": node["id"],
                    "kind": "chunk",
                    "text": text,
                    "session_datetime": _date_of(text),
                    "positions": _chunk_positions(text, positions),
                }
            )
        elif kind == "TextSummary":
            rows.append({"item_id": node["id"], "kind": "summary", "text": node.get("text")})
        elif kind == "Entity":
            rows.append(
                {
                    "item_id": node["id"],
                    "kind": "entity",
                    "text": f"{node.get('name')}: {node.get('description')}",
                }
            )
    for i, edge in enumerate(graph["edges"]):
        if edge["relationship"] in _STRUCTURAL:
            continue
        rows.append(
            {
                "item_id": f"edge-{i}",
                "kind": "triple",
                "text": edge.get("description") or edge["relationship"],
                "detail": {"relation": edge["relationship"]},
            }
        )
    # cognee's graph comes back in no fixed order: chunks by their turns, the rest by text
    order = {"chunk": 0, "summary": 1, "entity": 2, "triple": 3}
    rows.sort(
        key=lambda r: (order[r["kind"]], min(r.get("positions") or [0]), str(r["text"] or ""))
    )
    return item_rows([{**r, "text": str(r["text"] or "")} for r in rows])


def context_items(context: str, chunks: pd.DataFrame) -> pd.DataFrame:
    """cognee's recall context as items, best first (a context of another shape: one item)."""
    body = context
    if body.startswith("The question is:"):  # the wrapper cognee's answer model would get
        rest = body.split("\n", 1)[1] if "\n" in body else ""
        if rest.count("`") >= 2:
            body = rest[rest.index("`") + 1 : rest.rindex("`")]
    by_text = dict(zip(chunks["text"], chunks["positions"], strict=True)) if len(chunks) else {}
    rows: list[dict[str, Any]] = []
    sections = re.split(r"^## (.+)\n", body, flags=re.MULTILINE)
    if len(sections) < 3:
        rows.append({"kind": "context", "text": body.strip()})
    for title, text in zip(sections[1::2], sections[2::2], strict=True):
        if title == "Relevant passages":
            for passage in text.strip().split("\n---\n"):
                found = by_text.get(passage.strip())
                if found is None:  # a passage cut from a chunk: the chunks that hold it
                    found = [p for t, ps in by_text.items() if passage.strip() in t for p in ps]
                rows.append(
                    {
                        "kind": "chunk",
                        "text": passage.strip(),
                        "session_datetime": _date_of(passage),
                        "positions": sorted(set(found)),
                    }
                )
        elif title == "Relevant entities":
            for block in re.split(r"^### ", text.strip(), flags=re.MULTILINE):
                if block.strip():
                    rows.append({"kind": "entity", "text": block.strip()})
        else:
            for line in text.strip().splitlines():
                if line.strip():
                    rows.append({"kind": "fact", "text": line.strip().removeprefix("- ")})
    items = [
        {
            "item_id": f"{r['kind']}-{i}",
            "kind": r["kind"],
            "text": r["text"],
            "session_datetime": r.get("session_datetime"),
            "score": None,
            "tokens": count_tokens(r["text"]),
            "positions": r.get("positions") or [],
        }
        for i, r in enumerate(rows)
        if r["text"]
    ]
    return pd.DataFrame(items, columns=list(ITEM_COLUMNS))


class Worker:
    """cognee's side, a child process in cognee's environment, started when first asked."""

    POLL_S = 0.2  # how often a waiting request asks whether to give up

    def __init__(self, python: Path, env: Mapping[str, str], log: Path):
        self.python, self.env, self.log = python, dict(env), log
        self._process: subprocess.Popen | None = None
        self._answers: int | None = None  # the read end of the answers' pipe

    def __enter__(self) -> Worker:
        return self

    def _start(self) -> subprocess.Popen:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        read, write = os.pipe()
        with self.log.open("a", encoding="utf-8") as log:
            self._process = subprocess.Popen(
                [str(self.python), str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**self.env, "MEMCOST_WORKER_FD": str(write)},
                pass_fds=(write,),
                text=True,
            )
        os.close(write)
        self._answers = read
        return self._process

    def ask(self, give_up: Callable[[], str | None] = lambda: None, **request: Any) -> dict:
        """The worker's answer; if ``give_up()`` names a reason meanwhile (cognee retries for four
        minutes), the worker is stopped and the answer is that failure."""
        process = self._process or self._start()
        assert process.stdin is not None and self._answers is not None
        received = b""
        try:
            process.stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
            process.stdin.flush()
            while not received.endswith(b"\n"):
                if select.select([self._answers], [], [], self.POLL_S)[0]:
                    chunk = os.read(self._answers, 1 << 16)
                    if not chunk:
                        break
                    received += chunk
                elif reason := give_up():
                    self.stop(kill=True)
                    return {"ok": False, "error": f"stopped: {reason}"}
        except BrokenPipeError:
            pass
        if not received.endswith(b"\n"):
            code = process.wait(timeout=30)
            self.stop()
            raise RuntimeError(
                f"the cognee worker ended (exit {code}) during {request.get('op')}; "
                f"its log: {self.log}"
            )
        return json.loads(received)

    def stop(self, *, kill: bool = False) -> None:
        process, self._process = self._process, None
        if process is not None:
            try:
                if kill:
                    process.kill()
                elif process.poll() is None:
                    process.stdin.write('{"op": "stop"}\n')
                    process.stdin.close()
                process.wait(timeout=60)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
        if self._answers is not None:
            os.close(self._answers)
            self._answers = None

    def __exit__(self, *exc: object) -> None:
        self.stop()


class CogneeLibrary(LibrarySystem):
    name = "cognee"
    answers_as = "memory_cognee"
    describes = "the cognee library (cognee 1.6.5): remember, then recall's context"
    route = staticmethod(route)
    environment = ENVIRONMENT
    embedding_step = "cognee/embed"
    defaults = {
        "llm_model": EXTRACTION_MODEL,
        "embedding_model": EMBEDDING_MODEL,
        "query_type": "HYBRID_COMPLETION",
        # recall's top_k: how many graph elements its search ranks, not how many items a question
        # gets (so notebook 02 does not count its questions as short of top_k)
        "recall_top_k": 15,
        "chunk_size": None,  # tokens per chunk; None: cognee's own (a LoCoMo session whole)
        "self_improvement": False,
    }
    # A graph and a summary per chunk, each behind some 3,000 tokens of cognee's instructions.
    # On two LoCoMo conversations (offline stand-ins, measured ledger) the write cost was 1.96
    # times the paper's memory's; four passes (the estimate's unit: half a pass each for the
    # paper's extraction and update) price it at twice the paper's memory
    write_passes = 4.0
    write_update_phase = False
    write_model_setting = "llm_model"
    build_settings = ("chunk_size", "self_improvement")

    @classmethod
    def write_calls(cls, settings, stats, segments):
        """A graph and a summary call per chunk of a session (38 each on two LoCoMo
        conversations)."""
        return 2 * session_chunks(stats, settings.get("chunk_size") or AUTOMATIC_CHUNK_TOKENS), 1.0

    def _library(self, gateway: Gateway) -> Worker:
        home = self.folder / "cognee_home"
        env = keyless_environ()  # the gateway holds the client's key
        env.update(
            {
                "TELEMETRY_DISABLED": "1",
                "COGNEE_SKIP_CONNECTION_TEST": "true",  # the gateway answers or fails the stage
                "CACHING": "false",  # no session memory shared between questions
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm would fetch it from GitHub
                "LOG_LEVEL": "WARNING",
                "LLM_PROVIDER": "openai",
                "LLM_MODEL": f"openai/{self.settings['llm_model']}",
                "LLM_ENDPOINT": gateway.base_url,
                "LLM_API_KEY": PLACEHOLDER_KEY,
                "EMBEDDING_PROVIDER": "openai",
                "EMBEDDING_MODEL": f"openai/{self.settings['embedding_model']}",
                "EMBEDDING_ENDPOINT": gateway.base_url,
                "EMBEDDING_API_KEY": PLACEHOLDER_KEY,
                "EMBEDDING_DIMENSIONS": str(self.embedding_dims),
                "SYSTEM_ROOT_DIRECTORY": str(home / "system"),
                "DATA_ROOT_DIRECTORY": str(home / "data"),
            }
        )
        return Worker(ENVIRONMENT.python(), env, self.folder / "cognee.log")

    def _build_user(
        self,
        worker: Worker,
        gateway: Gateway,
        user: str,
        turns: pd.DataFrame,
        fingerprint: str,
        report: SystemBuild,
    ) -> None:
        documents, positions = session_documents(turns)
        with gateway.context(conversation_id=user, question_id=None):
            answer = worker.ask(
                # a failed call fails the user whatever cognee makes of it: stop waiting
                give_up=lambda: gateway.first_failure(conversation_id=user),
                op="remember",
                dataset=dataset_name(self.dataset, user),
                documents=documents,
                chunk_size=self.settings["chunk_size"],
                self_improvement=bool(self.settings["self_improvement"]),
            )
        error = None if answer["ok"] else f"cognee raised {answer['error']}"
        if self._held(gateway, user, report, error):
            self._write(
                gateway, user, stored_items(answer["graph"], positions), fingerprint, report
            )

    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        out: dict[str, Recall] = {}
        built = set(read_done(self.folder))
        chunks: dict[str, pd.DataFrame] = {}
        with self._gateway(client) as gateway, self._library(gateway) as worker:
            for q in Bar(questions.to_dict("records"), desc="cognee recall", unit="question"):
                user, qid = str(q["conversation_id"]), str(q["question_id"])
                if user not in built:  # its build failed: nothing to recall
                    out[qid] = Recall(pd.DataFrame(columns=list(ITEM_COLUMNS)), 0.0)
                    continue
                if user not in chunks:
                    items = store.read_user(self.folder, user)[0]
                    chunks[user] = items.loc[items["kind"] == "chunk"]
                with gateway.context(conversation_id=user, question_id=qid):
                    t0 = time.perf_counter()
                    answer = worker.ask(
                        give_up=lambda: gateway.first_failure(question_id=qid),  # noqa: B023
                        op="recall",
                        dataset=dataset_name(self.dataset, user),
                        query=str(q["question"]),
                        query_type=self.settings["query_type"],
                        top_k=int(self.settings["recall_top_k"]),
                    )
                    latency = time.perf_counter() - t0
                gateway.raise_fatal()
                if not answer["ok"]:
                    raise RuntimeError(f"cognee recall failed for {qid}: {answer['error']}")
                out[qid] = Recall(context_items(answer["context"], chunks[user]), latency)
        return out
