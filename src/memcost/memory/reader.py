"""Every memory system's answers through the same reader (notebook 02, paper §3.1), with what each
retrieval covered of the question's evidence (docs/architecture.md, "The reader")."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from memcost import answers
from memcost.answers import AnswerWriter
from memcost.calls import ANSWER_STAGES, SHARED_PREFIX_TAG
from memcost.catalog import cacheable, generation_params
from memcost.llm import CallResult, ChatRequest, LLMClient
from memcost.manifest import fingerprint
from memcost.memory.base import MemorySystem, Recall, rows_by_user
from memcost.memory.search import SYSTEM
from memcost.offline import NO_INFORMATION, offline_reader
from memcost.paper import READER_MODEL
from memcost.prompts import MEMORY_READ
from memcost.text import containment, count_tokens, day_text, spoken_datetime, token_f1


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
    """Questions whose search returned fewer items than asked although the user's memory holds that
    many: the filtered-search trap of a shared index."""
    asked = users.map(stored).fillna(0).clip(upper=top_k)
    got = retrieved.map(lambda ids: len(ids) if isinstance(ids, list | tuple) else 0)
    return int((got < asked).sum())


def retrieval_summary(system: MemorySystem, answers: pd.DataFrame) -> dict[str, Any]:
    """One row of notebook 02's comparison of the memory systems."""
    search = pd.to_numeric(answers["search_latency_s"], errors="coerce")
    top_k = system.settings.get("top_k")
    stored = system.state().set_index("conversation_id")["items"]
    ids, users = answers["retrieved_item_ids"], answers["conversation_id"]
    return {
        "system": system.answers_as,
        "answers": len(answers),
        "short_of_top_k": short_of_top_k(ids, users, top_k, stored) if top_k else 0,
        "retrieved_tokens": answers["retrieved_tokens"].mean(),
        "evidence_recall": pd.to_numeric(answers["evidence_recall"], errors="coerce").mean(),
        "search_p50_s": search.median(),
        "search_p95_s": search.quantile(0.95),
    }


def recall_record(
    recall: Recall, units: list[frozenset[int]], in_memory: set[int] | None
) -> dict[str, Any]:
    """What an answer record says of its retrieval (``in_memory``: the turns the user's whole memory
    covers, ``None``: not known)."""
    return {
        "retrieved_item_ids": recall.items["item_id"].tolist(),
        "retrieved_kinds": recall.items["kind"].tolist(),
        "retrieved_scores": [
            None if pd.isna(s) else round(float(s), 6) for s in recall.items["score"]
        ],
        "retrieved_tokens": count_tokens(render_memories(recall.facts)) if len(recall.items) else 0,
        "search_latency_s": round(recall.latency_s, 6),
        "evidence_recall": evidence_coverage(units, recall.facts),
        "evidence_in_memory": None if in_memory is None else evidence_coverage(units, in_memory),
        "evidence_items": len(units),
        **recall.details,
    }


