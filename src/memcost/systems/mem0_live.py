"""``mem0_style`` served turn by turn (notebook 06): the paper's pipeline, one ingest at a time.

Messages wait until ``batch_size`` of them have arrived; then they are cut into segments by the
memory stage's own rule (at most ``batch_size`` messages and ``max_segment_chars`` characters),
and each segment goes through the same steps as in :class:`memcost.memory.build.MemoryBuilder`,
in order: the extraction call, its facts embedded, the ``update_top_k`` most similar stored
facts found, the update call (none while the memory is empty), merged texts embedded, the
decisions applied to the user's :class:`~memcost.memory.user.UserMemory`. Each message retrieves
the ``top_k`` active facts most similar to it. A call that fails leaves its segment's facts out
of the memory, as the build does; the serving row of that call carries the error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from memcost.memory.extract import Candidate, candidates_from, extraction_request, parse_extraction
from memcost.memory.segment import PERSON_ROLE, segment_conversation
from memcost.memory.update import (
    apply_decisions,
    merged_rows,
    parse_update,
    plan_update,
    resolve_decisions,
    similar_facts,
)
from memcost.memory.user import UserMemory
from memcost.offline.extract import offline_extract
from memcost.offline.update import offline_update
from memcost.systems.live import Calls, Ingest, IngestCall, LiveMemory, Shown
from memcost.systems.stored import HistoryLine
from memcost.text import count_tokens


def fact_line(text: str) -> str:
    """A fact as a recall shows it: one ``- text`` line."""
    return f"- {text}\n"


class Mem0Live(LiveMemory):
    """One user's ``mem0_style`` memory, fed one message at a time."""

    def __init__(self, user: str, settings: Mapping[str, Any], *, dataset: str):
        self.user, self.settings, self.dataset = user, settings, dataset
        self.memory = UserMemory(user)
        self.pending: list[HistoryLine] = []
        self.segments = 0  # segments ingested so far: the next one's index
        self.tokens: dict[str, int] = {}  # fact id -> tokens of its recall line

    def tags(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "conversation_id": self.user}

    def state(self) -> dict[str, int]:
        active = self.memory.active_ids()
        return {
            "memory_items": len(active),
            "memory_tokens": sum(self.tokens[f] for f in active),
            "pending_tokens": sum(count_tokens(line.render() + "\n") for line in self.pending),
        }

    def recall(self, calls: Calls, text: str) -> list[Shown]:
        if not self.memory.active_ids():
            return []
        query = calls.embed([text], model=self.settings["embedding_model"], tags=self.tags())
        ids = [fid for fid, _ in self.memory.similar(query, int(self.settings["top_k"]))[0]]
        texts = [self.memory.get(f)["text"] for f in ids]
        return [Shown(t, fact_line(t), self.tokens[f]) for t, f in zip(texts, ids, strict=True)]

    def add(self, calls: Calls, line: HistoryLine) -> Ingest:
        self.pending.append(line)
        interval = int(self.settings["batch_size"])
        if len(self.pending) < interval:
            return Ingest()
        done = Ingest([f"{len(self.pending)} turns since the last ingest (interval {interval})"])
        for segment in self._segments():
            self._ingest_segment(calls, segment, done)
        self.pending = []
        return done

    def _segments(self) -> list:
        """The waiting messages as the memory stage segments them, numbered on from the last."""
        frame = pd.DataFrame(
            {
                "conversation_id": self.user,
                "position": [x.position for x in self.pending],
                "speaker": [x.speaker for x in self.pending],
                "role": PERSON_ROLE,
                "text": [x.text for x in self.pending],
                "session_index": [x.session_index for x in self.pending],
                "session_id": None,
                "session_datetime": [x.session_datetime for x in self.pending],
            }
        )
        cut, _ = segment_conversation(
            frame,
            batch_size=int(self.settings["batch_size"]),
            max_chars=int(self.settings["max_segment_chars"]),
        )
        segments = [replace(s, index=self.segments + i) for i, s in enumerate(cut)]
        self.segments += len(segments)
        return segments

    def _ingest_segment(self, calls: Calls, segment: Any, done: Ingest) -> None:
        s = self.settings
        model, effort = s["extraction_model"], s["extraction_reasoning_effort"]
        request = extraction_request(
            segment, dataset=self.dataset, model=model, reasoning_effort=effort
        )
        extracted = calls.chat(request, offline_extract, parse_extraction, stage="ingest_extract")
        done.calls.append(IngestCall("ingest_extract", extracted))
        if not extracted.ok:
            return
        candidates = candidates_from(
            segment,
            extracted.parsed,
            backend=extracted.backend,
            prompt_version=request.prompt_version,
        )
        if not candidates:
            return
        self._embed(calls, [c.text for c in candidates], done, candidates)
        compared = [
            [fid for fid, _ in row]
            for row in similar_facts(self.memory, candidates, int(s["update_top_k"]))
        ]
        plan = plan_update(
            self.memory,
            candidates,
            compared,
            dataset=self.dataset,
            model=model,
            reasoning_effort=effort,
            update_phase=bool(s["update_phase"]),
        )
        if plan.needs_call:
            decided = calls.chat(plan.request, offline_update, parse_update, stage="ingest_update")
            done.calls.append(IngestCall("ingest_update", decided))
            if not decided.ok:  # the segment is a failed item: none of its facts are kept
                return
            decisions = resolve_decisions(
                candidates, compared, decided, plan.request.payload["ids"]
            )
        else:
            decisions = resolve_decisions(candidates, compared, None, {}, note=plan.note)
        merged = merged_rows(decisions)
        vectors = self._embed(calls, [decisions[i].text for i in merged], done)
        apply_decisions(self.memory, decisions, dict(zip(merged, vectors, strict=True)))
        for fact_id in self.memory.active_ids():
            if fact_id not in self.tokens:
                self.tokens[fact_id] = count_tokens(fact_line(self.memory.get(fact_id)["text"]))

    def _embed(
        self,
        calls: Calls,
        texts: Sequence[str],
        done: Ingest,
        candidates: Sequence[Candidate] = (),
    ) -> list:
        if not texts:
            return []
        vectors = calls.embed(list(texts), model=self.settings["embedding_model"], tags=self.tags())
        done.embedded_tokens += sum(count_tokens(t) for t in texts)
        for candidate, vector in zip(candidates, vectors, strict=False):
            candidate.vector = vector
        return list(vectors)
