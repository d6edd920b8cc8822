"""Answering from memory (study §2; paper §3.1): embed the question, search, read.

For each question: embed it (one embedding call, tagged with the question so the cost tables
count it as a read), search its own user's HNSW index for the ``top_k`` most similar facts, and
give the reader model those facts, each with the date of the conversation it came from, plus
the question (and the date it is asked, when the dataset has one).

Facts keep their provenance (the turns they came from), so each answer also says whether the
retrieved facts cover the question's evidence: LoCoMo's ``evidence`` dia_ids, LongMemEval's
evidence sessions (their ``has_answer`` turns). That separates "the memory lost it"
(``evidence_in_memory``: covered by any stored fact) from "retrieval missed it"
(``evidence_recall``: covered by the retrieved ones) from "the reader failed".

The offline reader answers with the retrieved fact that shares the most words with the
question (BM25), or says it has no information.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memcost import choices
from memcost import index as index_mod
from memcost.answers import AnswerWriter, system_name
from memcost.llm import ChatRequest, ChatResult, LLMClient
from memcost.memory import day_text, embed_groups, generation_params, long_date
from memcost.models import EMBEDDING_MODEL, READER_MODEL
from memcost.paths import DatasetPaths
from memcost.prompts import MEMORY_READ
from memcost.text import BM25, containment, token_f1
from memcost.tokens import count_tokens

TOP_K = 20  # §3.1: facts retrieved per question
NO_INFORMATION = "I don't have that information."
SYSTEM = system_name("memory")


class MemoryStore:
    """The per-user indexes of one dataset, loaded (and checked) once each."""

    def __init__(self, ds: DatasetPaths, *, embedding_model: str | None = None):
        self.folder = ds.memory / "index"
        self.embedding_model = embedding_model
        self._loaded: dict[str, index_mod.UserIndex] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def get(self, user: str) -> index_mod.UserIndex:
        """``user``'s index; :class:`memcost.index.IndexMismatch` names the user when its files
        are missing or disagree, and a different embedding model is an error too (a question
        embedded by one model cannot be compared with facts embedded by another)."""
        if user not in self._loaded:
            loaded = index_mod.load_user_index(self.folder, user)
            built_with = loaded.meta.get("embedding_model")
            if self.embedding_model and built_with and built_with != self.embedding_model:
                raise ValueError(
                    f"memory of user {user!r} was embedded with {built_with}, but questions are "
                    f"to be embedded with {self.embedding_model}: use the same embedding_model "
                    "in notebooks 01 and 02"
                )
            self._loaded[user] = loaded
        return self._loaded[user]

    def vectors(self, user: str) -> np.ndarray:
        if user not in self._vectors:
            self._vectors[user] = self.get(user).vectors()
        return self._vectors[user]


@dataclass(frozen=True)
class Retrieved:
    """What the search returned for one question."""

    fact_ids: tuple[str, ...]
    scores: tuple[float, ...]
    facts: pd.DataFrame  # the index table's rows, best first
    latency_s: float  # the HNSW search alone
    index_recall: float | None  # share of the exact top-k that HNSW found (ties count)

    @property
    def texts(self) -> list[str]:
        return self.facts["text"].tolist()


def embed_questions(
    client: LLMClient,
    questions: pd.DataFrame,
    *,
    dataset: str,
    model: str = EMBEDDING_MODEL,
) -> np.ndarray:
    """One embedding call per question, tagged with its ``question_id`` and ``system``: the
    cost tables count these as reads, and fact embeddings (no question) as writes."""
    groups = [
        ([str(q)], {"dataset": dataset, "conversation_id": str(c), "question_id": str(qid),
                    "system": SYSTEM})
        for q, c, qid in zip(questions["question"], questions["conversation_id"],
                             questions["question_id"], strict=True)
    ]
    if not groups:
        return np.zeros((0, 0), np.float32)
    return np.vstack(embed_groups(client, groups, model=model, desc="embed questions"))


def retrieve(
    store: MemoryStore,
    user: str,
    vector: np.ndarray,
    *,
    top_k: int = TOP_K,
    ef_search: int = index_mod.EF_SEARCH,
    compare_exact: bool = True,
) -> Retrieved:
    """The ``top_k`` facts of ``user`` most similar to ``vector``: only that user's index is
    searched, so another user's facts can never come back."""
    idx = store.get(user)
    scores, rows, latency = idx.timed_search(vector, top_k, ef_search=ef_search)
    keep = rows >= 0
    facts = idx.table.iloc[rows[keep]].reset_index(drop=True)
    recall = None
    if compare_exact and len(idx):
        exact_scores, _ = index_mod.exact_search(store.vectors(user), vector, top_k)
        recall = index_mod.recall_at_k(scores[None, :], exact_scores)
    return Retrieved(
        fact_ids=tuple(facts["fact_id"].tolist()),
        scores=tuple(round(float(s), 6) for s in scores[keep]),
        facts=facts,
        latency_s=latency,
        index_recall=recall,
    )