def covered_by(system: MemorySystem, user: str) -> set[int] | None:
    """The turns the valid items of ``user``'s memory came from (``None``: not recorded)."""
    try:
        items = system.items(user)
    except FileNotFoundError:  # a user without turns has no memory
        return set()
    if "positions" not in items:
        return None
    valid = items.loc[items["valid"].astype(bool)] if "valid" in items else items
    return {int(p) for positions in valid["positions"] for p in positions}


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
    """Answer every question not yet in the system's answers file, appending each record."""
    t0 = time.perf_counter()
    report = SystemAnswers(system.answers_as, questions=len(questions))
    turns = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
    empty = conversations.iloc[0:0]
    evidence: dict[str, tuple[TurnEvidence, set[int] | None]] = {}  # per user, made once
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
    recorded = client.store.on_ledger(ANSWER_STAGES, "system", "question_id")
    on_ledger = {str(q) for s, q in recorded if s == system.answers_as}
    with AnswerWriter(system.ds, system.answers_as, settings, on_ledger) as writer:
        pending = set(writer.pending(questions["question_id"].astype(str).tolist()))
        report.resumed = len(questions) - len(pending)
        context: dict[str, dict[str, Any]] = {}
        requests = []
        records = questions.to_dict("records")
        every = with_shared_prefixes(
            [
                reader_request(
                    question,
                    report.recalls[str(question["question_id"])],
                    dataset=system.dataset,
                    model=reader_model,
                    reasoning_effort=reasoning_effort,
                    mode=mode,
                    system=system.answers_as,
                )
                for question in records
            ]
        )
        for question, request in zip(records, every, strict=True):
            qid, user = str(question["question_id"]), str(question["conversation_id"])
            if qid not in pending:
                continue
            recall = report.recalls[qid]
            if user not in evidence:
                evidence[user] = TurnEvidence(turns.get(user, empty)), covered_by(system, user)
            lookup, in_memory = evidence[user]
            units = lookup.units(list(question["evidence"]))
            context[qid] = {"conversation_id": user, **recall_record(recall, units, in_memory)}
            if request.payload["options"] is not None:
                context[qid]["mode"] = "multiple_choice"
            requests.append(request)

        def write(result: CallResult) -> None:
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

        client.chat_groups(
            by_shared_prefix(requests),
            offline=offline_reader,
            on_result=write,
            desc=f"{system.answers_as}: read answers",
        )
    report.wall_s = time.perf_counter() - t0
    return report


class Memories(Protocol):
    """What the reader reads of a search: the items (``text``, ``session_datetime``) in order, and
    their texts."""

    @property
    def facts(self) -> pd.DataFrame: ...

    @property
    def texts(self) -> list[str]: ...


def render_memories(facts: pd.DataFrame) -> str:
    """One line per fact, ``- [8 May 2023] <fact>`` (a fact that states its date is not marked
    twice)."""
    if facts.empty:
        return "(no memories stored)"
    lines = []
    for text, when in zip(facts["text"], facts["session_datetime"], strict=True):
        day = day_text(when if isinstance(when, str) else None)
        lines.append(f"- [{day}] {text}" if day and day not in text else f"- {text}")
    return "\n".join(lines)


def shared_prefix_tokens(requests: Sequence[ChatRequest]) -> int:
    """The prompt tokens a provider's cache can serve to each of one user's reader calls after the
    first, in the cache's steps."""
    if len(requests) < 2:
        return 0
    *instructions, (_, first) = requests[0].messages
    shared = os.path.commonprefix([r.messages[-1][1] for r in requests])
    if shared != first:  # whole lines: the line where two calls part is not shared
        shared = shared[: shared.rfind("\n") + 1]
    return cacheable(sum(count_tokens(text) for _, text in instructions) + count_tokens(shared))


def with_shared_prefixes(requests: Sequence[ChatRequest]) -> list[ChatRequest]:
    """``requests`` with ``shared_prefix_tokens`` tagged on each user's later calls: offline records
    have no cache, and the cost model prices them with it
    (:func:`memcost.costs.measured.served_reads`)."""
    out = list(requests)
    for rows in rows_by_user(r.tags.get("conversation_id") for r in requests).values():
        shared = shared_prefix_tokens([requests[i] for i in rows])
        for i in rows[1:] if shared else []:
            out[i] = replace(requests[i], tags={**requests[i].tags, SHARED_PREFIX_TAG: shared})
    return out


def by_shared_prefix(requests: Sequence[ChatRequest]) -> list[list[ChatRequest]]:
    """The reader calls grouped as :meth:`LLMClient.chat_groups` sends them: a user's calls that
    share a cacheable prefix together, the first alone."""
    groups: list[list[ChatRequest]] = []
    for rows in rows_by_user(r.tags.get("conversation_id") for r in requests).values():
        calls = [requests[i] for i in rows]
        if any(SHARED_PREFIX_TAG in r.tags for r in calls):
            groups.append(calls)
        else:
            groups += [[r] for r in calls]
    return groups


