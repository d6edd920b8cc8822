"""Offline stand-ins for the cognee library's two chat calls (``memcost.systems.cognee_library``).

cognee's ``remember`` cuts each document into chunks and asks two things of each chunk, both as
structured output (``response_format`` a JSON schema): a knowledge graph (``KnowledgeGraph``:
nodes with id, name, type and description; edges with source, target, relationship name and a
one-sentence description) and a summary (``SummarizedContent``: "This chunk is about:" and a
list of facts). The stand-ins read the chunk as cognee sends it (its user message; the
documents are ``Session date: <iso>`` and one ``<speaker>: <text>`` line per message) and answer
in those schemas, so the real library parses, stores and searches their output:

- the graph: each informative sentence (the extraction stand-in's test) as one triple of the
  graph-memory stand-in (:func:`memcost.offline.graph.sentence_triple`), the speaker a
  ``Person`` node, the rest of the sentence a ``Concept`` node, the edge described by the fact
  as the extraction stand-in writes it; a dated session adds its day as a ``Timestamp`` node,
  linked by ``mentioned_at`` as cognee's prompt asks;
- the summary: the chunk's speakers and the same facts, in the two sections the prompt asks for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from memcost.llm import ChatRequest
from memcost.offline.extract import informative_sentence, offline_fact_text, person_name
from memcost.offline.graph import sentence_triple
from memcost.text import split_sentences

_DATE = re.compile(r"^Session date: (\S+)")
_LINE = re.compile(r"^([^:]{1,40}): (.+)$")


def _chunk(request: ChatRequest) -> str:
    """The chunk: cognee's user message."""
    messages = request.payload["messages"]
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def said(text: str) -> Iterator[tuple[str, str, str | None]]:
    """``(speaker, sentence, session date)`` of each informative sentence of a chunk, in order.
    A chunk cut after its document's date line has no date."""
    when = None
    for line in text.splitlines():
        line = line.strip()
        if found := _DATE.match(line):
            when = found.group(1)
            continue
        if found := _LINE.match(line):
            speaker, body = found.groups()
            for sentence in split_sentences(body):
                if informative_sentence(sentence):
                    yield speaker, sentence, when


def offline_cognee_graph(request: ChatRequest) -> str:
    """The chunk's knowledge graph in cognee's ``KnowledgeGraph`` schema."""
    nodes: dict[str, dict[str, str]] = {}
    edges: list[dict[str, str]] = []

    def node(name: str, kind: str, description: str) -> str:
        nodes.setdefault(name, {"id": name, "name": name, "type": kind, "description": description})
        return name

    for speaker, sentence, when in said(_chunk(request)):
        triple = sentence_triple(speaker, sentence)
        if triple is None:
            continue
        source, relation, target = triple
        node(source, "Person", f"{person_name(speaker)}, who speaks in the conversation.")
        node(target, "Concept", sentence)
        edges.append(
            {
                "source_node_id": source,
                "target_node_id": target,
                "relationship_name": relation.replace(" ", "_"),
                "description": offline_fact_text(sentence, speaker, when),
            }
        )
        if when:
            day = node(when[:10], "Timestamp", f"The day {when[:10]}.")
            edges.append(
                {
                    "source_node_id": target,
                    "target_node_id": day,
                    "relationship_name": "mentioned_at",
                    "description": f"{source} mentioned {target} on {day}.",
                }
            )
    return json.dumps({"nodes": list(nodes.values()), "edges": edges}, ensure_ascii=False)


def offline_cognee_summary(request: ChatRequest) -> str:
    """The chunk's summary in cognee's ``SummarizedContent`` schema."""
    found = list(said(_chunk(request)))
    people = sorted({person_name(s) for s, _, _ in found})
    facts = [offline_fact_text(sentence, s, when) for s, sentence, when in found]
    lines = ["This chunk is about:", f"- People: {', '.join(people) or 'none named'}", "", "Facts:"]
    lines += [f"- {f}" for f in facts] or ["- (nothing informative)"]
    return json.dumps({"summary": "\n".join(lines), "description": ""}, ensure_ascii=False)
