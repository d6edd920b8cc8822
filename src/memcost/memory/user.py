"""One user's memory as the update phase changes it: the facts, their status, their vectors.

Facts are never removed: an updated fact becomes ``superseded`` (pointing to its successor), a
deleted one ``deleted``; only ``active`` facts go into the index. ``arrow()`` is the user's
part of ``facts.parquet`` (:data:`memcost.memory.facts.FACT_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost.memory.extract import Candidate
from memcost.memory.facts import FACT_SCHEMA
from memcost.text import count_tokens_batch


class UserMemory:
    """One user's facts as the update phase changes them, with their vectors.

    Facts are never removed: an updated fact becomes ``superseded`` (pointing to its
    successor), a deleted one ``deleted``; only ``active`` facts go into the index.
    """

    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        self.facts: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.facts)

    def get(self, fact_id: str) -> dict[str, Any] | None:
        return self._by_id.get(fact_id)

    def active_ids(self) -> list[str]:
        return [f["fact_id"] for f in self.facts if f["status"] == "active"]

    def vector(self, fact_id: str) -> np.ndarray:
        return self._vectors[fact_id]

    def similar(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """For each row of ``vectors``: up to ``k`` active facts, most similar first (cosine)."""
        ids = self.active_ids()
        if not ids or k <= 0:
            return [[] for _ in range(len(vectors))]
        matrix = np.stack([self._vectors[i] for i in ids])
        scores = np.asarray(vectors, dtype=np.float32) @ matrix.T
        out = []
        for row in scores:
            order = np.argsort(-row, kind="stable")[:k]
            out.append([(ids[j], float(row[j])) for j in order])
        return out

    def current(self, fact_id: str | None) -> str | None:
        """The active fact that ``fact_id`` became (following updates), or ``None``."""
        seen = set()
        while fact_id is not None and fact_id not in seen:
            seen.add(fact_id)
            fact = self._by_id.get(fact_id)
            if fact is None:
                return None
            if fact["status"] == "active":
                return fact_id
            fact_id = fact["superseded_by"] if fact["status"] == "superseded" else None
        return None

    def _new(
        self,
        candidate: Candidate,
        text: str,
        vector: np.ndarray,
        *,
        positions: Iterable[int],
        dia_ids: Iterable[str],
        has_answer: bool | None,
        created_by: str,
        replaces: str | None,
        backend: str,
        prompt_version: str,
    ) -> str:
        fact_id = f"{self.conversation_id}:f{len(self.facts)}"
        positions = sorted(set(positions))
        fact = {
            "fact_id": fact_id,
            "conversation_id": self.conversation_id,
            "text": text,
            "speaker": candidate.speaker,
            "session_index": candidate.session_index,
            "session_id": candidate.session_id,
            "session_datetime": candidate.session_datetime,
            "position_start": positions[0] if positions else None,
            "position_end": positions[-1] if positions else None,
            "source_positions": positions,
            "source_dia_ids": list(dict.fromkeys(dia_ids)),
            "source_has_answer": has_answer,
            "segment_index": candidate.segment_index,
            "status": "active",
            "superseded_by": None,
            "replaces": replaces,
            "created_by": created_by,
            "tokens": None,
            "backend": backend,
            "prompt_version": prompt_version,
        }
        self.facts.append(fact)
        self._by_id[fact_id] = fact
        self._vectors[fact_id] = np.asarray(vector, dtype=np.float32)
        return fact_id

    def add(self, candidate: Candidate, vector: np.ndarray) -> str:
        return self._new(
            candidate,
            candidate.text,
            vector,
            positions=candidate.positions,
            dia_ids=candidate.dia_ids,
            has_answer=candidate.has_answer,
            created_by="ADD",
            replaces=None,
            backend=candidate.backend,
            prompt_version=candidate.prompt_version,
        )

    def supersede(
        self,
        target: str,
        candidate: Candidate,
        text: str,
        vector: np.ndarray,
        *,
        backend: str,
        prompt_version: str,
    ) -> str:
        """UPDATE: ``target`` is replaced by a new fact with ``text``. The new fact's sources
        are the candidate's, plus the target's when the text merges both."""
        old = self._by_id[target]
        merged = text.strip() != candidate.text.strip()
        positions = list(candidate.positions) + (old["source_positions"] if merged else [])
        dia_ids = list(candidate.dia_ids) + (old["source_dia_ids"] if merged else [])
        flags = [
            f
            for f in (candidate.has_answer, old["source_has_answer"] if merged else None)
            if f is not None
        ]
        new_id = self._new(
            candidate,
            text,
            vector,
            positions=positions,
            dia_ids=dia_ids,
            has_answer=any(flags) if flags else None,
            created_by="UPDATE",
            replaces=target,
            backend=backend,
            prompt_version=prompt_version,
        )
        old["status"] = "superseded"
        old["superseded_by"] = new_id
        return new_id

    def delete(self, target: str) -> None:
        self._by_id[target]["status"] = "deleted"

    def arrow(self) -> pa.Table:
        """Every fact ever written, with its token count (schema in docs/architecture.md)."""
        rows = [dict(f) for f in self.facts]
        counts = count_tokens_batch([r["text"] for r in rows]) if rows else []
        for row, n in zip(rows, counts, strict=True):
            row["tokens"] = n
        return pa.Table.from_pylist(rows, schema=FACT_SCHEMA)

    def table(self) -> pd.DataFrame:
        return self.arrow().to_pandas()
