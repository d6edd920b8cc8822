"""A stage-aware responder for the local OpenAI-compatible server: the whole pipeline, end to end.

:class:`FakeOpenAIServer` answers every chat request with one callable. The one here reads the
request the way a model would, recognises which of the study's prompts it carries (by the
system message, which :mod:`memcost.prompts` fixes per stage) and replies in the format that
stage asks for, built from the request's own text:

- extraction: ``{"facts": [...]}``, a fact per statement (not a question) of the people's
  numbered messages, naming the speaker and citing the message;
- update phase: ``{"decisions": [...]}``, one per new fact, naming only the memory ids listed
  (NOOP for a near-duplicate; for a related memory DELETE when the fact says something stopped,
  else UPDATE with a merged text; otherwise ADD);
- reader and long context: the sentence of the given memories or history that shares the most
  words with the question, or the option letter in multiple-choice prompts;
- judge: ``{"reason": ..., "label": "CORRECT" | "WRONG"}`` by word overlap with the reference;
- graph memory: ``{"entities": [...]}`` (speakers and capitalised names) and
  ``{"relations": [...]}`` (a triple per statement, superseding a listed relation with the same
  source and relation); hierarchical memory's summary: its latest statements within 60 words;
  observational memory: an observation line per statement, the reflector's without repeats;
- a JSON re-ask: the stage's valid reply.

Nothing is tuned to the bundled samples: every rule is word overlap. A seeded share of the
replies of JSON stages is malformed, so the client's re-ask path runs for real, and
:func:`stage_server` also arms one 429 and one 500, so its retry path does. The choice of which
replies break depends only on the seed and the request, so a rerun sees the same replies.

Embeddings: :func:`lexical_embedding` (feature hashing of words) instead of random vectors, so
that retrieval over the fake API finds related facts as a real embedding model would.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from fake_api.openai_server import Action, FakeOpenAIServer, default_responder
from memcost import prompts
from memcost.llm.offline import HashingEmbedder
from memcost.prompts import JSON_REASK
from memcost.text import content_words, split_sentences, words
from memcost_systems import prompts as systems_prompts

EXTRACT, UPDATE, READ, LONG_CONTEXT, JUDGE = "extract", "update", "read", "long_context", "judge"
# The other memory systems' write calls (memcost.memory): graph memory's two, and the summary.
ENTITIES, RELATIONS, SUMMARY = "graph_entities", "graph_relations", "summary"
OBSERVER, REFLECTOR = "observer", "reflector"  # observational memory (both studies)
JSON_STAGES = frozenset({EXTRACT, UPDATE, JUDGE, ENTITIES, RELATIONS})
# System messages identify the stage: every prompt of a stage opens with the same one (they
# have no fields, so formatting them only turns escaped braces into braces, as sending does).
_SYSTEMS: dict[str, str] = {
    prompts.MEMORY_EXTRACT.system.format(): EXTRACT,
    prompts.MEMORY_UPDATE.system.format(): UPDATE,
    prompts.MEMORY_READ.system.format(): READ,
    prompts.LONG_CONTEXT_ANSWER.system.format(): LONG_CONTEXT,
    systems_prompts.MEMORY_GRAPH_ENTITIES.system.format(): ENTITIES,
    systems_prompts.MEMORY_GRAPH_RELATIONS.system.format(): RELATIONS,
    systems_prompts.SERVING_OBSERVER.system.format(): OBSERVER,
    systems_prompts.SERVING_REFLECTOR.system.format(): REFLECTOR,
    **{prompts.get(name).system.format(): JUDGE for name in prompts.JUDGE_PROMPTS},
}
_REASK_OPENING = JSON_REASK.user.split("{", 1)[0]
_MESSAGE_LINE = re.compile(r"^\[(\d+)\] ([^:]+?)(?: \(part \d+ of \d+\))?: (.*)$")
_MEMORY_LINE = re.compile(r"^\[(m\d+)\] (?:\([^)]*\) )?(.*)$")
_FACT_LINE = re.compile(r"^(\d+)\. (.*)$")
_OPTION_LINE = re.compile(r"^\(?([A-H])[.)] (.*)$")
MAX_FACTS_PER_MESSAGE = 2
NO_INFORMATION = "I don't have that information."


def stage_of(body: Mapping[str, Any]) -> str | None:
    """The study stage a chat request belongs to (``None``: not one of ours)."""
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            content = str(message.get("content", ""))
            if content.startswith(_SUMMARY_OPENING):  # its system message has a field
                return SUMMARY
            return _SYSTEMS.get(content)
    return None


_SUMMARY_OPENING = systems_prompts.MEMORY_SUMMARY.system.split("{", 1)[0]
_SPOKEN = re.compile(r"^(?:\[[^\]]*\] )?([^:\[\]]{1,40}): (.+)$")
_STORED = re.compile(r"^(r\d+): (.+?) \| (.+?) \| (.+)$")


def _spoken_lines(user: str) -> list[tuple[str, str]]:
    """``(speaker, text)`` of the ``Name: text`` lines after ``Messages:`` (or the new messages)."""
    part = re.split(r"(?:New messages|Messages):\n", user, maxsplit=1)[-1]
    return [
        (m.group(1), m.group(2)) for line in part.splitlines() if (m := _SPOKEN.match(line.strip()))
    ]


def _statements(user: str) -> list[tuple[str, str]]:
    return [
        (speaker, s)
        for speaker, text in _spoken_lines(user)
        for s in split_sentences(text)
        if not s.rstrip().endswith("?") and len(content_words(s)) >= 3
    ]


def entities_reply(user: str) -> dict[str, Any]:
    """The people speaking and the capitalised names they use, as graph entities."""
    found: dict[str, str] = {}
    for speaker, sentence in _statements(user):
        found.setdefault(speaker, "person")
        for name in re.findall(r"(?<=[a-z,;:] )[A-Z][a-zA-Z'-]+", sentence):
            found.setdefault(name, "other")
    return {"entities": [{"name": n, "type": t} for n, t in found.items()]}


def relations_reply(user: str) -> dict[str, Any]:
    """One triple per statement: speaker, its first two content words, the rest; it supersedes
    the listed stored relation with the same source and relation."""
    stored = {}
    for line in user.split("Stored relations:\n", 1)[-1].split("\n\n", 1)[0].splitlines():
        if m := _STORED.match(line.strip()):
            stored[(m.group(2).lower(), m.group(3))] = m.group(1)
    relations = []
    for speaker, sentence in _statements(user):
        words_ = content_words(sentence)
        relation, destination = " ".join(words_[:2]), " ".join(words_[2:8])
        relations.append(
            {
                "source": speaker,
                "relation": relation,
                "destination": destination,
                "supersedes": stored.get((speaker.lower(), relation)),
            }
        )
    return {"relations": relations}


def observer_reply(user: str) -> str:
    """One ``- Name: statement`` line per statement of the unobserved messages."""
    part = user.split("Messages not observed yet:\n", 1)[-1]
    return "\n".join(f"- {speaker}: {s}" for speaker, s in _statements("Messages:\n" + part))


def reflector_reply(user: str) -> str:
    """The observations without repeats, the latest 30."""
    lines = [ln.strip() for ln in user.splitlines() if ln.strip().startswith("- ")]
    return "\n".join(list(dict.fromkeys(lines))[-30:])


def summary_reply(user: str) -> str:
    """The last statements of the summary and the new messages that fit 60 words."""
    earlier = user.split("Summary so far:\n", 1)[-1].split("\n\nNew messages:", 1)[0]
    lines = [ln for ln in earlier.splitlines() if ln.strip() and ln != "(empty)"]
    lines += [f"{speaker}: {s}" for speaker, s in _statements(user)]
    kept, count = [], 0
    for line in reversed(lines):
        count += len(line.split())
        if kept and count > 60:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def is_reask(body: Mapping[str, Any]) -> bool:
    """Does the request end with the client's JSON re-ask?"""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    return last.get("role") == "user" and str(last.get("content", "")).startswith(_REASK_OPENING)


