"""The paper's memory, step 3 (paper §3.1): the update phase (Mem0's ``add``), ADD, UPDATE, DELETE
or NOOP per new fact against the most similar stored ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost.catalog import generation_params
from memcost.llm import CallResult, ChatRequest
from memcost.llm.requests import parse_json_object
from memcost.memory.facts import DECISIONS, FACT_SCHEMA
from memcost.memory.search import SYSTEM
from memcost.memory.segments import Candidate
from memcost.paper import EXTRACTION_MODEL
from memcost.prompts import MEMORY_UPDATE
from memcost.text import count_tokens_batch, day_text


class UserMemory:
    """One user's facts as the update phase changes them, with their vectors (never removed:
    ``superseded`` or ``deleted``; only ``active`` ones are indexed)."""

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
        """Per row: up to ``k`` active facts, most similar first."""
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
        """The active fact ``fact_id`` became (following updates), or ``None``."""
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
        """UPDATE: ``target`` replaced by a new fact of ``text``, its sources the candidate's (and
        the target's when the text merges both)."""
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
        """Every fact ever written, with its token count."""
        rows = [dict(f) for f in self.facts]
        counts = count_tokens_batch([r["text"] for r in rows]) if rows else []
        for row, n in zip(rows, counts, strict=True):
            row["tokens"] = n
        return pa.Table.from_pylist(rows, schema=FACT_SCHEMA)

    def table(self) -> pd.DataFrame:
        return self.arrow().to_pandas()


UPDATE_TOP_K = 10  # similar stored facts each new fact is compared with