def shown_options(question: Mapping[str, Any], mode: str) -> answers.MultipleChoice | None:
    if mode not in answers.MODES:
        raise ValueError(f"mode must be one of {answers.MODES}, got {mode!r}")
    options = question.get("options")
    if mode != "multiple_choice" or options is None or not len(options):
        return None
    return answers.multiple_choice(str(question["question_id"]), [str(o) for o in options])


def reader_request(
    question: Mapping[str, Any],
    retrieved: Memories,
    *,
    dataset: str,
    model: str = READER_MODEL,
    reasoning_effort: str = "medium",
    mode: str = "open_ended",
    system: str = SYSTEM,
) -> ChatRequest:
    """The reader call for one question (``payload`` feeds the offline reader); in
    ``multiple_choice`` mode, the options in :func:`memcost.answers.multiple_choice`'s order."""
    asked = question.get("question_date")
    date_line = (
        f"Question date: {spoken_datetime(asked)}\n" if isinstance(asked, str) and asked else ""
    )
    text = str(question["question"])
    shown = shown_options(question, mode)
    if shown is not None:
        text += f"\n\nOptions:\n{shown.render()}\n{answers.MC_ANSWER_INSTRUCTION}"
    return ChatRequest(
        model=model,
        messages=MEMORY_READ.messages(
            memories=render_memories(retrieved.facts),
            date_line=date_line,
            question=text,
        ),
        stage="read",
        prompt_version=MEMORY_READ.id,
        payload={
            "question": str(question["question"]),
            "facts": retrieved.texts,
            "options": list(shown.options) if shown is not None else None,
        },
        tags={
            "dataset": dataset,
            "conversation_id": str(question["conversation_id"]),
            "question_id": str(question["question_id"]),
            "system": system,
        },
        **generation_params(model, reasoning_effort),
    )


class TurnEvidence:
    """One user's turns as evidence look-ups, made once for all of the user's questions."""

    def __init__(self, turns: pd.DataFrame):
        self.turns = turns
        self.by_dia = {
            d: int(p)
            for d, p in zip(turns["dia_id"], turns["position"], strict=True)
            if isinstance(d, str)
        }
        self._sessions: dict[str, frozenset[int] | None] = {}

    def _session(self, session_id: str) -> frozenset[int] | None:
        if session_id not in self._sessions:
            session = self.turns.loc[self.turns["session_id"] == session_id]
            flagged = session.loc[session["has_answer"].fillna(False).astype(bool)]
            chosen = flagged if len(flagged) else session
            self._sessions[session_id] = (
                frozenset(int(p) for p in chosen["position"]) if len(session) else None
            )
        return self._sessions[session_id]

    def units(self, evidence: Sequence[str]) -> list[frozenset[int]]:
        """The question's evidence as sets of turn positions: a ``dia_id`` is its turn, a session id
        its ``has_answer`` turns (else all); ids found nowhere are left out."""
        units: list[frozenset[int]] = []
        if not len(evidence) or self.turns.empty:
            return units
        for item in evidence:
            if item in self.by_dia:
                units.append(frozenset({self.by_dia[item]}))
            elif (session := self._session(item)) is not None:
                units.append(session)
        return units


def evidence_units(evidence: Sequence[str], turns: pd.DataFrame) -> list[frozenset[int]]:
    return TurnEvidence(turns).units(evidence)


def covered_positions(facts: pd.DataFrame) -> set[int]:
    """The turn positions some of ``facts`` were extracted from."""
    covered: set[int] = set()
    for positions in facts["positions" if "positions" in facts else "source_positions"]:
        covered.update(int(p) for p in positions)
    return covered


def evidence_coverage(
    units: Sequence[frozenset[int]], facts: pd.DataFrame | set[int]
) -> float | None:
    """Share of evidence items some of ``facts`` (or their positions) came from (``None``: no
    evidence)."""
    if not units:
        return None
    covered = facts if isinstance(facts, set) else covered_positions(facts)
    return sum(1 for unit in units if unit & covered) / len(units)


