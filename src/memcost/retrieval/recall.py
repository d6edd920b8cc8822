"""Answering from memory, step 3: where the evidence gets lost.

Facts keep their provenance (the turns they came from), so each answer also says whether the
retrieved facts cover the question's evidence: LoCoMo's ``evidence`` dia_ids, LongMemEval's
evidence sessions (their ``has_answer`` turns). That separates "the memory lost it"
(``evidence_in_memory``: covered by any stored fact) from "retrieval missed it"
(``evidence_recall``: covered by the retrieved ones) from "the reader failed".
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


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
    by_dia = {
        d: int(p)
        for d, p in zip(turns["dia_id"], turns["position"], strict=True)
        if isinstance(d, str)
    }
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
