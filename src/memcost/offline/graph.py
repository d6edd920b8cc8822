"""Offline graph memory (the stand-in for Mem0^g's entity extractor and relationship generator).

Classical and deterministic: each informative sentence of a person (the extraction stand-in's
test) becomes one triple, the speaker as source, the sentence's first two content words (adverbs
such as "now" left out) as the relation and its remaining content words as the destination:
"I practise yoga twice a week." gives (Maya, practise yoga, twice week). Entities are the
speakers, the capitalised names inside sentences and the destinations. A new triple with the
same source and relation as a stored one supersedes it; a model decides that from meaning, this
stand-in from words. It reads the request's ``payload``, never the network.
"""

from __future__ import annotations

import json
import re

from memcost.llm import ChatRequest
from memcost.offline.extract import informative_sentence, person_name
from memcost.text import content_words, split_sentences

_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-zA-Z'&-]+")
# Words that say when or how sure, not what: left out of relations so that "I now practise
# yoga ..." and "I practise yoga ..." name the same relation.
_ADVERBS = frozenset(
    "now also still just really usually actually currently recently finally already even".split()
)


def sentence_triple(speaker: str, sentence: str) -> tuple[str, str, str] | None:
    """``(source, relation, destination)`` of one sentence, or ``None`` when it has too few
    words to say something."""
    words = [w for w in content_words(sentence) if w not in _ADVERBS]
    if len(words) < 3:
        return None
    return person_name(speaker), " ".join(words[:2]), " ".join(words[2:8])


def _sentences(payload: dict) -> list[tuple[str, str]]:
    return [
        (speaker, s)
        for speaker, text in payload["messages"]
        for line in text.splitlines()
        for s in split_sentences(line)
        if informative_sentence(s)
    ]


def offline_entities(request: ChatRequest) -> str:
    """The entities of the segment: speakers, capitalised names, each triple's destination."""
    found: dict[str, str] = {}
    for speaker, sentence in _sentences(request.payload):
        found.setdefault(person_name(speaker), "person")
        for name in _NAME.findall(sentence):
            found.setdefault(name, "other")
        triple = sentence_triple(speaker, sentence)
        if triple:
            found.setdefault(triple[2], "other")
    return json.dumps(
        {"entities": [{"name": n, "type": t} for n, t in found.items()]}, ensure_ascii=False
    )


def offline_relations(request: ChatRequest) -> str:
    """One triple per informative sentence; ``supersedes`` the stored relation with the same
    source and relation (the latest one), if any."""
    stored = {(s.lower(), r): key for key, s, r in request.payload["stored"]}
    relations = []
    for speaker, sentence in _sentences(request.payload):
        triple = sentence_triple(speaker, sentence)
        if triple is None:
            continue
        source, relation, destination = triple
        relations.append(
            {
                "source": source,
                "relation": relation,
                "destination": destination,
                "supersedes": stored.get((source.lower(), relation)),
            }
        )
    return json.dumps({"relations": relations}, ensure_ascii=False)


def offline_graph(request: ChatRequest) -> str:
    """The graph system's stand-in for either of its two calls (``payload["step"]``)."""
    step = request.payload["step"]
    if step == "entities":
        return offline_entities(request)
    if step == "relations":
        return offline_relations(request)
    raise ValueError(f"no offline graph method for step {step!r}")