def render_memories(facts: pd.DataFrame) -> str:
    """The reader's memory block: one line per fact, ``- [8 May 2023] <fact>``; a fact that
    already states its conversation's date (as the offline extractor writes them) is not
    marked twice."""
    if facts.empty:
        return "(no memories stored)"
    lines = []
    for text, when in zip(facts["text"], facts["session_datetime"], strict=True):
        day = day_text(when if isinstance(when, str) else None)
        lines.append(f"- [{day}] {text}" if day and day not in text else f"- {text}")
    return "\n".join(lines)


def reader_request(
    question: Mapping[str, Any],
    retrieved: Retrieved,
    *,
    dataset: str,
    model: str = READER_MODEL,
    reasoning_effort: str = "medium",
    mode: str = "open_ended",
) -> ChatRequest:
    """The reader call for one question (``payload`` feeds the offline reader).

    In ``multiple_choice`` mode a question with options (PersonaMem v2) lists them in the order
    :func:`memcost.choices.multiple_choice` fixes and asks for a letter, as the judge expects.
    """
    asked = question.get("question_date")
    date_line = f"Question date: {long_date(asked)}\n" if isinstance(asked, str) and asked else ""
    text = str(question["question"])
    shown = _shown_options(question, mode)
    if shown is not None:
        text += f"\n\nOptions:\n{shown.render()}\n{choices.MC_ANSWER_INSTRUCTION}"
    return ChatRequest(
        model=model,
        messages=MEMORY_READ.messages(
            memories=render_memories(retrieved.facts), date_line=date_line, question=text,
        ),
        stage="read",
        prompt_version=MEMORY_READ.id,
        payload={"question": str(question["question"]), "facts": retrieved.texts,
                 "options": list(shown.options) if shown is not None else None},
        tags={
            "dataset": dataset,
            "conversation_id": str(question["conversation_id"]),
            "question_id": str(question["question_id"]),
            "system": SYSTEM,
        },
        **generation_params(model, reasoning_effort),
    )


def _shown_options(question: Mapping[str, Any], mode: str) -> choices.MultipleChoice | None:
    if mode not in choices.MODES:
        raise ValueError(f"mode must be one of {choices.MODES}, got {mode!r}")
    options = question.get("options")
    if mode != "multiple_choice" or options is None or not len(options):
        return None
    return choices.multiple_choice(str(question["question_id"]), [str(o) for o in options])


def offline_reader(request: ChatRequest) -> str:
    """Offline reader: the retrieved fact with the highest lexical overlap with the question
    (BM25 over content words), or :data:`NO_INFORMATION` when none shares a word with it.

    With options, the option the retrieved facts support best (:data:`NO_INFORMATION` when they
    support none)."""
    facts = request.payload["facts"]
    options = request.payload.get("options")
    if options:
        pick = choices.best_supported_option(options, facts)
        return NO_INFORMATION if pick is None else choices.format_choice(options, pick)
    if not facts:
        return NO_INFORMATION
    best = BM25(facts).best(request.payload["question"])
    return NO_INFORMATION if best is None else facts[best[0]]


