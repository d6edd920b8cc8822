"""Offline stand-ins for Hindsight's two chat calls (``memcost.systems.hindsight_library``).

Hindsight's ``retain`` asks a model, per chunk of each item, for the facts worth keeping
(``FactExtractionResponse``: ``what``, ``when``, ``where``, ``who``, ``why``, ``fact_type``,
``entities``), embeds them and stores them with their entities; its background consolidation then
asks, for a batch of new facts and the observations they may touch, which observations to create,
update or delete. Both answer in JSON mode with the schema in the prompt. The stand-ins read the
requests as Hindsight sends them and answer in those formats:

- retain: each informative sentence of each ``<speaker>: <text>`` line of the chunk (the
  extraction stand-in's test) as a ``world`` fact of that speaker, dated by the chunk's
  ``Event Date`` line, its entities the speaker and the capitalised names in it;
- consolidation: each new fact either updates the existing observation of the same speaker it
  says the same thing of (the memory stage's lexical rule,
  :func:`memcost.offline.update.lexical_decision`) or creates one of its own,
  ``<speaker> said: <sentence>``; nothing is deleted.
"""

from __future__ import annotations

import json
import re

from memcost.llm import ChatRequest
from memcost.offline.extract import informative_sentence, person_name
from memcost.offline.update import lexical_decision
from memcost.text import split_sentences

_EVENT_DATE = re.compile(r"^Event Date: .*\((\d{4}-\d{2}-\d{2})")
_LINE = re.compile(r"^([^:]{1,40}): (.+)$")
_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-zA-Z'&-]+")
_NEW_FACT = re.compile(r"^\[([0-9a-f-]{36})\] (.*?)(?: \| Involving: ([^(]*?))?(?: \(.*\))?$")


def _user(request: ChatRequest) -> str:
    messages = request.payload["messages"]
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def offline_hindsight_retain(request: ChatRequest) -> str:
    """The chunk's facts in Hindsight's ``FactExtractionResponse`` format."""
    text = _user(request)
    when = "N/A"
    facts = []
    head, _, content = text.partition("\nContent:\n")
    for line in head.splitlines():
        if found := _EVENT_DATE.match(line.strip()):
            when = found.group(1)
    for line in content.splitlines():
        found = _LINE.match(line.strip())
        if not found:
            continue
        speaker, body = found.groups()
        for sentence in split_sentences(body):
            if informative_sentence(sentence):
                who = person_name(speaker)
                names = [n for n in _NAME.findall(sentence) if n != who]
                facts.append(
                    {
                        "what": sentence,
                        "when": when,
                        "where": "N/A",
                        "who": who,
                        "why": "N/A",
                        "fact_type": "world",
                        "entities": [who, *dict.fromkeys(names)],
                    }
                )
    return json.dumps({"facts": facts}, ensure_ascii=False)


def _section(text: str, title: str) -> str:
    after = text.split(f"### {title}\n", 1)
    return after[1].split("\n###", 1)[0].split("\n## ", 1)[0] if len(after) == 2 else ""


def offline_hindsight_consolidate(request: ChatRequest) -> str:
    """Observations from the new facts: an update where one says the same thing, else a new
    one, in Hindsight's ``creates`` / ``updates`` / ``deletes`` format."""
    text = _user(request)
    try:
        existing = json.loads(_section(text, "Existing observations").strip() or "[]")
    except json.JSONDecodeError:
        existing = []
    creates: list[dict] = []
    updates: dict[str, dict] = {}
    for line in _section(text, "New facts").splitlines():
        found = _NEW_FACT.match(line.strip())
        if not found:
            continue
        fact_id, what, who = found.groups()
        said = f"{who.strip()} said: " if who else ""
        observation = said + what.strip()
        same = next(  # the rule compares facts of one speaker, as the memory stage's does
            (
                o
                for o in existing
                if isinstance(o, dict)
                and str(o.get("text", "")).startswith(said)
                and lexical_decision(observation, str(o["text"])) in ("NOOP", "UPDATE")
            ),
            None,
        )
        if same is not None:
            entry = updates.setdefault(
                str(same["id"]),
                {
                    "observation_id": str(same["id"]),
                    "text": observation,
                    "source_fact_ids": [],
                    "reason": "the same facet as the existing observation (lexical rule)",
                },
            )
            entry["source_fact_ids"].append(fact_id)
        else:
            creates.append(
                {
                    "text": observation,
                    "source_fact_ids": [fact_id],
                    "reason": "no existing observation covers this facet (lexical rule)",
                }
            )
    return json.dumps(
        {"creates": creates, "updates": list(updates.values()), "deletes": []}, ensure_ascii=False
    )