def render_memories_for_update(memories: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    if not memories:
        return "(none)"
    lines = []
    for short, fact in memories:
        day = day_text(fact.get("session_datetime"))
        lines.append(f"[{short}] " + (f"({day}) " if day else "") + str(fact["text"]))
    return "\n".join(lines)


def update_request(
    memory: UserMemory,
    candidates: Sequence[Candidate],
    compared: Sequence[Sequence[str]],
    *,
    dataset: str,
    model: str = EXTRACTION_MODEL,
    reasoning_effort: str = "low",
) -> ChatRequest:
    """The update call for one segment's new facts; the compared facts are listed under short ids
    (``m1``, ``m2``), which models copy more reliably."""
    short_of: dict[str, str] = {}
    for ids in compared:
        for fact_id in ids:
            short_of.setdefault(fact_id, f"m{len(short_of) + 1}")
    memories = [(short, memory.get(fact_id)) for fact_id, short in short_of.items()]
    first = candidates[0]
    when = (
        f"conversation of {day_text(first.session_datetime)}"
        if first.session_datetime
        else ("latest conversation")
    )
    facts_text = "\n".join(f"{i + 1}. {c.text}" for i, c in enumerate(candidates))
    payload = {
        "candidates": [
            {
                "number": i + 1,
                "text": c.text,
                "speaker": c.speaker,
                "compared": [short_of[f] for f in ids],
            }
            for i, (c, ids) in enumerate(zip(candidates, compared, strict=True))
        ],
        "memories": {
            short: {"text": fact["text"], "speaker": fact["speaker"]} for short, fact in memories
        },
        "ids": {short: fact_id for fact_id, short in short_of.items()},
    }
    return ChatRequest(
        model=model,
        messages=MEMORY_UPDATE.messages(
            memories=render_memories_for_update(memories), when=when, facts=facts_text
        ),
        stage="update",
        prompt_version=MEMORY_UPDATE.id,
        json_mode=True,
        reply_schema=MEMORY_UPDATE.reply_schema,
        payload=payload,
        tags={
            "dataset": dataset,
            "conversation_id": first.conversation_id,
            "system": SYSTEM,  # the paper's memory (mem0_style)
            "segment": first.segment_index,
        },
        **generation_params(model, reasoning_effort),
    )


def parse_update(text: str) -> list[dict[str, Any]]:
    """``[{"fact", "event", "memory_id", "text"}]`` of a reply; ``ValueError`` (re-ask) without a
    ``decisions`` list; unusable items dropped (their candidates added, with a note)."""
    obj = parse_json_object(text)
    items = obj.get("decisions")
    if not isinstance(items, list):
        raise ValueError('the reply has no "decisions" list')
    out = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        event = str(item.get("event", "")).strip().upper()
        try:
            number = int(item.get("fact"))
        except (TypeError, ValueError):
            continue
        if event not in DECISIONS:
            continue
        memory_id = item.get("memory_id")
        merged = item.get("text")
        out.append(
            {
                "fact": number,
                "event": event,
                "memory_id": str(memory_id).strip() if memory_id not in (None, "") else None,
                "text": " ".join(merged.split()) if isinstance(merged, str) else None,
            }
        )
    return out


@dataclass
class Decision:
    candidate: Candidate
    event: str
    target: str | None = None  # fact id (long form)
    text: str | None = None  # merged text for UPDATE
    note: str | None = None  # why the model's decision was changed, or why no call was made
    compared: list[str] = field(default_factory=list)
    backend: str | None = None
    prompt_version: str | None = None


def resolve_decisions(
    candidates: Sequence[Candidate],
    compared: Sequence[Sequence[str]],
    result: CallResult | None,
    ids: Mapping[str, str],
    *,
    note: str | None = None,
) -> list[Decision]:
    """One checked decision per candidate: a missing one, or an UPDATE/DELETE of an unknown memory,
    is ADD. A failed call has none: its segment fails (an "ADD all" a resume could never repair)."""
    if result is not None and not result.ok:
        raise ValueError(
            f"the update call failed ({result.error or result.parse_error}): its "
            "segment is a failed item, not a set of decisions"
        )
    backend = result.backend if result is not None else None
    version = result.request.prompt_version if result is not None else None
    parsed: dict[int, dict[str, Any]] = {}
    if result is not None:
        for item in result.parsed or []:
            parsed.setdefault(item["fact"], item)
    out = []
    for i, (cand, ids_i) in enumerate(zip(candidates, compared, strict=True)):
        d = Decision(
            cand, "ADD", compared=list(ids_i), backend=backend, prompt_version=version, note=note
        )
        item = parsed.get(i + 1)
        if result is None:
            pass
        elif item is None:
            d.note = "no decision returned: added"
        else:
            event, target = item["event"], ids.get(item["memory_id"] or "")
            if event in ("UPDATE", "DELETE") and target is None:
                d.note = f"{event} named unknown memory {item['memory_id']!r}: added"
            elif event == "UPDATE":
                d.event, d.target = "UPDATE", target
                d.text = item["text"] or cand.text
            elif event == "DELETE":
                d.event, d.target = "DELETE", target
            elif event == "NOOP":
                d.event, d.target = "NOOP", target
        out.append(d)
    return out


def apply_decisions(
    memory: UserMemory, decisions: Sequence[Decision], merged_vectors: Mapping[int, np.ndarray]
) -> list[dict[str, Any]]:
    """Apply in order (a target changed earlier is followed; an UPDATE of a deleted fact is ADD, a
    DELETE NOOP); the ``updates.jsonl`` records."""
    records = []
    for i, d in enumerate(decisions):
        cand = d.candidate
        event, target, fact_id, note = d.event, d.target, None, d.note
        if event in ("UPDATE", "DELETE"):
            current = memory.current(target)
            if current is None:
                note = f"{event} target {target} no longer active"
                event = "ADD" if event == "UPDATE" else "NOOP"
            target = current if current is not None else target
        if event == "ADD":
            fact_id = memory.add(cand, cand.vector)
        elif event == "UPDATE":
            vector = merged_vectors.get(i, cand.vector)
            fact_id = memory.supersede(
                target,
                cand,
                d.text or cand.text,
                vector,
                backend=d.backend or cand.backend,
                prompt_version=d.prompt_version or cand.prompt_version,
            )
        elif event == "DELETE":
            memory.delete(target)
        records.append(
            {
                "conversation_id": cand.conversation_id,
                "segment_index": cand.segment_index,
                "candidate_index": cand.candidate_index,
                "candidate_text": cand.text,
                "speaker": cand.speaker,
                "session_datetime": cand.session_datetime,
                "decision": event,
                "target_fact_id": target if event != "ADD" else None,
                "merged_text": (d.text or cand.text) if event == "UPDATE" else None,
                "fact_id": fact_id,
                "compared_fact_ids": d.compared,
                "backend": d.backend,
                "prompt_version": d.prompt_version,
                "note": note,
            }
        )
    return records


def similar_facts(
    memory: UserMemory, candidates: Sequence[Candidate], k: int
) -> list[list[tuple[str, float]]]:
    """For each new fact, the ``k`` most similar active facts of the user."""
    matrix = np.stack([c.vector for c in candidates])
    return memory.similar(matrix, k)


@dataclass(frozen=True)
class UpdatePlan:
    """A model call for one segment's new facts, or none with the ``note`` saying why."""

    request: ChatRequest | None = None
    note: str | None = None

    @property
    def needs_call(self) -> bool:
        return self.request is not None


def plan_update(
    memory: UserMemory,
    candidates: Sequence[Candidate],
    compared: Sequence[Sequence[str]],
    *,
    dataset: str,
    model: str = EXTRACTION_MODEL,
    reasoning_effort: str = "low",
    update_phase: bool = True,
) -> UpdatePlan:
    if not update_phase:
        return UpdatePlan(note="update phase off: added")
    if not memory.active_ids():
        return UpdatePlan(note="memory empty: added without a call")
    return UpdatePlan(
        request=update_request(
            memory,
            candidates,
            compared,
            dataset=dataset,
            model=model,
            reasoning_effort=reasoning_effort,
        )
    )


def merged_rows(decisions: Sequence[Decision]) -> list[int]:
    """The UPDATEs that write a new text (it needs its own embedding)."""
    return [
        i
        for i, d in enumerate(decisions)
        if d.event == "UPDATE" and (d.text or "").strip() != d.candidate.text.strip()
    ]
