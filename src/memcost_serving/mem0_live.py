"""The paper's memory served turn by turn (notebook 06): every ``batch_size`` messages, the
builder's own steps (:mod:`memcost.memory.mem0_style`) on the segments they make."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from memcost.llm import CallResult
from memcost.memory.mem0_style import (
    BuildReport,
    MemoryConfig,
    UserState,
    embed_candidates,
    extract,
    update_wave,
)
from memcost.memory.segments import PERSON_ROLE, Segment, UserPlan, segment_conversation
from memcost.memory.update import UserMemory
from memcost.text import count_tokens
from memcost_systems.live import (
    Calls,
    HistoryLine,
    Ingest,
    IngestCall,
    LiveMemory,
    Shown,
    fact_line,
)


class Mem0Live(LiveMemory):
    """One user's memory fed one message at a time: every ``batch_size`` messages, the builder's
    steps on their segments."""

    def __init__(self, user: str, settings: Mapping[str, Any], *, dataset: str):
        self.user, self.settings, self.dataset = user, settings, dataset
        self.config = MemoryConfig.of(settings, dataset)
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
        one = {self.user: UserState(UserPlan(self.user, self._segments(), []), self.memory)}
        steps: Any = TurnSteps(calls, done, self.tags())
        report = BuildReport()
        extract(steps, self.config, one, report)
        new = [c for found in one[self.user].candidates.values() for c in found]
        embed_candidates(steps, self.config, {self.user: new})
        for segment in one[self.user].plan.segments:
            update_wave(steps, self.config, one, segment.index, report)
        self.pending = []
        for fact_id in self.memory.active_ids():
            if fact_id not in self.tokens:
                self.tokens[fact_id] = count_tokens(fact_line(self.memory.get(fact_id)["text"]))
        return done

    def _segments(self) -> list[Segment]:
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


class TurnSteps:
    """The builder's calls made one at a time at a turn of the serving study, each recorded in the
    turn's :class:`Ingest`."""

    def __init__(self, calls: Calls, done: Ingest, tags: Mapping[str, Any]):
        self.calls, self.done, self.tags = calls, done, tags

    def chat_many(self, requests: Sequence[Any], *, offline, parse, **_: Any) -> list[CallResult]:
        results = []
        for request in requests:
            stage = f"ingest_{request.stage}"  # ingest_extract, ingest_update
            results.append(self.calls.chat(request, offline, parse, stage=stage))
            self.done.calls.append(IngestCall(stage, results[-1]))
        return results

    def embed_groups(
        self, groups: Sequence[tuple[Sequence[str], Any]], *, model: str, **_: Any
    ) -> list[np.ndarray]:
        out = []
        for texts, _tags in groups:
            if not texts:
                out.append(np.zeros((0, 0), np.float32))
                continue
            out.append(self.calls.embed(list(texts), model=model, tags=self.tags))
            self.done.embedded_tokens += sum(count_tokens(t) for t in texts)
        return out
