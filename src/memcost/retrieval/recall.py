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


class TurnEvidence:
    """One user's turns as evidence look-ups, made once for all of the user's questions (a
    question's look-up used to index every turn of its user again)."""

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
        """The question's evidence as sets of turn positions, one set per evidence item.

        An item that is a ``dia_id`` (LoCoMo ``D3:1``) is that turn; an item that is a session
        id (LongMemEval ``answer_session_ids``) is that session's ``has_answer`` turns, or all
        its turns when none is flagged. Items found in neither are left out (LoCoMo has a few
        ids that point nowhere).
        """
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
    """:meth:`TurnEvidence.units` for one question."""
    return TurnEvidence(turns).units(evidence)


def covered_positions(facts: pd.DataFrame) -> set[int]:
    """The turn positions that at least one of ``facts`` was extracted from."""
    covered: set[int] = set()
    for positions in facts["source_positions"]:
        covered.update(int(p) for p in positions)
    return covered


def evidence_coverage(
    units: Sequence[frozenset[int]], facts: pd.DataFrame | set[int]
) -> float | None:
    """Share of evidence items that at least one of ``facts`` was extracted from (``None``
    when the question has no evidence to cover); ``facts`` may be their
    :func:`covered_positions`, kept for a user's many questions."""
    if not units:
        return None
    covered = facts if isinstance(facts, set) else covered_positions(facts)
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