def recall_by_category(scored: pd.DataFrame) -> pd.DataFrame:
    """Per category: questions, evidence recall of the retrieved items and of the whole memory,
    tokens, no-information answers, lexical matches."""
    work = scored.assign(
        evidence_recall=pd.to_numeric(scored["evidence_recall"], errors="coerce"),
        evidence_in_memory=pd.to_numeric(scored["evidence_in_memory"], errors="coerce"),
    )
    table = work.groupby("category", sort=True).agg(
        questions=("question_id", "count"),
        with_evidence=("evidence_recall", "count"),
        evidence_in_memory=("evidence_in_memory", "mean"),
        evidence_recall=("evidence_recall", "mean"),
        retrieved_tokens=("retrieved_tokens", "mean"),
        no_information=("no_information", "mean"),
        lexical_match=("lexical_match", "mean"),
    )
    return table.round(3).reset_index()


def lexical_match(answer: str, gold: str, *, abstention: bool) -> bool:
    """A judge-free signal for the offline backend: an abstention matched by a no-information
    answer, any other by half of the gold's content words."""
    if abstention:
        return answer.strip() == NO_INFORMATION or "don't have that information" in answer.lower()
    return containment(gold, answer) >= 0.5


def scored_answers(answers: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    keep = ["question_id", "question", "answer", "category", "is_abstention"]
    gold = questions[keep].rename(columns={"answer": "gold"})
    merged = answers.merge(gold, on="question_id", how="left")
    merged["no_information"] = merged["answer"].astype(str).str.strip() == NO_INFORMATION
    merged["lexical_match"] = [
        lexical_match(str(a), str(g), abstention=bool(ab))
        for a, g, ab in zip(merged["answer"], merged["gold"], merged["is_abstention"], strict=True)
    ]
    merged["token_f1"] = [
        token_f1(str(a), str(g)) for a, g in zip(merged["answer"], merged["gold"], strict=True)
    ]
    return merged


def _percentile(values: pd.Series, q: float) -> float | None:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(np.percentile(values, q)) if len(values) else None


def read_metrics(scored: pd.DataFrame, *, top_k: int, ef_search: int) -> dict[str, Any]:
    recall = pd.to_numeric(scored["evidence_recall"], errors="coerce")
    in_memory = pd.to_numeric(scored["evidence_in_memory"], errors="coerce")
    latency = scored["search_latency_s"]
    by_category = recall_by_category(scored)

    def ms(value: float | None) -> float | None:
        return round(value * 1000, 4) if value is not None else None

    def mean(series: pd.Series) -> float | None:
        series = pd.to_numeric(series, errors="coerce").dropna()
        return round(float(series.mean()), 4) if len(series) else None

    return {
        "questions": len(scored),
        "errors": int(scored["error"].notna().sum()),
        "top_k": top_k,
        "ef_search": ef_search,
        "retrieved_facts_mean": round(float(scored["retrieved_item_ids"].map(len).mean()), 2)
        if len(scored)
        else 0.0,
        "retrieved_tokens_mean": mean(scored["retrieved_tokens"]),
        "search_latency_p50_ms": ms(_percentile(latency, 50)),
        "search_latency_p95_ms": ms(_percentile(latency, 95)),
        "index_recall_vs_exact": mean(scored["index_recall"]),
        "questions_with_evidence": int(recall.notna().sum()),
        "evidence_recall": mean(recall),
        "evidence_in_memory": mean(in_memory),
        "evidence_recall_by_category": {
            str(r.category): (None if pd.isna(r.evidence_recall) else float(r.evidence_recall))
            for r in by_category.itertuples()
        },
        "no_information_answers": int(scored["no_information"].sum()),
        "lexical_match_rate": mean(scored["lexical_match"].astype(float)),
        "token_f1_mean": mean(scored["token_f1"]),
        "reader_prompt_tokens_mean": mean(scored["prompt_tokens"]),
    }
