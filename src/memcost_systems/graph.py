"""``graph``: Mem0^g, the graph variant of Mem0's paper."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

from memcost.catalog import generation_params
from memcost.llm import CallResult, ChatRequest
from memcost.memory.base import TOKENS_PER_RETRIEVED_ITEM
from memcost.memory.segments import BATCH_SIZE, MAX_SEGMENT_CHARS, Segment, segment_conversation
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.text import spoken_datetime
from memcost_systems.offline import offline_graph
from memcost_systems.prompts import MEMORY_GRAPH_ENTITIES, MEMORY_GRAPH_RELATIONS
from memcost_systems.stored import StoredSystem, UserIngest, UserItems, item_rows, nearest, shown

TOP_K = 20  # the paper's top-k for Mem0, kept for its graph variant
STORED_SHOWN = 50  # stored relations shown to the relationship generator at most


def parse_graph(text: str) -> dict[str, Any]:
    """A reply of either call as ``{"entities": [...]}`` or ``{"relations": [...]}``."""
    found = re.search(r"\{.*\}", text, re.DOTALL)
    data = json.loads(found.group(0) if found else text)
    if not isinstance(data, dict) or not any(
        isinstance(data.get(k), list) for k in ("entities", "relations")
    ):
        raise ValueError("expected a JSON object with an entities or relations list")
    return data


class Graph:
    """One user's graph: entities, and relations that are marked invalid, never removed."""

    def __init__(self) -> None:
        self.entities: dict[str, str] = {}  # name -> type
        self.relations: list[dict[str, Any]] = []

    def add_entities(self, entities: list[dict[str, Any]]) -> list[str]:
        names = []
        for e in entities:
            name = str(e.get("name") or "").strip()
            if name:
                self.entities.setdefault(name, str(e.get("type") or "other"))
                names.append(name)
        return names

    def valid_about(self, names: list[str]) -> list[dict[str, Any]]:
        wanted = {n.lower() for n in names}
        return [
            r
            for r in self.relations
            if r["valid"] and (r["source"].lower() in wanted or r["destination"].lower() in wanted)
        ]

    def add_relations(
        self, relations: list[dict[str, Any]], when: str | None, positions: list[int] | None = None
    ) -> None:
        by_id = {r["id"]: r for r in self.relations}
        for rel in relations:
            source, relation = str(rel.get("source") or ""), str(rel.get("relation") or "")
            destination = str(rel.get("destination") or "")
            if not (source and relation and destination):
                continue
            key = f"r{len(self.relations)}"
            old = by_id.get(str(rel.get("supersedes")))
            if old is not None and old["valid"]:
                old["valid"], old["superseded_by"] = False, key  # marked, not deleted
            new = {
                "id": key,
                "source": source,
                "relation": relation,
                "destination": destination,
                "valid": True,
                "superseded_by": None,
                "supersedes": old["id"] if old is not None else None,
                "session_datetime": when,
                "positions": list(positions or []),
            }
            self.relations.append(new)
            by_id[key] = new

    def items(self) -> pd.DataFrame:
        rows = [
            {
                "item_id": r["id"],
                "kind": "triple",
                "text": f"{r['source']} {r['relation']} {r['destination']}",
                "session_datetime": r["session_datetime"],
                "valid": r["valid"],
                "positions": r.get("positions", []),
                "detail": {
                    k: r[k]
                    for k in ("source", "relation", "destination", "supersedes", "superseded_by")
                },
            }
            for r in self.relations
        ]
        rows += [
            {
                "item_id": f"e{i}",
                "kind": "entity",
                "text": name,
                "valid": True,
                "session_datetime": None,
                "detail": {"type": kind},
            }
            for i, (name, kind) in enumerate(self.entities.items())
        ]
        return item_rows(rows)


def _messages(segment: Segment) -> list[tuple[str, str]]:
    return [(m.speaker, m.text) for m in segment.messages if m.is_person]


class _GraphIngest(UserIngest):
    def __init__(self, system: GraphMemory, user: str, segments: list[Segment]):
        super().__init__(user, [])
        self.system, self.segments = system, segments
        self.graph = Graph()
        self.step, self.index = "entities", 0
        self.segment_entities: list[str] = []

    def requests(self) -> list[ChatRequest]:
        if self.index >= len(self.segments):
            return []
        segment = self.segments[self.index]
        if self.step == "entities":
            return [self.system.entities_request(self.user, segment)]
        stored = self.graph.valid_about(self.segment_entities)[-STORED_SHOWN:]
        return [self.system.relations_request(self.user, segment, self.segment_entities, stored)]

    def take(self, results: list[CallResult]) -> None:
        parsed = results[0].parsed or {}
        if self.step == "entities":
            self.segment_entities = self.graph.add_entities(list(parsed.get("entities") or []))
            self.step = "relations"
            return
        segment = self.segments[self.index]
        self.graph.add_relations(
            list(parsed.get("relations") or []),
            segment.session_datetime,
            sorted({m.position for m in segment.person_messages}),
        )
        self.step, self.index = "entities", self.index + 1

    def items(self) -> pd.DataFrame:
        return self.graph.items()


