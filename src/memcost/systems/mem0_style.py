"""``mem0_style``: the paper's memory (study §3.1), behind the memory-system interface.

Segments of 10 messages and at most 8,000 characters, one extraction call each, the update
phase (ADD / UPDATE / DELETE / NOOP against the 10 most similar stored facts), the facts in the
run's vector store (FAISS HNSW per user by default), top-20 retrieval. This module adds no
behaviour: it hands :mod:`memcost.memory` and :mod:`memcost.retrieval` the settings, so that
the other systems can be built and compared the same way. Notebooks 01 and 02 walk through it
step by step and call those packages themselves; their answers are the system ``memory``.
Notebook 06 serves the same pipeline turn by turn (:mod:`memcost.systems.mem0_live`).
"""

from __future__ import annotations

import time

import pandas as pd

from memcost.llm import LLMClient
from memcost.memory.build import MemoryBuilder, MemoryConfig
from memcost.memory.facts import index_dir
from memcost.memory.segment import BATCH_SIZE, MAX_SEGMENT_CHARS
from memcost.memory.stats import user_stats
from memcost.memory.update import UPDATE_TOP_K
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.retrieval.search import TOP_K, MemoryStore, embed_questions, retrieve
from memcost.systems.base import ITEM_COLUMNS, MemorySystem, Recall, SystemBuild, register
from memcost.systems.mem0_live import Mem0Live
from memcost.text import count_tokens
from memcost.vectorstore.base import EF_CONSTRUCTION, EF_SEARCH, HNSW_M, VectorStore
from memcost.vectorstore.faiss_store import FaissStore


@register
class Mem0Style(MemorySystem):
    name = "mem0_style"
    answers_as = "memory"
    describes = "the paper's: extracted facts, the ADD/UPDATE/DELETE/NOOP update phase, top-20"
    defaults = {
        "extraction_model": EXTRACTION_MODEL,
        "extraction_reasoning_effort": "low",
        "embedding_model": EMBEDDING_MODEL,
        "batch_size": BATCH_SIZE,
        "max_segment_chars": MAX_SEGMENT_CHARS,
        "update_phase": True,
        "update_top_k": UPDATE_TOP_K,
        "hnsw_m": HNSW_M,
        "ef_construction": EF_CONSTRUCTION,
        "top_k": TOP_K,
        "ef_search": EF_SEARCH,
    }

    def __init__(self, ds, settings=None, *, dataset: str, store: VectorStore | None = None):
        super().__init__(ds, settings, dataset=dataset)
        self._store = store

    @property
    def store(self) -> VectorStore:
        """The run's vector store; by default the FAISS files, opened when first needed (a
        memory served turn by turn keeps its facts in memory and never opens them)."""
        if self._store is None:
            self._store = FaissStore(0, folder=index_dir(self.ds))
        return self._store

    def config(self) -> MemoryConfig:
        keys = (
            "extraction_model",
            "extraction_reasoning_effort",
            "embedding_model",
            "batch_size",
            "max_segment_chars",
            "update_phase",
            "update_top_k",
            "hnsw_m",
            "ef_construction",
        )
        return MemoryConfig(dataset=self.dataset, **{k: self.settings[k] for k in keys})

    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        t0 = time.perf_counter()
        users = list(dict.fromkeys(conversations["conversation_id"].astype(str)))
        done = MemoryBuilder(client, self.ds, self.config(), self.store).run(conversations, users)
        # a user with failed segments is written, incomplete, and rebuilt by a rerun
        failed = {u: "failed segments (rerun to retry them)" for u in done.incomplete}
        return SystemBuild(
            self.name,
            users=len(users),
            built=len(done.built),
            resumed=len(done.resumed),
            failed=failed,
            wall_s=time.perf_counter() - t0,
        )

    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        store = MemoryStore(self.ds, self.store, embedding_model=self.settings["embedding_model"])
        vectors = embed_questions(
            client, questions, dataset=self.dataset, model=self.settings["embedding_model"]
        )
        out = {}
        for i, q in enumerate(questions.to_dict("records")):
            found = retrieve(
                store,
                str(q["conversation_id"]),
                vectors[i],
                top_k=int(self.settings["top_k"]),
                ef_search=int(self.settings["ef_search"]),
                compare_exact=False,
            )
            items = found.facts.assign(
                item_id=found.facts["fact_id"],
                kind="fact",
                score=list(found.scores),
                tokens=[count_tokens(t) for t in found.facts["text"]],
                positions=found.facts["source_positions"],
            )
            out[str(q["question_id"])] = Recall(items[list(ITEM_COLUMNS)], found.latency_s)
        return out

    def live(self, user: str) -> Mem0Live:
        return Mem0Live(user, self.settings, dataset=self.dataset)

    def items(self, user: str) -> pd.DataFrame:
        facts = MemoryStore(self.ds, self.store).get(user).table
        return facts.assign(kind="fact", valid=True)

    @property
    def memory_files(self) -> list:
        return [self.ds.memory / "facts.parquet"]

    def state(self) -> pd.DataFrame:
        stats = user_stats(self.ds)
        return pd.DataFrame(
            {
                "conversation_id": stats["conversation_id"],
                "items": stats["active_facts"],
                "tokens": stats["fact_tokens"],
                "invalid_items": stats["superseded"] + stats["deleted"],
                "calls": stats["segments"],
            }
        )  # extraction calls (+ updates)
