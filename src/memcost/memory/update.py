"""Step 3 of the memory (study §2; paper §3.1): the update phase (Mem0's ``add``).

Each segment's new facts are compared with the most similar facts already stored for the same
user; one model call decides ADD, UPDATE (with the merged text), DELETE or NOOP per new fact,
and every decision is recorded. Facts are never removed: an updated fact becomes
``superseded`` (pointing to its successor), a deleted one ``deleted``; only ``active`` facts go
into the index. The offline stand-in is :mod:`memcost.offline.update`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memcost.catalog import generation_params
from memcost.llm import ChatRequest, ChatResult
from memcost.llm.requests import parse_json_object
from memcost.memory.extract import Candidate
from memcost.memory.user import UserMemory
from memcost.paper import EXTRACTION_MODEL
from memcost.prompts import MEMORY_UPDATE
from memcost.text import day_text

UPDATE_TOP_K = 10  # similar stored facts each new fact is compared with
DECISIONS = ("ADD", "UPDATE", "DELETE", "NOOP")
FACT_STATUSES = ("active", "superseded", "deleted")


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
    """The update-phase call for one segment's new facts.

    ``compared[i]`` are the fact ids candidate ``i`` is compared with (its most similar active
    facts); the prompt lists their union under short ids (``m1``, ``m2``, ...), which models
    copy more reliably than long ids.
    """
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
        payload=payload,
        tags={
            "dataset": dataset,
            "conversation_id": first.conversation_id,
            "segment": first.segment_index,
        },
        **generation_params(model, reasoning_effort),
    )


def parse_update(text: str) -> list[dict[str, Any]]:
    """Decisions of an update reply: ``[{"fact": int, "event", "memory_id", "text"}]``.

    Raises ``ValueError`` (re-ask) when the reply is not an object with a ``decisions`` list;
    items with an unknown event or no fact number are dropped (their candidates are then
    added, with a note).
    """
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
    """What the update phase does with one candidate (after checking the model's answer)."""

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
    result: ChatResult | None,
    ids: Mapping[str, str],
    *,
    note: str | None = None,
) -> list[Decision]:
    """Turn a reply (or no call) into one checked decision per candidate.

    A missing decision, or an UPDATE/DELETE naming an unknown memory, becomes ADD (the
    information is kept, never lost to a bad reply). A call that failed after its retries
    has no decisions: its segment is a failed item (see
    :meth:`memcost.memory.build.MemoryBuilder.update_wave`), and turning it into "ADD every
    candidate" would silently change the memory a resume can never repair.
    """
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
    """Apply decisions in order; returns the ``updates.jsonl`` records.

    A target already changed earlier in the same batch is followed to its current fact; an
    UPDATE of a deleted fact becomes ADD, a DELETE of one NOOP.
    """
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
    """For each new fact (its ``vector`` set): the ``k`` most similar active facts of the same
    user, ``(fact_id, cosine)``, most similar first."""
    matrix = np.stack([c.vector for c in candidates])
    return memory.similar(matrix, k)


@dataclass(frozen=True)
class UpdatePlan:
    """What the update phase does with one segment's new facts: a model call (``request``),
    or none, with the ``note`` saying why (the phase is off, or the memory is still empty)."""

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
    """The update call for one segment's new facts, or the note saying why none is needed."""
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
    """The decisions whose UPDATE writes a new text (it needs its own embedding)."""
    return [
        i
        for i, d in enumerate(decisions)
        if d.event == "UPDATE" and (d.text or "").strip() != d.candidate.text.strip()
    ]
