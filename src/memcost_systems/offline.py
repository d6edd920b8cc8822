"""The offline stand-ins of the field's memory systems and libraries (:mod:`memcost.offline`
has the core's): classical methods that answer their prompts without a model."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Sequence

from memcost.llm import ChatRequest
from memcost.offline import informative_sentence, lexical_decision, offline_fact_text, person_name
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


# A message as the stand-ins read it: (speaker, text) or (speaker, text, ISO date or None).
Message = Sequence[str | None]


def _text_sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in split_sentences(line)]


def observation_lines(messages: Sequence[Message]) -> list[str]:
    """``- On 8 May 2023, Maya said: ...`` for every informative sentence, in order."""
    lines = []
    for message in messages:
        speaker, text = str(message[0]), str(message[1])
        when = message[2] if len(message) > 2 else None
        lines += [
            f"- {offline_fact_text(s, speaker, when)}"
            for s in _text_sentences(text)
            if informative_sentence(s)
        ]
    return lines


def standin_observe(messages: Sequence[Message]) -> str:
    """Observations of the unobserved messages, one line each."""
    return "\n".join(observation_lines(messages))


def _subject_key(observation: str) -> tuple[str, ...]:
    body = observation.split(": ", 1)[-1]
    return tuple(content_words(observation.split(" said", 1)[0]) + content_words(body)[:3])


def standin_reflect(observations: Sequence[str]) -> str:
    """Condensed observations: the latest observation of each (person, first three content
    words) survives, in the order they were made."""
    latest: dict[tuple[str, ...], int] = {}
    for i, obs in enumerate(observations):
        latest[_subject_key(obs)] = i
    return "\n".join(observations[i] for i in sorted(latest.values()))


def standin_summarise(summary: Sequence[str], messages: Sequence[Message], max_words: int) -> str:
    """The newest observations of ``summary`` plus the new messages, condensed as the reflector
    condenses, then cut from the oldest end to ``max_words`` words."""
    lines = standin_reflect([*summary, *observation_lines(messages)]).splitlines()
    kept: list[str] = []
    words = 0
    for line in reversed(lines):
        n = len(line.split())
        if kept and words + n > max_words:
            break
        kept.append(line)
        words += n
    return "\n".join(reversed(kept))


NO_SESSION_DATE = "-"  # the date line of a session without a date (PersonaMem's)
_LINE = re.compile(r"^(?:user|assistant): ([^:]{1,40}): (.*)$")
_DATE = re.compile(r"^user: Session date: (\S+)$")
_FENCED = re.compile(r"```\s*(.*?)\s*```", re.DOTALL)


def _user_text(request: ChatRequest) -> str:
    return "\n".join(m["content"] for m in request.payload["messages"] if m["role"] == "user")


def offline_mem0_extract(request: ChatRequest) -> str:
    """Each informative sentence of each message, as a fact naming its speaker and date."""
    when, facts = None, []
    for line in _user_text(request).splitlines():
        line = line.strip()
        if found := _DATE.match(line):
            when = None if found.group(1) == NO_SESSION_DATE else found.group(1)
            continue
        if found := _LINE.match(line):
            speaker, text = found.groups()
            facts += [
                offline_fact_text(s, speaker, when)
                for s in split_sentences(text)
                if informative_sentence(s)
            ]
    return json.dumps({"facts": facts}, ensure_ascii=False)


def _literal(block: str) -> list:
    """A list mem0 printed into its prompt: JSON, or Python's repr of one (single quotes)."""
    try:
        return json.loads(block)
    except json.JSONDecodeError:
        return ast.literal_eval(block)


def offline_mem0_update(request: ChatRequest) -> str:
    """mem0's update phase by the lexical rule: a near-duplicate of a stored memory changes
    nothing, a fact about the same thing updates it, anything else is added."""
    blocks = [
        _literal(b) for b in _FENCED.findall(_user_text(request)) if b.strip().startswith("[")
    ]
    stored = blocks[0] if len(blocks) > 1 else []
    new = blocks[-1] if blocks else []
    names = sorted({m.split(" said")[0].split(", ")[-1] for m in new if " said" in m})
    out = [{"id": m["id"], "text": m["text"], "event": "NONE"} for m in stored]
    by_id = {m["id"]: m for m in out}
    for i, fact in enumerate(new):
        verdicts = [(lexical_decision(fact, m["text"], names=names), m) for m in stored]
        if any(v == "NOOP" for v, _ in verdicts):
            continue
        update = next((m for v, m in verdicts if v == "UPDATE"), None)
        if update is not None and by_id[update["id"]]["event"] == "NONE":
            by_id[update["id"]].update(event="UPDATE", text=fact, old_memory=update["text"])
        else:
            out.append({"id": str(len(stored) + i), "text": fact, "event": "ADD"})
    return json.dumps({"memory": out}, ensure_ascii=False)


_COGNEE_DATE = re.compile(r"^Session date: (\S+)")
_SPEAKER_LINE = re.compile(r"^([^:]{1,40}): (.+)$")


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
        if found := _COGNEE_DATE.match(line):
            when = found.group(1)
            continue
        if found := _SPEAKER_LINE.match(line):
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


_EVENT_DATE = re.compile(r"^Event Date: .*\((\d{4}-\d{2}-\d{2})")
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
        found = _SPEAKER_LINE.match(line.strip())
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


_DEDUP_PAIR = re.compile(r"^\[NEW\] (.*)\n\[EXISTING\] (.*)$", re.MULTILINE)


def offline_hindsight_dedup(request: ChatRequest) -> str:
    """Hindsight's merge-or-keep verdict on a new observation and its nearest existing one:
    merged (into the longer text) when the lexical rule calls them the same fact, else kept."""
    found = _DEDUP_PAIR.search(_user(request))
    new, existing = (found.group(1).strip(), found.group(2).strip()) if found else ("", "")
    if found and lexical_decision(new, existing) == "NOOP":
        merged = max((new, existing), key=len)
        return json.dumps(
            {"action": "merge", "text": merged, "reason": "the same fact (lexical rule)"},
            ensure_ascii=False,
        )
    return json.dumps({"action": "keep", "text": "", "reason": "distinct facts (lexical rule)"})


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
