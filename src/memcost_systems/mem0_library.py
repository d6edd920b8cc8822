"""``mem0``: the mem0 library itself (``mem0ai``), configured as the study configured it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import pandas as pd

from memcost.llm import LLMClient
from memcost.memory.base import ITEM_COLUMNS, Recall, SystemBuild
from memcost.memory.segments import BATCH_SIZE, MAX_SEGMENT_CHARS, segment_conversation
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.text import count_tokens
from memcost_pgvector.store import SERVER_DIR, PgServer
from memcost_systems.gateway import PLACEHOLDER_KEY, Gateway, Route
from memcost_systems.libraries import LibrarySystem
from memcost_systems.offline import NO_SESSION_DATE, offline_mem0_extract, offline_mem0_update
from memcost_systems.prompts import MEM0_EXTRACT
from memcost_systems.stored import item_rows

PINNED = "1.0.4"
SUPPORTED = ("1.0.0", "2.0.0")  # [low, high): the 1.0 line, the paper's pipeline
_UPDATE_OPENING = "You are a smart memory manager which controls the memory of a system."


def library_version() -> str:
    try:
        version = metadata.version("mem0ai")
    except metadata.PackageNotFoundError:
        raise ValueError(
            f"memory system mem0 needs the mem0ai package: pip install "
            f"mem0ai=={PINNED} (make setup installs it)"
        ) from None
    parts = tuple(int(p) for p in version.split(".")[:3] if p.isdigit())
    low, high = (tuple(int(p) for p in v.split(".")) for v in SUPPORTED)
    if not low <= parts < high:
        raise ValueError(
            f"mem0ai {version} is not supported: the adapter supports "
            f">={SUPPORTED[0]},<{SUPPORTED[1]} (the paper's pipeline; {PINNED} "
            "pinned)"
        )
    return version


def _no_telemetry(*args: Any, **kwargs: Any) -> None:
    return None


def route(body: dict[str, Any]) -> Route:
    messages = body.get("messages") or []
    system = next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    if system.startswith(MEM0_EXTRACT.system[:60]):
        return Route(
            "extract",
            "mem0/extract",
            f"{MEM0_EXTRACT.id}+mem0ai@{PINNED}",
            offline_mem0_extract,
            "low",
        )
    if user.lstrip().startswith(_UPDATE_OPENING):
        return Route(
            "update", "mem0/update", f"mem0_update+mem0ai@{PINNED}", offline_mem0_update, "low"
        )
    raise ValueError(
        "a mem0 request the adapter does not know (neither its extraction nor its update prompt)"
    )


class Mem0Library(LibrarySystem):
    name = "mem0"
    answers_as = "memory_mem0"
    describes = "the mem0 library (mem0ai 1.0.4) configured as §3.1, through the gateway"
    route = staticmethod(route)
    embedding_step = "mem0/embed"
    prompts = (MEM0_EXTRACT.id,)
    build_settings = ("batch_size", "max_segment_chars", "vector_store")
    defaults = {
        "extraction_model": EXTRACTION_MODEL,
        "embedding_model": EMBEDDING_MODEL,
        "batch_size": BATCH_SIZE,
        "max_segment_chars": MAX_SEGMENT_CHARS,
        "top_k": 20,
        "vector_store": "pgvector",
    }

    _server: PgServer | None = None

    @classmethod
    def library_version(cls) -> str:
        return library_version()  # installed in this environment

    def _memory(self, gateway: Gateway) -> Any:
        os.environ["MEM0_TELEMETRY"] = "False"  # before the import: nothing leaves the machine
        os.environ.setdefault("MEM0_DIR", str(self.folder / "mem0_home"))
        import mem0.memory.main as mem0_main
        from mem0 import Memory

        mem0_main.capture_event = _no_telemetry  # its posthog client is disabled too; no event

        self.folder.mkdir(parents=True, exist_ok=True)
        config = {
            "llm": {
                "provider": "openai",
                "config": {
                    "model": self.settings["extraction_model"],
                    "api_key": PLACEHOLDER_KEY,
                    "openai_base_url": gateway.base_url,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": self.settings["embedding_model"],
                    "api_key": PLACEHOLDER_KEY,
                    "openai_base_url": gateway.base_url,
                    "embedding_dims": self.embedding_dims,
                },
            },
            "vector_store": self._vector_store(),
            "history_db_path": str(self.folder / "history.db"),
            "custom_fact_extraction_prompt": MEM0_EXTRACT.system,
        }
        return Memory.from_config(config)

    @classmethod
    def uses_run_server(cls, settings: Mapping[str, Any]) -> bool:
        return settings.get("vector_store") == "pgvector"

    def _vector_store(self) -> dict[str, Any]:
        collection = f"mem0_{self.dataset}"
        if self.settings["vector_store"] == "faiss":
            return {
                "provider": "faiss",
                "config": {
                    "collection_name": collection,
                    "path": str(self.folder / "faiss"),
                    "distance_strategy": "cosine",
                    "embedding_model_dims": self.embedding_dims,
                },
            }
        if self.settings["vector_store"] != "pgvector":
            raise ValueError(
                f"memory system mem0: vector_store must be pgvector or faiss, not "
                f"{self.settings['vector_store']!r}"
            )
        if self._server is None:
            self._server = PgServer(self.ds.root.parent / SERVER_DIR)
        return {
            "provider": "pgvector",
            "config": {
                "connection_string": self._server.start(),
                "collection_name": collection,
                "embedding_model_dims": self.embedding_dims,
                "hnsw": True,
            },
        }

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def _library(self, gateway: Gateway) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(self._memory(gateway))

    def _build_user(
        self,
        memory: Any,
        gateway: Gateway,
        user: str,
        turns: pd.DataFrame,
        fingerprint: str,
        report: SystemBuild,
    ) -> None:
        segments, _ = segment_conversation(
            turns,
            batch_size=int(self.settings["batch_size"]),
            max_chars=int(self.settings["max_segment_chars"]),
        )
        with gateway.context(conversation_id=user, question_id=None):
            # a user redone after a failure starts clean (one by one: mem0's delete_all resets
            # the whole FAISS collection, every user's memories with it)
            for old in memory.get_all(user_id=user, limit=100_000)["results"]:
                memory.delete(old["id"])
            error = None
            try:
                for segment in segments:
                    date = segment.session_datetime or NO_SESSION_DATE
                    messages = [{"role": "user", "content": f"Session date: {date}"}]
                    messages += [
                        {"role": "user", "content": f"{m.speaker}: {m.text}"}
                        for m in segment.messages
                    ]
                    memory.add(
                        messages,
                        user_id=user,
                        metadata={
                            "session_datetime": segment.session_datetime,
                            "positions": [m.position for m in segment.messages],
                        },
                    )
            except Exception as exc:  # the library failed for this user: recorded, not fatal
                error = f"mem0 raised {type(exc).__name__}: {exc}"
            # mem0 logs a failed call and carries on with an empty result
            if not self._held(gateway, user, report, error):
                return
            stored = memory.get_all(user_id=user, limit=100_000)["results"]
        items = item_rows(
            [
                {
                    "item_id": m["id"],
                    "kind": "fact",
                    "text": m["memory"],
                    "session_datetime": (m.get("metadata") or {}).get("session_datetime"),
                    "positions": (m.get("metadata") or {}).get("positions") or [],
                }
                for m in stored
            ]
        )
        self._write(gateway, user, items, fingerprint, report)

    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        library_version()
        out: dict[str, Recall] = {}
        with self._gateway(client) as gateway, contextlib.closing(self):
            memory = self._memory(gateway)
            for q in questions.to_dict("records"):
                user, qid = str(q["conversation_id"]), str(q["question_id"])
                with gateway.context(conversation_id=user, question_id=qid):
                    t0 = time.perf_counter()
                    found = memory.search(
                        str(q["question"]), user_id=user, limit=int(self.settings["top_k"])
                    )["results"]
                    latency = time.perf_counter() - t0
                gateway.raise_fatal()
                rows = [
                    {
                        "item_id": m["id"],
                        "kind": "fact",
                        "text": m["memory"],
                        "session_datetime": (m.get("metadata") or {}).get("session_datetime"),
                        "score": m.get("score"),
                        "tokens": count_tokens(m["memory"]),
                        "positions": (m.get("metadata") or {}).get("positions") or [],
                    }
                    for m in found
                ]
                out[qid] = Recall(pd.DataFrame(rows, columns=list(ITEM_COLUMNS)), latency)
        return out
