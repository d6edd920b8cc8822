"""Every memory system's answers through the same reader (notebook 02).

For one system: recall every question of the dataset (in order, so a system whose memory moves
with the questions, the hierarchical one, sees them as a user would ask them), then ask the
reader the questions not answered yet. Records go to ``answers/answers_<system>.jsonl``, one
at a time, with what was retrieved, its tokens, the search's time and the evidence recall;
notebook 04 judges them like any other system's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from memcost.answers import AnswerWriter
from memcost.llm import ChatResult, LLMClient
from memcost.manifest import fingerprint
from memcost.offline.reader import offline_reader
from memcost.paper import READER_MODEL
from memcost.prompts import MEMORY_READ
from memcost.retrieval.reader import reader_request, render_memories
from memcost.retrieval.recall import TurnEvidence, evidence_coverage
from memcost.systems.base import MemorySystem, Recall
from memcost.text import count_tokens


@dataclass
class SystemAnswers:
    system: str
    questions: int = 0
    answered: int = 0
    resumed: int = 0
    errors: int = 0
    wall_s: float = 0.0
    recalls: dict[str, Recall] = field(default_factory=dict)

    def line(self) -> str:
        errors = f", {self.errors} FAILED (rerun to ask them again)" if self.errors else ""
        return (
            f"{self.system}: {self.answered} answered, {self.resumed} answered earlier"
            f"{errors} in {self.wall_s:.1f} s"
        )


def short_of_top_k(retrieved: pd.Series, users: pd.Series, top_k: int, stored: pd.Series) -> int:
    """Questions whose search returned fewer items than it asked for, although the user's
    memory holds at least that many (``stored``: items per user): the filtered-search trap of a
    shared vector index, counted per store."""
    asked = users.map(stored).fillna(0).clip(upper=top_k)
    got = retrieved.map(lambda ids: len(ids) if isinstance(ids, list | tuple) else 0)
    return int((got < asked).sum())


def retrieval_summary(
    system: str, answers: pd.DataFrame, *, ids: str, top_k: int | None, stored: pd.Series
) -> dict[str, Any]:
    """One row of notebook 02's comparison of the memory systems: answers, questions short of
    ``top_k`` (``None``: the system does not search for a number of items), retrieved tokens,
    evidence recall, search p50/p95 (``ids``: the answers' column of retrieved ids)."""
    search = pd.to_numeric(answers["search_latency_s"], errors="coerce")
    return {
        "system": system,
        "answers": len(answers),
        "short_of_top_k": short_of_top_k(answers[ids], answers["conversation_id"], top_k, stored)
        if top_k
        else 0,
        "retrieved_tokens": answers["retrieved_tokens"].mean(),
        "evidence_recall": pd.to_numeric(answers["evidence_recall"], errors="coerce").mean(),
        "search_p50_s": search.median(),
        "search_p95_s": search.quantile(0.95),
    }


def recall_record(recall: Recall, units: list[frozenset[int]]) -> dict[str, Any]:
    """What an answer record says about its retrieval."""
    return {
        "retrieved_item_ids": recall.items["item_id"].tolist(),
        "retrieved_kinds": recall.items["kind"].tolist(),
        "retrieved_scores": [
            None if pd.isna(s) else round(float(s), 6) for s in recall.items["score"]
        ],
        "retrieved_tokens": count_tokens(render_memories(recall.facts)) if len(recall.items) else 0,
        "search_latency_s": round(recall.latency_s, 6),
        "evidence_recall": evidence_coverage(units, recall.facts),
        "evidence_items": len(units),
    }


def answer_with_system(
    client: LLMClient,
    system: MemorySystem,
    questions: pd.DataFrame,
    conversations: pd.DataFrame,
    *,
    reader_model: str = READER_MODEL,
    reasoning_effort: str = "medium",
    mode: str = "open_ended",
) -> SystemAnswers:
    """Answer every question not yet in the system's answers file and append its record."""
    t0 = time.perf_counter()
    report = SystemAnswers(system.answers_as, questions=len(questions))
    turns = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
    empty = conversations.iloc[0:0]
    evidence: dict[str, TurnEvidence] = {}  # per user, made once
    report.recalls = system.recall(client, questions)
    settings = fingerprint(
        stage="read",
        client=client,
        models=[reader_model],
        prompts=[MEMORY_READ.id],
        inputs=system.memory_files,
        parameters={
            "system": system.name,
            "settings": system.settings,
            "reasoning_effort": reasoning_effort,
            "mode": mode,
        },
    )
    with AnswerWriter(system.ds, system.answers_as, settings) as writer:
        pending = set(writer.pending(questions["question_id"].astype(str).tolist()))
        report.resumed = len(questions) - len(pending)
        context: dict[str, dict[str, Any]] = {}
        requests = []
        for question in questions.to_dict("records"):
            qid, user = str(question["question_id"]), str(question["conversation_id"])
            if qid not in pending:
                continue
            recall = report.recalls[qid]
            if user not in evidence:
                evidence[user] = TurnEvidence(turns.get(user, empty))
            units = evidence[user].units(list(question["evidence"]))
            context[qid] = {"conversation_id": user, **recall_record(recall, units)}
            request = reader_request(
                question,
                recall,
                dataset=system.dataset,
                model=reader_model,
                reasoning_effort=reasoning_effort,
                mode=mode,
                system=system.answers_as,
            )
            if request.payload["options"] is not None:
                context[qid]["mode"] = "multiple_choice"
            requests.append(request)

        def write(result: ChatResult) -> None:
            qid = str(result.request.tags["question_id"])
            extra = context[qid]
            writer.write(
                {
                    "question_id": qid,
                    "conversation_id": extra["conversation_id"],
                    "answer": result.text if result.error is None else "",
                    **result.record_fields(),
                    **{k: v for k, v in extra.items() if k != "conversation_id"},
                }
            )
            report.answered += 1
            report.errors += result.error is not None

        client.chat_many(
            requests,
            offline=offline_reader,
            on_result=write,
            desc=f"{system.answers_as}: read answers",
        )
    report.wall_s = time.perf_counter() - t0
    return report