class GraphMemory(StoredSystem):
    name = "graph"
    answers_as = "memory_graph"
    describes = "Mem0^g: entities and relation triples per segment; invalid, never deleted"
    write_passes = 2.0  # an entity call and a relation call read every segment; no update phase
    write_update_phase = False
    defaults = {
        "extraction_model": EXTRACTION_MODEL,
        "extraction_reasoning_effort": "low",
        "batch_size": BATCH_SIZE,
        "max_segment_chars": MAX_SEGMENT_CHARS,
        "top_k": TOP_K,
        "embedding_model": EMBEDDING_MODEL,
    }
    embed_kinds = ("triple",)
    prompts = (MEMORY_GRAPH_ENTITIES.id, MEMORY_GRAPH_RELATIONS.id)
    parse = staticmethod(parse_graph)

    @classmethod
    def read_context_tokens(cls, settings, history_tokens, turn_tokens):
        """``top_k`` triples, each sized as one of the paper's facts (a triple is shorter: the
        estimate errs high)."""
        return int(settings["top_k"]) * TOKENS_PER_RETRIEVED_ITEM

    @classmethod
    def write_calls(cls, settings, stats, segments):
        """Two calls a segment: its entities, then their relations."""
        return 2 * segments, 1.0

    def start(self, user: str, turns: pd.DataFrame) -> UserIngest:
        segments, _ = segment_conversation(
            turns,
            batch_size=int(self.settings["batch_size"]),
            max_chars=int(self.settings["max_segment_chars"]),
        )
        return _GraphIngest(self, user, segments)

    def _request(
        self,
        user: str,
        segment: Segment,
        prompt: Any,
        step: str,
        payload: dict[str, Any],
        **fields: str,
    ) -> ChatRequest:
        when = spoken_datetime(segment.session_datetime)
        messages = _messages(segment)
        model = self.settings["extraction_model"]
        return ChatRequest(
            model=model,
            messages=prompt.messages(
                session_line=f"Session date: {when}\n" if when else "",
                messages="\n".join(f"{s}: {t}" for s, t in messages),
                **fields,
            ),
            stage="extract",
            prompt_version=prompt.id,
            json_mode=True,
            payload={"step": step, "messages": messages, **payload},
            tags=self.tags(user, memory_step=step, segment=segment.index),
            **generation_params(model, self.settings["extraction_reasoning_effort"]),
        )

    def entities_request(self, user: str, segment: Segment) -> ChatRequest:
        return self._request(user, segment, MEMORY_GRAPH_ENTITIES, "entities", {})

    def relations_request(
        self, user: str, segment: Segment, entities: list[str], stored: list[dict[str, Any]]
    ) -> ChatRequest:
        shown = (
            "\n".join(
                f"{r['id']}: {r['source']} | {r['relation']} | {r['destination']}" for r in stored
            )
            or "(none)"
        )
        return self._request(
            user,
            segment,
            MEMORY_GRAPH_RELATIONS,
            "relations",
            {"stored": [(r["id"], r["source"], r["relation"]) for r in stored]},
            entities=", ".join(entities) or "(none)",
            stored=shown,
        )

    def offline(self, request: ChatRequest) -> str:
        return offline_graph(request)

    def search(self, memory: UserItems, question: dict, query: np.ndarray) -> pd.DataFrame:
        """The valid relations of the entities the question names, most similar first, then
        the other valid relations by similarity: ``top_k`` in all."""
        items, k = memory.items, int(self.settings["top_k"])
        triples = memory.of_kind("triple") & items["valid"].to_numpy()
        named = _named_entities(items, str(question["question"]))
        about = triples & np.array([_mentions(d, named) for d in items["detail"]], dtype=bool)
        picked = nearest(memory.vectors, query, about, k)
        picked += nearest(memory.vectors, query, triples & ~about, k - len(picked))
        return shown(items, [r for r, _ in picked], dict(picked))


def _named_entities(items: pd.DataFrame, question: str) -> set[str]:
    """Stored entity names (three letters or more) the question names, lower case."""
    text = question.lower()
    names = items.loc[items["kind"] == "entity", "text"].str.lower()
    return {n for n in names if len(n) >= 3 and re.search(rf"\b{re.escape(n)}\b", text)}


def _mentions(detail: str, names: set[str]) -> bool:
    if not names:
        return False
    d = json.loads(detail)
    ends = (str(d.get("source", "")).lower(), str(d.get("destination", "")).lower())
    return any(end in names for end in ends)