def _first_user(body: Mapping[str, Any]) -> str:
    """The stage prompt's user message (a re-ask appends others after it)."""
    return next(
        (str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "user"),
        "",
    )


def _terms(text: str) -> set[str]:
    """Content words, a possessive 's dropped ("Jonas's dog" is about Jonas)."""
    return {w.removesuffix("'s") for w in content_words(text)}


def _overlap(a: str, b: str) -> int:
    return len(_terms(a) & _terms(b))


def _jaccard(a: str, b: str) -> float:
    """Word overlap of two facts, leaving out the "<name> said:" that opens them all."""
    sa, sb = _terms(_said(a)), _terms(_said(b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def _said(fact: str) -> str:
    head, sep, rest = fact.partition(" said: ")
    return rest if sep and len(head) < 40 else fact


def best_sentence(question: str, text: str) -> str | None:
    """The sentence of ``text`` sharing the most content words with ``question`` (the earliest
    among ties); ``None`` when none shares a word."""
    best, best_score = None, 0
    for line in text.splitlines():
        for sentence in split_sentences(line):
            score = _overlap(question, sentence)
            if score > best_score:
                best, best_score = sentence, score
    return best


# --- stages ---------------------------------------------------------------------------------------


def _people(user: str) -> set[str] | None:
    """Lower-cased speakers whose messages are facts (``None``: every non-assistant speaker)."""
    line = next((ln for ln in user.splitlines() if ln.startswith("People: ")), "")
    listed = line.removeprefix("People: ")
    if listed.startswith("the user"):
        return {"the user"}
    if ", each a person" in listed:
        names = listed.split(", each a person", 1)[0]
        return {n.strip().lower() for n in re.split(r", | and ", names) if n.strip()}
    return None


def extract_reply(user: str) -> dict[str, Any]:
    """Facts from the people's numbered messages: their informative sentences, each naming
    the speaker and citing its message."""
    people = _people(user)
    facts = []
    for line in user.splitlines():
        found = _MESSAGE_LINE.match(line)
        if not found:
            continue
        number, speaker, text = int(found.group(1)), found.group(2).strip(), found.group(3)
        if speaker.lower() in ("assistant", "system") or (
            people is not None and speaker.lower() not in people
        ):
            continue
        kept = [
            s for s in split_sentences(text) if len(content_words(s)) >= 3 and not s.endswith("?")
        ]
        for sentence in kept[:MAX_FACTS_PER_MESSAGE]:
            facts.append(
                {"text": f"{speaker} said: {sentence}", "speaker": speaker, "turns": [number]}
            )
    return {"facts": facts}


def update_reply(user: str) -> dict[str, Any]:
    """One decision per new fact against the listed memories: NOOP for a near-duplicate,
    UPDATE (merged text) for a related one, DELETE when the new fact negates a related one,
    ADD otherwise."""
    memories: dict[str, str] = {}
    facts: list[tuple[int, str]] = []
    section = ""
    for line in user.splitlines():
        if line.startswith("Stored memories:"):
            section = "memories"
        elif line.startswith("New facts"):
            section = "facts"
        elif section == "memories" and (m := _MEMORY_LINE.match(line)):
            memories[m.group(1)] = m.group(2)
        elif section == "facts" and (f := _FACT_LINE.match(line)):
            facts.append((int(f.group(1)), f.group(2)))
    decisions = []
    for number, text in facts:
        scored = [(_jaccard(text, mem), mid) for mid, mem in memories.items()]
        score, target = max(scored, key=lambda s: s[0], default=(0.0, None))
        negated = bool(re.search(r"\b(no longer|stopped|quit|not any ?more)\b", text, re.I))
        if target is not None and score >= 0.6:
            decision = {"event": "NOOP", "memory_id": target, "text": None}
        elif target is not None and score >= 0.25 and negated:
            decision = {"event": "DELETE", "memory_id": target, "text": None}
        elif target is not None and score >= 0.25:
            merged = f"{text} (before: {_said(memories[target])})"
            decision = {"event": "UPDATE", "memory_id": target, "text": merged}
        else:
            decision = {"event": "ADD", "memory_id": None, "text": None}
        decisions.append({"fact": number, **decision})
    return {"decisions": decisions}


def _question_and_options(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The question (it may span lines) and the lettered options listed after it."""
    question, _, listing = text.split("Question: ", 1)[-1].partition("\nOptions:\n")
    options = [
        (o.group(1), o.group(2)) for line in listing.splitlines() if (o := _OPTION_LINE.match(line))
    ]
    return question.strip(), options


def _choose(options: Sequence[tuple[str, str]], evidence: str) -> tuple[str, str]:
    """The option sharing the most words with the evidence (the first among ties)."""
    return max(options, key=lambda o: _overlap(o[1], evidence))


def read_reply(user: str) -> str:
    """The memory sharing the most words with the question; a letter for multiple choice."""
    memories_part, _, rest = user.partition("\n\n")
    memories = "\n".join(ln.removeprefix("- ") for ln in memories_part.splitlines()[1:])
    question, options = _question_and_options(rest)
    if options:
        return _choose(options, memories)[0]
    return best_sentence(question, memories) or NO_INFORMATION


def long_context_reply(user: str) -> str:
    """The history sentence sharing the most words with the question; ``(B) <option>`` for
    multiple choice."""
    history = user.split("<history>", 1)[-1].split("</history>", 1)[0]
    question, options = _question_and_options(user.split("</history>", 1)[-1])
    if options:
        letter, text = _choose(options, history)
        return f"({letter}) {text}"
    sentence = best_sentence(question, history)
    if sentence is None:
        return "It is not mentioned in the conversations."
    return sentence.split(": ", 1)[-1] if ": " in sentence[:40] else sentence


def judge_reply(user: str) -> dict[str, str]:
    """CORRECT when the response holds at least half the reference's content words."""
    from memcost.prompts import INSTRUCTIONS  # the labels the reference can go by

    before, _, after = user.partition("\nResponse to grade: ")
    labels = {f"\n{i.reference_label}: " for i in INSTRUCTIONS.values()}
    at = max((before.rfind(label), label) for label in labels)
    reference = before[at[0] + len(at[1]) :] if at[0] >= 0 else before
    response = after.split("\n\nGrading rules:", 1)[0]
    wanted = set(content_words(reference)) or set(words(reference))
    got = set(words(response))
    share = len(wanted & got) / len(wanted) if wanted else 0.0
    label = "CORRECT" if share >= 0.5 else "WRONG"
    reason = f"the response holds {share:.0%} of the reference's key words"
    return {"reason": reason, "label": label}


# --- the responder --------------------------------------------------------------------------------


@dataclass
class StageResponder:
    """``responder`` for :class:`FakeOpenAIServer`: answers each stage in its own format.

    ``malformed_every``: about one reply in this many of a JSON stage is malformed (never a
    re-ask's reply, so the re-ask recovers); 0 turns that off. Which ones depends on ``seed``
    and the request alone.
    """

    seed: int = 0
    malformed_every: int = 15

    def breaks(self, body: Mapping[str, Any]) -> bool:
        """Is this request one whose reply is malformed?"""
        if self.malformed_every <= 0 or stage_of(body) not in JSON_STAGES or is_reask(body):
            return False
        material = json.dumps([self.seed, body.get("messages")], sort_keys=True)
        digest = hashlib.sha256(material.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "little") % self.malformed_every == 0

    def __call__(self, body: dict[str, Any]) -> str:
        stage = stage_of(body)
        user = _first_user(body)
        if stage in JSON_STAGES:
            value: Any = {
                EXTRACT: extract_reply,
                UPDATE: update_reply,
                JUDGE: judge_reply,
                ENTITIES: entities_reply,
                RELATIONS: relations_reply,
            }[stage](user)
            text = json.dumps(value, ensure_ascii=False)
            if self.breaks(body):
                # Cut off mid-object, as a model that ran out of tokens answers; no closing
                # bracket survives, so no parser can recover a value from it.
                cut = text[: max(1, len(text) // 2)]
                return "Here is the JSON: " + cut.replace("}", "").replace("]", "")
            return text
        if stage == READ:
            return read_reply(user)
        if stage == LONG_CONTEXT:
            return long_context_reply(user)
        if stage == SUMMARY:
            return summary_reply(user)
        if stage == OBSERVER:
            return observer_reply(user)
        if stage == REFLECTOR:
            return reflector_reply(user)
        if stage is None and (library := library_route(body)) is not None:
            # a memory library's own prompts, in the formats it parses
            return library.offline(SimpleNamespace(payload={"messages": body["messages"]}))
        return default_responder(body)


def library_route(body: Mapping[str, Any]) -> Any:
    """The memory library's step a chat request belongs to (its ``Route``: ``.step`` is e.g.
    ``mem0/update`` or ``cognee/extract_graph``), or ``None`` when it is none of the prompts of
    the libraries the repository runs (mem0's, cognee's, Hindsight's)."""
    if not body.get("messages"):
        return None
    # only once a request may be a library's
    from memcost_systems.cognee_library import route as cognee_route
    from memcost_systems.hindsight_library import route as hindsight_route
    from memcost_systems.mem0_library import route as mem0_route

    for route in (mem0_route, cognee_route, hindsight_route):
        try:
            return route(dict(body))
        except ValueError:
            continue
    return None


_EMBEDDER = HashingEmbedder()


def lexical_embedding(text: str, dims: int) -> np.ndarray:
    """A deterministic embedding in which texts that share words are close (feature hashing)."""
    embedder = _EMBEDDER if dims == _EMBEDDER.dims else HashingEmbedder(dims)
    vector = embedder.embed_one(text)
    if not vector.any():  # a text without words: any fixed unit vector
        vector = np.zeros(dims, np.float32)
        vector[0] = 1.0
    return vector


def arm_transient_faults(server: FakeOpenAIServer) -> None:
    """One 429 on the first extraction request and one 500 on the first long-context request
    (each with ``retry-after-ms: 1``, so the SDK retries at once): the retry path runs inside
    the notebooks without slowing them down."""
    server.on(lambda path, body: stage_of(body) == EXTRACT, Action(status=429, retry_after_ms=1))
    server.on(
        lambda path, body: stage_of(body) == LONG_CONTEXT, Action(status=500, retry_after_ms=1)
    )


def stage_server(
    *,
    latency_s: float = 0.0,
    api_key: str | None = None,
    seed: int = 0,
    malformed_every: int = 15,
    faults: bool = True,
) -> FakeOpenAIServer:
    """A (not yet started) server that answers every stage of the study plausibly."""
    server = FakeOpenAIServer(
        latency_s=latency_s,
        api_key=api_key,
        responder=StageResponder(seed=seed, malformed_every=malformed_every),
        embedder=lexical_embedding,
    )
    if faults:
        arm_transient_faults(server)
    return server