# --- Evidence recall ------------------------------------------------------------------------------


def evidence_units(evidence: Sequence[str], turns: pd.DataFrame) -> list[frozenset[int]]:
    """The question's evidence as sets of turn positions, one set per evidence item.

    An item that is a ``dia_id`` (LoCoMo ``D3:1``) is that turn; an item that is a session id
    (LongMemEval ``answer_session_ids``) is that session's ``has_answer`` turns, or all its
    turns when none is flagged. Items found in neither are left out (LoCoMo has a few ids that
    point nowhere).
    """
    units: list[frozenset[int]] = []
    if not len(evidence) or turns.empty:
        return units
    by_dia = {d: int(p) for d, p in zip(turns["dia_id"], turns["position"], strict=True)
              if isinstance(d, str)}
    for item in evidence:
        if item in by_dia:
            units.append(frozenset({by_dia[item]}))
            continue
        session = turns.loc[turns["session_id"] == item]
        if session.empty:
            continue
        flagged = session.loc[session["has_answer"].fillna(False).astype(bool)]
        chosen = flagged if len(flagged) else session
        units.append(frozenset(int(p) for p in chosen["position"]))
    return units


def evidence_coverage(units: Sequence[frozenset[int]], facts: pd.DataFrame) -> float | None:
    """Share of evidence items that at least one of ``facts`` was extracted from (``None``
    when the question has no evidence to cover)."""
    if not units:
        return None
    covered: set[int] = set()
    for positions in facts["source_positions"]:
        covered.update(int(p) for p in positions)
    return sum(1 for unit in units if unit & covered) / len(units)


# --- Answering every question -------------------------------------------------------------------


@dataclass
class ReadReport:
    questions: int = 0
    answered: int = 0  # answered by this run
    resumed: int = 0  # answered by an earlier run: skipped
    errors: int = 0
    wall_s: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)


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
    ef_search: int = index_mod.EF_SEARCH,
    mode: str = "open_ended",
) -> ReadReport:
    """Answer every question not yet in ``answers_memory.jsonl`` and append its record.

    Records are written one at a time as answers arrive, so a rerun answers only what is
    missing. Each carries the retrieved fact ids, scores and tokens, the search latency, and
    the evidence recall of what was retrieved and of the whole memory.
    """
    t0 = time.perf_counter()
    report = ReadReport(questions=len(questions))
    store = MemoryStore(ds, embedding_model=embedding_model)
    turns = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
    empty_turns = conversations.iloc[0:0]
    with AnswerWriter(ds, SYSTEM) as writer:
        pending_ids = set(writer.pending(questions["question_id"].tolist()))
        todo = questions.loc[questions["question_id"].isin(pending_ids)].reset_index(drop=True)
        report.resumed = len(questions) - len(todo)
        vectors = embed_questions(client, todo, dataset=dataset, model=embedding_model)
        context: dict[str, dict[str, Any]] = {}
        requests = []
        for i, question in enumerate(todo.to_dict("records")):
            user = str(question["conversation_id"])
            found = retrieve(store, user, vectors[i], top_k=top_k, ef_search=ef_search)
            units = evidence_units(list(question["evidence"]), turns.get(user, empty_turns))
            memory_block = render_memories(found.facts)
            context[str(question["question_id"])] = {
                "conversation_id": user,
                "retrieved_fact_ids": list(found.fact_ids),
                "retrieved_scores": list(found.scores),
                "retrieved_tokens": count_tokens(memory_block) if len(found.facts) else 0,
                "search_latency_s": round(found.latency_s, 6),
                "index_recall": found.index_recall,
                "evidence_recall": evidence_coverage(units, found.facts),
                "evidence_in_memory": evidence_coverage(units, store.get(user).table),
                "evidence_items": len(units),
                "top_k": top_k,
                "ef_search": ef_search,
            }
            request = reader_request(question, found, dataset=dataset, model=reader_model,
                                     reasoning_effort=reasoning_effort, mode=mode)
            if request.payload["options"] is not None:
                context[str(question["question_id"])]["mode"] = "multiple_choice"
            requests.append(request)

        def write(result: ChatResult) -> None:
            qid = str(result.request.tags["question_id"])
            extra = context[qid]
            writer.write({
                "question_id": qid,
                "conversation_id": extra["conversation_id"],
                "answer": result.text if result.error is None else "",
                **result.record_fields(),
                **{k: v for k, v in extra.items() if k != "conversation_id"},
            })
            report.answered += 1
            report.errors += result.error is not None

        client.chat_many(requests, offline=offline_reader, on_result=write, desc="read answers")
    report.wall_s = time.perf_counter() - t0
    return report


