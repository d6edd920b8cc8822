"""Answering from memory, every question (notebook 02): embed, search, read, record.

Records go to ``answers/answers_memory.jsonl`` one at a time as answers arrive, so a rerun
answers only what is missing. Each carries the retrieved fact ids, scores and tokens, the
search latency, and the evidence recall of what was retrieved and of the whole memory.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from memcost.answers import AnswerWriter
from memcost.llm import ChatResult, LLMClient
from memcost.manifest import fingerprint
from memcost.memory.facts import index_dir
from memcost.offline.reader import offline_reader
from memcost.paper import EMBEDDING_MODEL, READER_MODEL
from memcost.paths import DatasetPaths
from memcost.prompts import MEMORY_READ
from memcost.retrieval.reader import reader_request, render_memories
from memcost.retrieval.recall import TurnEvidence, covered_positions, evidence_coverage
from memcost.retrieval.search import SYSTEM, TOP_K, MemoryStore, Retrieved, embed_questions
from memcost.retrieval.search import retrieve as search_user
from memcost.text import count_tokens
from memcost.vectorstore.base import EF_SEARCH
from memcost.vectorstore.faiss_store import FaissStore


@dataclass
class ReadReport:
    questions: int = 0
    answered: int = 0  # answered by this run
    resumed: int = 0  # answered by an earlier run: skipped
    errors: int = 0
    wall_s: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)


def retrieval_record(
    found: Retrieved,
    units: list[frozenset[int]],
    memory: pd.DataFrame | set[int],
    *,
    user: str,
    top_k: int,
    ef_search: int,
) -> dict[str, Any]:
    """What an answer record says about its retrieval (beside the reader call's fields);
    ``memory``: the user's whole memory, or the turn positions it covers."""
    memory_block = render_memories(found.facts)
    return {
        "conversation_id": user,
        "retrieved_fact_ids": list(found.fact_ids),
        "retrieved_scores": list(found.scores),
        "retrieved_tokens": count_tokens(memory_block) if len(found.facts) else 0,
        "search_latency_s": round(found.latency_s, 6),
        "index_recall": found.index_recall,
        "evidence_recall": evidence_coverage(units, found.facts),
        "evidence_in_memory": evidence_coverage(units, memory),
        "evidence_items": len(units),
        "top_k": top_k,
        "ef_search": ef_search,
    }


def answer_record(result: ChatResult, extra: Mapping[str, Any]) -> dict[str, Any]:
    """One line of ``answers_memory.jsonl``: the answer, the reader call, the retrieval."""
    return {
        "question_id": str(result.request.tags["question_id"]),
        "conversation_id": extra["conversation_id"],
        "answer": result.text if result.error is None else "",
        **result.record_fields(),
        **{k: v for k, v in extra.items() if k != "conversation_id"},
    }


def answer_from_memory(
    client: LLMClient,
    ds: DatasetPaths,
    questions: pd.DataFrame,
    conversations: pd.DataFrame,
    *,
    dataset: str,
    reader_model: str = READER_MODEL,
    reasoning_effort: str = "medium",
    embedding_model: str = EMBEDDING_MODEL,
    top_k: int = TOP_K,
    ef_search: int = EF_SEARCH,
    mode: str = "open_ended",
    store: MemoryStore | None = None,
) -> ReadReport:
    """Answer every question not yet in ``answers_memory.jsonl`` and append its record
    (``store``: the run's vector store; default the FAISS files of notebook 01)."""
    t0 = time.perf_counter()
    report = ReadReport(questions=len(questions))
    store = store or MemoryStore(
        ds, FaissStore(0, folder=index_dir(ds)), embedding_model=embedding_model
    )
    turns = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
    empty_turns = conversations.iloc[0:0]
    evidence: dict[str, tuple[TurnEvidence, set[int]]] = {}  # per user, made once
    settings = fingerprint(
        stage="read",
        client=client,
        models=[reader_model, embedding_model],
        prompts=[MEMORY_READ.id],
        inputs=[ds.memory / "facts.parquet"],
        parameters={
            "reasoning_effort": reasoning_effort,
            "top_k": top_k,
            "ef_search": ef_search,
            "mode": mode,
        },
    )
    with AnswerWriter(ds, SYSTEM, settings) as writer:
        pending_ids = set(writer.pending(questions["question_id"].tolist()))
        todo = questions.loc[questions["question_id"].isin(pending_ids)].reset_index(drop=True)
        report.resumed = len(questions) - len(todo)
        vectors = embed_questions(client, todo, dataset=dataset, model=embedding_model)
        context: dict[str, dict[str, Any]] = {}
        requests = []
        for i, question in enumerate(todo.to_dict("records")):
            user, qid = str(question["conversation_id"]), str(question["question_id"])
            found = search_user(store, user, vectors[i], top_k=top_k, ef_search=ef_search)
            if user not in evidence:
                lookup = TurnEvidence(turns.get(user, empty_turns))
                evidence[user] = lookup, covered_positions(store.get(user).table)
            lookup, in_memory = evidence[user]
            units = lookup.units(list(question["evidence"]))
            context[qid] = retrieval_record(
                found, units, in_memory, user=user, top_k=top_k, ef_search=ef_search
            )
            request = reader_request(
                question,
                found,
                dataset=dataset,
                model=reader_model,
                reasoning_effort=reasoning_effort,
                mode=mode,
            )
            if request.payload["options"] is not None:
                context[qid]["mode"] = "multiple_choice"
            requests.append(request)

        def write(result: ChatResult) -> None:
            writer.write(answer_record(result, context[str(result.request.tags["question_id"])]))
            report.answered += 1
            report.errors += result.error is not None

        client.chat_many(requests, offline=offline_reader, on_result=write, desc="read answers")
    report.wall_s = time.perf_counter() - t0
    return report
