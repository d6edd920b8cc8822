"""What memory gets wrong (notebook 04, section 8; the paper's Table 6).

Questions a long-context system got right and memory got wrong, with the facts memory retrieved
and heuristic tags for the paper's failure modes: a temporal marker lost, an update not
propagated, a coreference lost, or an answer that is in no retrieved fact. The tags point at
where to look; they do not prove the cause.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from memcost.answers import primary, system_kind
from memcost.judge.questions import as_list, as_text
from memcost.judge.votes import question_outcomes
from memcost.memory.facts import load_facts
from memcost.offline import numerals
from memcost.paths import DatasetPaths
from memcost.text import containment, content_words, words

TAG_TEMPORAL = "temporal marker lost"
TAG_UPDATE = "update not propagated"
TAG_COREFERENCE = "coreference"
TAG_NOT_RETRIEVED = "answer not in retrieved facts"
TAG_NONE = "untagged"
FAILURE_TAGS = (TAG_TEMPORAL, TAG_UPDATE, TAG_COREFERENCE, TAG_NOT_RETRIEVED, TAG_NONE)

_MONTHS = (
    "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DATE = re.compile(
    r"\b(?:" + "|".join(_MONTHS.split()) + r"|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b|\b(?:19|20)\d\d\b|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}\b",
    re.IGNORECASE,
)
_TEMPORAL_Q = re.compile(
    r"^\s*when\b|\bwhat (?:date|day|month|year|time)\b|\bhow long\b|"
    r"\bhow many (?:days|weeks|months|years)\b|\bwhich .* first\b",
    re.IGNORECASE,
)
_UPDATE_Q = re.compile(
    r"\b(?:now|currently|current|these days|anymore|still|latest|most recent|change[ds]?)\b",
    re.IGNORECASE,
)
_PRONOUN = re.compile(
    r"\b(?:he|she|they|him|her|his|hers|their|them|the user|user|someone|"
    r"a friend|the person)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+)\b")


def _names(*texts: str) -> set[str]:
    """Capitalised words that are not the first word: the people and places a question names."""
    found: set[str] = set()
    for text in texts:
        for match in _NAME.finditer(text):
            word = match.group(1)
            if word.lower() not in _MONTHS.split() and word.lower() not in {"i", "what", "when"}:
                found.add(word.lower())
    return found


def tag_failure(
    question: str,
    reference: str,
    category: str,
    memory_answer: str,
    facts: Sequence[Mapping[str, Any]] | None,
) -> list[str]:
    """Heuristic tags for a question memory got wrong (``facts``: the retrieved facts, each
    with ``text`` and, when known, ``status``). ``None`` facts: nothing can be checked.

    - *temporal marker lost*: a when/how-long question, and no retrieved fact that shares a word
      with the question carries an absolute date (month, weekday, year, numeric date);
    - *update not propagated*: a question about the current state, and a retrieved fact is
      superseded/deleted, or the memory answer repeats a retrieved fact that lacks the reference;
    - *coreference*: the question names someone, the facts that match its other words never do,
      and one of them says "he", "she", "the user", ...;
    - *answer not in retrieved facts*: fewer than half the reference's content words appear in
      any retrieved fact (retrieval or extraction lost it).
    """
    if facts is None:
        return []
    tags: list[str] = []
    texts = [as_text(f.get("text")) for f in facts]
    q_words = set(content_words(question)) - _names(question)
    relevant = [t for t in texts if q_words & set(content_words(t))]
    temporal = category in ("temporal", "temporal-reasoning") or bool(_TEMPORAL_Q.search(question))
    if temporal and not any(_DATE.search(t) for t in relevant):
        tags.append(TAG_TEMPORAL)
    update = category == "knowledge-update" or bool(_UPDATE_Q.search(question))
    stale = any(as_text(f.get("status")) in ("superseded", "deleted") for f in facts)
    echoed = [
        t
        for t in texts
        if memory_answer.strip()
        and containment(memory_answer, t) >= 0.5
        and containment(reference, t) < 0.5
    ]
    if update and (stale or echoed):
        tags.append(TAG_UPDATE)
    names = _names(question)
    if names and relevant:
        named = any(names & set(words(t)) for t in relevant)
        if not named and any(_PRONOUN.search(t) for t in relevant):
            tags.append(TAG_COREFERENCE)
    union = " ".join(texts)
    if containment(numerals(reference), numerals(union)) < 0.5:
        tags.append(TAG_NOT_RETRIEVED)
    return tags or [TAG_NONE]


def facts_if_built(ds: DatasetPaths) -> pd.DataFrame | None:
    """Notebook 01's fact table, or ``None`` when this run has no memory for the dataset (the
    failure rows are then listed with fact ids only)."""
    try:
        return load_facts(ds)
    except FileNotFoundError:
        return None


def _retrieved(ids: Sequence[str], fact_table: pd.DataFrame | None) -> list[dict[str, str]] | None:
    if fact_table is None:
        return None
    return [
        {
            "fact_id": i,
            "text": as_text(fact_table.loc[i, "text"]),
            "status": as_text(fact_table.loc[i].get("status")),
            "session_datetime": as_text(fact_table.loc[i].get("session_datetime")),
        }
        for i in ids
        if i in fact_table.index
    ]


def _shown_facts(ids: Sequence[str], retrieved: list[dict[str, str]] | None, shown: int) -> str:
    if retrieved is None:
        return "(facts.parquet not available: ids " + ", ".join(ids[:shown]) + ")"
    return " | ".join(
        f"[{f['session_datetime'][:10] or 'no date'}] {f['text']}" for f in retrieved[:shown]
    )


def _by_question(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index(frame["question_id"].astype(str))


def _failure_row(
    qid: str,
    right: list[str],
    q: pd.DataFrame,
    mem: pd.DataFrame,
    lc_answers: pd.DataFrame,
    fact_table: pd.DataFrame | None,
    shown_facts: int,
) -> dict[str, Any]:
    ids = (
        [str(i) for i in as_list(mem.loc[qid].get("retrieved_item_ids"))]
        if qid in mem.index
        else []
    )
    retrieved = _retrieved(ids, fact_table)
    question, reference = str(q.loc[qid, "question"]), str(q.loc[qid, "answer"])
    category = as_text(q.loc[qid, "category"])
    memory_answer = as_text(mem.loc[qid, "answer"]) if qid in mem.index else ""
    tags = tag_failure(question, reference, category, memory_answer, retrieved)
    return {
        "question_id": qid,
        "conversation_id": str(q.loc[qid, "conversation_id"]),
        "category": category,
        "question": question,
        "reference": reference,
        "memory_answer": memory_answer,
        "long_context_systems": ", ".join(right),
        "long_context_answer": as_text(lc_answers.loc[qid, "answer"]),
        "retrieved": len(ids),
        "retrieved_facts": _shown_facts(ids, retrieved, shown_facts),
        "tags": "; ".join(tags),
    }


def _tag_counts(table: pd.DataFrame) -> pd.DataFrame:
    counts = {tag: 0 for tag in FAILURE_TAGS}
    for value in table.get("tags", pd.Series(dtype=str)):
        for tag in filter(None, str(value).split("; ")):
            counts[tag] += 1
    return pd.DataFrame({"tag": list(counts), "questions": list(counts.values())})


def failure_analysis(
    judgments: pd.DataFrame,
    answers: Mapping[str, pd.DataFrame],
    questions: pd.DataFrame,
    facts: pd.DataFrame | None,
    *,
    memory: str = "memory",
    shown_facts: int = 5,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Questions a long-context system got right and memory got wrong, with the retrieved facts
    and heuristic tags (Table 6 style), and the count per tag.

    Without ``facts`` (notebook 01 not run, or its file gone) the rows are still listed, with
    the retrieved fact ids only and no tags.
    """
    outcomes = question_outcomes(primary(judgments))
    judged = outcomes.loc[outcomes["judged"]]
    wide = judged.pivot(index="question_id", columns="system", values="correct")
    lc = [s for s in wide.columns if system_kind(s) == "long_context"]
    empty = pd.DataFrame(columns=["question_id", "tags"])
    if memory not in wide.columns or not lc or memory not in answers:
        return empty, _tag_counts(empty)
    lc_right = wide[lc].eq(True)
    chosen = wide.index[wide[memory].eq(False) & lc_right.any(axis=1)]
    q, mem = _by_question(questions), _by_question(answers[memory])
    fact_table = None
    if facts is not None and not facts.empty:
        fact_table = facts.set_index(facts["fact_id"].astype(str))
    rows = []
    for qid in chosen:
        right = [s for s in lc if lc_right.loc[qid, s]]
        rows.append(
            _failure_row(
                qid, right, q, mem, _by_question(answers[right[0]]), fact_table, shown_facts
            )
        )
    table = pd.DataFrame(rows)
    return (table if not table.empty else empty), _tag_counts(table)


__all__ = [
    "FAILURE_TAGS",
    "TAG_COREFERENCE",
    "TAG_NONE",
    "TAG_NOT_RETRIEVED",
    "TAG_TEMPORAL",
    "TAG_UPDATE",
    "facts_if_built",
    "failure_analysis",
    "tag_failure",
]