# --- What notebook 02 reports -------------------------------------------------------------------


def lexical_match(answer: str, gold: str, *, abstention: bool) -> bool:
    """A rough, judge-free signal: an abstention question is matched by a no-information
    answer; any other by an answer containing at least half of the gold answer's content words.
    Only for the offline backend's sanity; accuracy is the judge's (notebook 04)."""
    if abstention:
        return answer.strip() == NO_INFORMATION or "don't have that information" in answer.lower()
    return containment(gold, answer) >= 0.5


def scored_answers(answers: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Answers joined with their questions (category, gold) and the lexical signals."""
    keep = ["question_id", "question", "answer", "category", "is_abstention"]
    gold = questions[keep].rename(columns={"answer": "gold"})
    merged = answers.merge(gold, on="question_id", how="left")
    merged["no_information"] = merged["answer"].astype(str).str.strip() == NO_INFORMATION
    merged["lexical_match"] = [
        lexical_match(str(a), str(g), abstention=bool(ab))
        for a, g, ab in zip(merged["answer"], merged["gold"], merged["is_abstention"], strict=True)
    ]
    merged["token_f1"] = [token_f1(str(a), str(g)) for a, g in
                          zip(merged["answer"], merged["gold"], strict=True)]
    return merged


def recall_by_category(scored: pd.DataFrame) -> pd.DataFrame:
    """Per category: questions, evidence recall@k of the retrieved facts and of the whole
    memory, retrieved tokens, no-information answers, lexical matches."""
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


def _percentile(values: pd.Series, q: float) -> float | None:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(np.percentile(values, q)) if len(values) else None


def read_metrics(scored: pd.DataFrame, *, top_k: int, ef_search: int) -> dict[str, Any]:
    """The numbers notebook 02 records (and a test or the report checks)."""
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
        "retrieved_facts_mean": round(float(scored["retrieved_fact_ids"].map(len).mean()), 2)
        if len(scored) else 0.0,
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


def plot_evidence_recall(by_category: pd.DataFrame, *, dataset: str, top_k: int,
                         backend: str = "") -> Any:
    """Per category: evidence covered by any stored fact vs by the top-k retrieved facts."""
    import matplotlib.pyplot as plt

    from memcost.plots import label_backend

    table = by_category.loc[by_category["with_evidence"] > 0]
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["evidence_in_memory"], width=0.4, label="in memory (any fact)",
           color="#9ecae1")
    ax.bar(x + 0.2, table["evidence_recall"], width=0.4, label=f"retrieved (top {top_k})",
           color="#1f77b4")
    ax.set_xticks(x, table["category"], rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("evidence recall")
    ax.set_title(f"Where the evidence gets lost ({dataset})")
    ax.legend(loc="lower left", fontsize=8)
    label_backend(ax, backend)
    return fig
