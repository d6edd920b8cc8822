"""Mem0-style fact memory (study §2; paper §3.1): segmentation, extraction, update phase.

A conversation becomes a user's memory in four steps:

1. **Segmentation**: the turns, session by session in chronological order, are cut into
   segments of at most ``batch_size`` messages and ``max_segment_chars`` characters of
   content. A message longer than the limit is split into parts (recorded, never cut).
2. **Extraction**: one model call per segment turns the people's own messages into atomic,
   self-contained facts (JSON). Each fact keeps its provenance: conversation, session, session
   date, speaker, and the turns it came from.
3. **Update phase** (Mem0's ``add``): each segment's new facts are compared with the most
   similar facts already stored for the same user; one model call decides ADD, UPDATE (with
   the merged text), DELETE or NOOP per new fact. Every decision is recorded.
4. **Index**: the active facts' embeddings go into the user's HNSW index (:mod:`memcost.index`).

Each model stage has an **offline method** (the embedded default, no key): extraction keeps the
person's informative sentences, prefixed with speaker and session date; the update phase is a
lexical rule (near-duplicate: NOOP; same subject with a changed value: UPDATE). They are
classical stand-ins that keep the pipeline honest, not imitations of an LLM.

Per-user outputs are written atomically when the user is finished, the last file being a
``done.json`` marker; a rerun after a crash skips finished users (and the client's cache and
ledger make redone model calls free and recorded once).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from memcost import index as index_mod
from memcost.io import atomic_open, atomic_path, read_json, read_jsonl, write_json
from memcost.llm import ChatRequest, ChatResult, EmbeddingRequest, LLMClient, LLMError
from memcost.llm.embeddings import plan_batches
from memcost.llm.parsing import parse_json_object
from memcost.models import EMBEDDING_MODEL, EXTRACTION_MODEL, is_gpt5_family
from memcost.paths import DatasetPaths
from memcost.prompts import MEMORY_EXTRACT, MEMORY_UPDATE
from memcost.text import STOPWORDS, content_words, jaccard, split_sentences, words
from memcost.tokens import count_tokens_batch

BATCH_SIZE = 10  # §3.1: messages per extraction segment
MAX_SEGMENT_CHARS = 8_000  # §3.1: characters of content per segment at most
UPDATE_TOP_K = 10  # similar stored facts each new fact is compared with
DECISIONS = ("ADD", "UPDATE", "DELETE", "NOOP")
FACT_STATUSES = ("active", "superseded", "deleted")
PERSON_ROLE = "user"  # whose messages facts come from (both LoCoMo speakers are "user")
_CAPTION = re.compile(r"\s*\[shares a photo: (.*?)\]\s*$", re.DOTALL)

FACT_SCHEMA = pa.schema(
    [
        ("fact_id", pa.string()),
        ("conversation_id", pa.string()),
        ("text", pa.string()),
        ("speaker", pa.string()),
        ("session_index", pa.int64()),
        ("session_id", pa.string()),
        ("session_datetime", pa.string()),
        ("position_start", pa.int64()),
        ("position_end", pa.int64()),
        ("source_positions", pa.list_(pa.int64())),
        ("source_dia_ids", pa.list_(pa.string())),
        ("source_has_answer", pa.bool_()),
        ("segment_index", pa.int64()),
        ("status", pa.string()),
        ("superseded_by", pa.string()),
        ("replaces", pa.string()),
        ("created_by", pa.string()),
        ("tokens", pa.int64()),
        ("backend", pa.string()),
        ("prompt_version", pa.string()),
    ]
)
SEGMENT_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("segment_index", pa.int64()),
        ("session_index", pa.int64()),
        ("session_id", pa.string()),
        ("session_datetime", pa.string()),
        ("messages", pa.int64()),
        ("person_messages", pa.int64()),
        ("chars", pa.int64()),
        ("position_start", pa.int64()),
        ("position_end", pa.int64()),
        ("split_parts", pa.int64()),
        ("status", pa.string()),
        ("candidates", pa.int64()),
        ("error", pa.string()),
    ]
)
SPLIT_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("position", pa.int64()),
        ("chars", pa.int64()),
        ("parts", pa.int64()),
    ]
)


# --- 1. Segmentation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One message (or one part of a split message) as a segment shows it to the extractor."""

    number: int  # 1-based within the segment: what the prompt shows and the model cites
    position: int  # the turn's position in the conversation
    speaker: str
    role: str
    text: str  # the content (with a shared photo's caption), or one part of it
    dia_id: str | None = None
    has_answer: bool | None = None
    part: int = 0  # 0-based part of a split message
    parts: int = 1

    @property
    def is_person(self) -> bool:
        return self.role == PERSON_ROLE


@dataclass(frozen=True)
class Segment:
    """Consecutive messages of one session: the unit of one extraction call."""

    conversation_id: str
    index: int  # 0-based within the conversation, chronological
    session_index: int
    session_id: str | None
    session_datetime: str | None  # ISO 8601, the dataset's own session date (never "today")
    messages: tuple[Message, ...]
    people: tuple[str, ...]  # the conversation's person speakers, for the prompt

    @property
    def chars(self) -> int:
        return sum(len(m.text) for m in self.messages)

    @property
    def person_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.is_person)


@dataclass(frozen=True)
class SplitMessage:
    """A message longer than a segment may hold, split into ``parts`` (nothing dropped)."""

    conversation_id: str
    position: int
    chars: int
    parts: int


def split_text(text: str, max_chars: int) -> list[str]:
    """Parts of at most ``max_chars`` characters whose concatenation is ``text`` exactly.

    Cuts after a sentence end or a line break when one is in the second half of the window,
    else at the last space there, else hard at ``max_chars``.
    """
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    parts: list[str] = []
    rest = text
    while len(rest) > max_chars:
        window = rest[:max_chars]
        floor = max_chars // 2
        cut = max(
            (m.end() for m in re.finditer(r"[.!?]\s+|\n", window) if m.end() > floor), default=0
        )
        if not cut:
            space = window.rfind(" ")
            cut = space + 1 if space >= floor else max_chars
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)
    return parts


def message_content(text: str, caption: Any) -> str:
    """A turn's text with its shared photo described, as the long-context prompt shows it."""
    if isinstance(caption, str) and caption:
        return f"{text} [shares a photo: {caption}]"
    return text


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _bool_or_none(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return bool(value)


def segment_conversation(
    turns: pd.DataFrame,
    *,
    batch_size: int = BATCH_SIZE,
    max_chars: int = MAX_SEGMENT_CHARS,
) -> tuple[list[Segment], list[SplitMessage]]:
    """Cut one conversation (rows of ``conversations.parquet``) into extraction segments.

    Segments never span two sessions (each session has its own date, which the extractor needs
    to resolve "yesterday"). System messages (PersonaMem's persona preamble) are left out:
    they describe the persona to a model, they are not the person speaking.
    """
    if batch_size < 1 or max_chars < 1:
        raise ValueError("batch_size and max_chars must be positive")
    if turns.empty:
        return [], []
    ordered = turns.sort_values("position", kind="stable")
    conversation_id = str(ordered["conversation_id"].iloc[0])
    people = tuple(
        dict.fromkeys(
            str(s) for s, r in zip(ordered["speaker"], ordered["role"], strict=True)
            if r == PERSON_ROLE
        )
    )
    segments: list[Segment] = []
    splits: list[SplitMessage] = []
    captions = ordered["image_caption"] if "image_caption" in ordered else [None] * len(ordered)
    flags = ordered["has_answer"] if "has_answer" in ordered else [None] * len(ordered)
    dia_ids = ordered["dia_id"] if "dia_id" in ordered else [None] * len(ordered)
    rows = zip(
        ordered["session_index"].tolist(),
        ordered["session_id"].tolist(),
        ordered["session_datetime"].tolist(),
        ordered["position"].tolist(),
        ordered["speaker"].tolist(),
        ordered["role"].tolist(),
        ordered["text"].tolist(),
        list(dia_ids),
        list(flags),
        list(captions),
        strict=True,
    )
    current: list[Message] = []
    chars = 0
    key: tuple[Any, ...] | None = None

    def close() -> None:
        nonlocal current, chars
        if current and key is not None:
            segments.append(
                Segment(conversation_id, len(segments), key[0], key[1], key[2], tuple(current),
                        people)
            )
        current, chars = [], 0

    for session, session_id, when, position, speaker, role, text, dia, flag, caption in rows:
        if role == "system":
            continue
        content = message_content(str(text), caption)
        if not content.strip():
            continue
        session_key = (int(session), _str_or_none(session_id), _str_or_none(when))
        if session_key != key:
            close()
            key = session_key
        pieces = split_text(content, max_chars)
        if len(pieces) > 1:
            splits.append(SplitMessage(conversation_id, int(position), len(content), len(pieces)))
        for part, piece in enumerate(pieces):
            if current and (len(current) >= batch_size or chars + len(piece) > max_chars):
                close()
            current.append(
                Message(len(current) + 1, int(position), str(speaker), str(role), piece,
                        _str_or_none(dia), _bool_or_none(flag), part, len(pieces))
            )
            chars += len(piece)
    close()
    return segments, splits


# --- 2. Extraction ------------------------------------------------------------------------------


def person_name(speaker: str) -> str:
    """How facts name a speaker: LoCoMo's names as they are, a role as "the user"."""
    return "the user" if speaker.strip().lower() in ("user", "the user") else speaker


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def long_date(iso: str | None) -> str:
    """``Monday 8 May 2023, 13:56`` for the prompts (weekday included: questions use it)."""
    if not iso:
        return "unknown (this conversation has no dates)"
    moment = datetime.fromisoformat(iso)
    return f"{moment:%A} {moment.day} {moment:%B %Y, %H:%M}"


def day_text(iso: str | None) -> str:
    """``8 May 2023``: the form the benchmarks' gold answers use."""
    if not iso:
        return ""
    moment = datetime.fromisoformat(iso)
    return f"{moment.day} {moment:%B %Y}"


def describe_people(people: Sequence[str]) -> str:
    names = [person_name(p) for p in people]
    if not names:
        return "nobody (there are no messages from a person here)"
    if names == ["the user"]:
        return (
            'the user (call them "the user"); the assistant\'s messages are context only'
        )
    listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return f"{listed}, each a person: record facts about each of them, by name"


def render_segment(segment: Segment) -> str:
    """The numbered message lines of the extraction prompt."""
    lines = []
    for m in segment.messages:
        who = _capitalise(person_name(m.speaker)) if m.is_person else _capitalise(m.speaker)
        part = f" (part {m.part + 1} of {m.parts})" if m.parts > 1 else ""
        lines.append(f"[{m.number}] {who}{part}: {m.text}")
    return "\n".join(lines)


def generation_params(model: str, reasoning_effort: str) -> dict[str, Any]:
    """GPT-5 models take a reasoning effort and no temperature; others get temperature 0."""
    params: dict[str, Any] = {}
    if reasoning_effort:
        params["reasoning_effort"] = reasoning_effort
    if not is_gpt5_family(model):
        params["temperature"] = 0.0
    return params


def extraction_request(
    segment: Segment,
    *,
    dataset: str,
    model: str = EXTRACTION_MODEL,
    reasoning_effort: str = "low",
) -> ChatRequest:
    """The extraction call for one segment (``payload``: the segment, for the offline method)."""
    messages = MEMORY_EXTRACT.messages(
        session_date=long_date(segment.session_datetime),
        people=describe_people(segment.people),
        messages=render_segment(segment),
    )
    return ChatRequest(
        model=model,
        messages=messages,
        stage="extract",
        prompt_version=MEMORY_EXTRACT.id,
        json_mode=True,
        payload=segment,
        tags={
            "dataset": dataset,
            "conversation_id": segment.conversation_id,
            "segment": segment.index,
        },
        **generation_params(model, reasoning_effort),
    )


# Offline extraction: which sentences count as facts about the person.
_FIRST_PERSON = re.compile(
    r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours)\b",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(r"\b(my|mine|our|ours)\b", re.IGNORECASE)
_FILLER_START = re.compile(
    r"^\W*(hi|hey|hello|thanks|thank you|talk soon|take care|see you|bye|good ?night|"
    r"congrat\w*|no way|wow|oh|ouch|haha|lol|sounds|of course|same here|me too|sure|cool|"
    r"nice|great|anyway|guess what|ok|okay|yes|no|yeah)\b",
    re.IGNORECASE,
)
_PROPER_NOUN = re.compile(r"(?<=[a-z,;:] )[A-Z][a-zA-Z'&-]+")
_DIGIT = re.compile(r"\d")


def informative_sentence(sentence: str) -> bool:
    """The offline extractor's test: does this sentence say something about its speaker?

    Dropped: very short sentences (fewer than three content words), questions unless they
    mention something of the speaker's ("my", "our": "a vet for my beagle?"), and greetings or
    reactions that do not mention the speaker. Kept: what remains if it mentions the
    speaker ("I", "my", "we"), a number, a name, or is long enough to carry a fact on its own.
    """
    content = content_words(sentence)
    if len(content) < 3:
        return False
    first_person = bool(_FIRST_PERSON.search(sentence))
    if sentence.rstrip().endswith("?") and not _POSSESSIVE.search(sentence):
        return False
    if _FILLER_START.match(sentence) and not first_person and len(content) < 5:
        return False
    return (
        first_person
        or bool(_DIGIT.search(sentence))
        or bool(_PROPER_NOUN.search(sentence))
        or len(content) >= 6
    )


def offline_fact_text(sentence: str, speaker: str, when: str | None, verb: str = "said") -> str:
    """``On 8 May 2023, Maya said: <sentence>`` (no date: ``Maya said: ...``)."""
    name = person_name(speaker)
    day = day_text(when)
    return f"On {day}, {name} {verb}: {sentence}" if day else f"{_capitalise(name)} {verb}: {sentence}"


def offline_extract(request: ChatRequest) -> str:
    """Offline extraction: the person's informative sentences, prefixed with speaker and
    session date, as the JSON the extraction prompt asks for."""
    segment: Segment = request.payload
    facts = []
    for m in segment.person_messages:
        text, caption = m.text, None
        found = _CAPTION.search(text)
        if found:
            text, caption = text[: found.start()], found.group(1).strip()
        for line in text.splitlines():
            for sentence in split_sentences(line):
                if informative_sentence(sentence):
                    facts.append(
                        {
                            "text": offline_fact_text(sentence, m.speaker,
                                                      segment.session_datetime),
                            "speaker": m.speaker,
                            "turns": [m.number],
                        }
                    )
        if caption:
            facts.append(
                {
                    "text": offline_fact_text(caption, m.speaker, segment.session_datetime,
                                              verb="shared a photo"),
                    "speaker": m.speaker,
                    "turns": [m.number],
                }
            )
    return json.dumps({"facts": facts}, ensure_ascii=False)


def parse_extraction(text: str) -> list[dict[str, Any]]:
    """The facts of an extraction reply: ``[{"text", "speaker", "turns"}]``.

    Raises ``ValueError`` (the client then re-asks) when the reply is not a JSON object with a
    ``facts`` list. Items that are bare strings are accepted as facts without provenance;
    items without text are skipped.
    """
    obj = parse_json_object(text)
    items = obj.get("facts")
    if not isinstance(items, list):
        raise ValueError('the reply has no "facts" list')
    facts = []
    for item in items:
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            continue
        fact_text = item.get("text") or item.get("fact")
        if not isinstance(fact_text, str) or not fact_text.strip():
            continue
        turns = item.get("turns") or []
        if not isinstance(turns, list):
            turns = [turns]
        numbers = []
        for t in turns:
            try:
                numbers.append(int(t))
            except (TypeError, ValueError):
                continue
        speaker = item.get("speaker")
        facts.append(
            {
                "text": " ".join(fact_text.split()),
                "speaker": speaker if isinstance(speaker, str) else None,
                "turns": numbers,
            }
        )
    return facts


@dataclass
class Candidate:
    """A fact just extracted, before the update phase, with its provenance."""

    conversation_id: str
    segment_index: int
    candidate_index: int  # 0-based within the segment
    text: str
    speaker: str
    session_index: int
    session_id: str | None
    session_datetime: str | None
    positions: tuple[int, ...]
    dia_ids: tuple[str, ...]
    has_answer: bool | None
    backend: str
    prompt_version: str
    vector: np.ndarray | None = field(default=None, repr=False)


def _match_speaker(name: str | None, people: Sequence[str]) -> str | None:
    if not name:
        return None
    wanted = name.strip().lower()
    for person in people:
        if wanted in (person.lower(), person_name(person).lower()):
            return person
    return None


def candidates_from(
    segment: Segment, facts: Sequence[Mapping[str, Any]], *, backend: str, prompt_version: str
) -> list[Candidate]:
    """Attach provenance to extracted facts.

    The turns a fact cites are kept if they are the person's messages in this segment; a fact
    citing none is attributed to its speaker's messages in the segment (or all the people's).
    """
    persons = segment.person_messages
    by_number = {m.number: m for m in persons}
    out: list[Candidate] = []
    for item in facts:
        cited = [by_number[n] for n in item.get("turns", []) if n in by_number]
        speaker = _match_speaker(item.get("speaker"), segment.people)
        if speaker is None:
            speaker = cited[0].speaker if cited else (
                segment.people[0] if len(segment.people) == 1 else None)
        if not cited:
            cited = [m for m in persons if speaker is None or m.speaker == speaker] or list(persons)
        if speaker is None:
            speaker = cited[0].speaker if cited else (segment.people or ("user",))[0]
        positions = tuple(sorted({m.position for m in cited}))
        dia_ids = tuple(dict.fromkeys(m.dia_id for m in cited if m.dia_id))
        flags = [m.has_answer for m in cited if m.has_answer is not None]
        out.append(
            Candidate(
                conversation_id=segment.conversation_id,
                segment_index=segment.index,
                candidate_index=len(out),
                text=str(item["text"]),
                speaker=speaker,
                session_index=segment.session_index,
                session_id=segment.session_id,
                session_datetime=segment.session_datetime,
                positions=positions,
                dia_ids=dia_ids,
                has_answer=any(flags) if flags else None,
                backend=backend,
                prompt_version=prompt_version,
            )
        )
    return out


# --- Embeddings for many users at once ----------------------------------------------------------


def embed_groups(
    client: LLMClient,
    groups: Sequence[tuple[Sequence[str], Mapping[str, Any]]],
    *,
    model: str = EMBEDDING_MODEL,
    desc: str = "embed",
    progress: bool | None = None,
) -> list[np.ndarray]:
    """Embed several groups of texts in one parallel batch, each group with its own ledger
    tags (one user's facts; one question). Returns one ``(len(texts), d)`` array per group,
    rows L2-normalised; texts without content get zero rows (the API rejects them)."""
    requests: list[EmbeddingRequest] = []
    owners: list[tuple[int, list[int]]] = []
    for g, (texts, tags) in enumerate(groups):
        keep = [i for i, t in enumerate(texts) if str(t).strip()]
        if not keep:
            continue
        batches, fitted, _ = plan_batches([str(texts[i]) for i in keep])
        for batch in batches:
            requests.append(
                EmbeddingRequest(model, tuple(fitted[j] for j in batch), tags=dict(tags))
            )
            owners.append((g, [keep[j] for j in batch]))
    results = client.embed_many(requests, desc=desc, progress=progress) if requests else []
    failed = [r for r in results if r.error]
    if failed:
        raise LLMError(
            f"{len(failed)} of {len(results)} embedding calls failed ({failed[0].error}); rerun "
            "to retry them (completed calls come back from the cache)"
        )
    dims = results[0].vectors.shape[1] if results else client.embed([""], model=model).shape[1]
    out = [np.zeros((len(texts), dims), dtype=np.float32) for texts, _ in groups]
    for (g, rows), result in zip(owners, results, strict=True):
        out[g][rows] = result.vectors
    return out


# --- 3. Update phase ----------------------------------------------------------------------------


class UserMemory:
    """One user's facts as the update phase changes them, with their vectors.

    Facts are never removed: an updated fact becomes ``superseded`` (pointing to its
    successor), a deleted one ``deleted``; only ``active`` facts go into the index.
    """

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
        """For each row of ``vectors``: up to ``k`` active facts, most similar first (cosine)."""
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
        """The active fact that ``fact_id`` became (following updates), or ``None``."""
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
            candidate, candidate.text, vector,
            positions=candidate.positions, dia_ids=candidate.dia_ids,
            has_answer=candidate.has_answer, created_by="ADD", replaces=None,
            backend=candidate.backend, prompt_version=candidate.prompt_version,
        )

    def supersede(
        self, target: str, candidate: Candidate, text: str, vector: np.ndarray,
        *, backend: str, prompt_version: str,
    ) -> str:
        """UPDATE: ``target`` is replaced by a new fact with ``text``. The new fact's sources
        are the candidate's, plus the target's when the text merges both."""
        old = self._by_id[target]
        merged = text.strip() != candidate.text.strip()
        positions = list(candidate.positions) + (old["source_positions"] if merged else [])
        dia_ids = list(candidate.dia_ids) + (old["source_dia_ids"] if merged else [])
        flags = [f for f in (candidate.has_answer, old["source_has_answer"] if merged else None)
                 if f is not None]
        new_id = self._new(
            candidate, text, vector, positions=positions, dia_ids=dia_ids,
            has_answer=any(flags) if flags else None, created_by="UPDATE", replaces=target,
            backend=backend, prompt_version=prompt_version,
        )
        old["status"] = "superseded"
        old["superseded_by"] = new_id
        return new_id

    def delete(self, target: str) -> None:
        self._by_id[target]["status"] = "deleted"

    def arrow(self) -> pa.Table:
        """Every fact ever written, with its token count (schema in docs/architecture.md)."""
        rows = [dict(f) for f in self.facts]
        counts = count_tokens_batch([r["text"] for r in rows]) if rows else []
        for row, n in zip(rows, counts, strict=True):
            row["tokens"] = n
        return pa.Table.from_pylist(rows, schema=FACT_SCHEMA)

    def table(self) -> pd.DataFrame:
        return self.arrow().to_pandas()


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
    when = f"conversation of {day_text(first.session_datetime)}" if first.session_datetime else (
        "latest conversation")
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


# Offline update rule: which words say "how much / how often" and which say "what about".
_NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million half dozen once twice thrice""".split()
)
_UNIT = r"(?:day|week|month|year|fortnight)"
_FREQUENCY = re.compile(
    r"\b(?:(?:once|twice|thrice|\w+ times?|\w+ (?:days?|evenings?|mornings?|nights?|hours?|"
    rf"sessions?|class(?:es)?|runs?|lessons?)) (?:a|an|per|each|every) {_UNIT}"
    r"|daily|weekly|monthly|yearly|nightly|every (?:other )?"
    r"(?:day|week|month|year|morning|evening|night|weekend))\b",
    re.IGNORECASE,
)
_TIME_WORDS = frozenset(
    """times time daily weekly monthly yearly nightly every per day days week weeks month months
    year years morning mornings evening evenings night nights weekend weekends hour hours minute
    minutes""".split()
)
_NEGATION = re.compile(
    r"\b(no longer|not any ?more|any ?more|stopped|quit|gave up|no more|cancell?ed|moved out)\b",
    re.IGNORECASE,
)
# Verbs and adverbs too common to tell two facts' subjects apart.
_LIGHT_WORDS = frozenset(
    """go goes going went gone get gets getting got make makes making made take takes taking
    took have has had having start starts started starting like likes liked love loves loved
    want wants wanted need needs needed try tries tried trying use uses used feel feels felt
    think thinks thought know knows knew say says said still now just also much many lot lots
    bit thing things something really finally already always usually up new old last next
    """.split()
)
_MONTHS_DAYS = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
    thursdays fridays saturdays sundays""".split()
)
_OFFLINE_PREFIX = re.compile(r"^(?:On [^,:]{3,40}, )?[^:]{1,60}? (?:said|shared a photo): ")
NEAR_DUPLICATE_JACCARD = 0.7
SUBJECT_OVERLAP = 0.5


def _body(text: str) -> str:
    """A fact without the offline extractor's "On <date>, <name> said:" prefix."""
    return _OFFLINE_PREFIX.sub("", text, count=1)


def _value_kinds(text: str) -> dict[str, frozenset[str]]:
    """A fact's values by kind: frequency phrases ("three times a week"), counts (numbers
    outside those phrases), and whether it says something stopped."""
    frequencies = [" ".join(words(m.group(0))) for m in _FREQUENCY.finditer(text)]
    rest = _FREQUENCY.sub(" ", text)
    kinds = {
        "frequency": frozenset(frequencies),
        "count": frozenset(t for t in words(rest) if t in _NUMBER_WORDS or t.isdigit()),
    }
    if _NEGATION.search(text):
        kinds["negation"] = frozenset({"negated"})
    return {k: v for k, v in kinds.items() if v}


def _subject(text: str, names: Iterable[str]) -> set[str]:
    skip = {w for n in names for w in words(n)} | {"user"}
    return {
        w for w in content_words(text)
        if w.split("'")[0] not in STOPWORDS  # contractions: "i've", "it's"
        and w not in _NUMBER_WORDS and w not in _TIME_WORDS and w not in _LIGHT_WORDS
        and w not in _MONTHS_DAYS and w not in skip and not w.isdigit()
    }


def lexical_decision(
    candidate: str, memory: str, *, names: Iterable[str] = ()
) -> str | None:
    """The offline update rule for one candidate against one stored fact (same speaker).

    ``NOOP`` when the candidate is a near-duplicate (its content words are contained in the
    fact's, or their Jaccard similarity is at least 0.7). ``UPDATE`` when both share a subject
    word (after dropping names, numbers, time words and common verbs) and a value changed:
    both state a frequency ("twice a week") and they differ; or, when at least half of the
    smaller set of subject words is shared, both state a count and they differ, or the
    candidate says something stopped. Otherwise ``None``.
    """
    names = list(names)
    cand_body, mem_body = _body(candidate), _body(memory)
    cand_words, mem_words = set(content_words(cand_body)), set(content_words(mem_body))
    if not cand_words:
        return "NOOP"
    if cand_words <= mem_words or jaccard(cand_words, mem_words) >= NEAR_DUPLICATE_JACCARD:
        return "NOOP"
    cand_subject, mem_subject = _subject(cand_body, names), _subject(mem_body, names)
    shared = cand_subject & mem_subject
    if not shared:
        return None
    cand_values, mem_values = _value_kinds(cand_body), _value_kinds(mem_body)
    if _differs(cand_values, mem_values, "frequency"):
        return "UPDATE"  # a routine's frequency about the same thing: the newer one holds
    close = len(shared) / min(len(cand_subject), len(mem_subject)) >= SUBJECT_OVERLAP
    if close and "negation" in cand_values and "negation" not in mem_values:
        return "UPDATE"
    if close and _differs(cand_values, mem_values, "count"):
        return "UPDATE"
    return None


def _differs(a: Mapping[str, frozenset[str]], b: Mapping[str, frozenset[str]], kind: str) -> bool:
    return kind in a and kind in b and a[kind] != b[kind]


def offline_update(request: ChatRequest) -> str:
    """Offline update phase: :func:`lexical_decision` against each candidate's compared facts
    of the same speaker, most similar first; NOOP wins over UPDATE, else ADD."""
    payload = request.payload
    memories = payload["memories"]
    names = {c["speaker"] for c in payload["candidates"]} | {
        m["speaker"] for m in memories.values()
    }
    decisions = []
    for cand in payload["candidates"]:
        found: dict[str, str] = {}
        for short in cand["compared"]:
            mem = memories[short]
            if mem["speaker"] != cand["speaker"]:
                continue
            verdict = lexical_decision(cand["text"], mem["text"], names=names)
            if verdict and verdict not in found:
                found[verdict] = short
        if "NOOP" in found:
            decision = {"event": "NOOP", "memory_id": found["NOOP"], "text": None}
        elif "UPDATE" in found:
            decision = {"event": "UPDATE", "memory_id": found["UPDATE"], "text": cand["text"]}
        else:
            decision = {"event": "ADD", "memory_id": None, "text": None}
        decisions.append({"fact": cand["number"], **decision})
    return json.dumps({"decisions": decisions}, ensure_ascii=False)


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
    error: str | None = None  # the update call failed
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
    information is kept, never lost to a bad reply); a failed call adds every candidate.
    """
    backend = result.backend if result is not None else None
    version = result.request.prompt_version if result is not None else None
    error = None
    parsed: dict[int, dict[str, Any]] = {}
    if result is not None:
        error = result.error or result.parse_error
        for item in result.parsed or []:
            parsed.setdefault(item["fact"], item)
    out = []
    for i, (cand, ids_i) in enumerate(zip(candidates, compared, strict=True)):
        d = Decision(cand, "ADD", compared=list(ids_i), backend=backend, prompt_version=version,
                     note=note, error=error)
        item = parsed.get(i + 1)
        if result is None:
            pass
        elif error is not None:
            d.note = "update call failed: added"
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
            fact_id = memory.supersede(target, cand, d.text or cand.text, vector,
                                       backend=d.backend or cand.backend,
                                       prompt_version=d.prompt_version or cand.prompt_version)
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
                "error": d.error,
            }
        )
    return records


# --- 4. Building every user's memory, resumably ---------------------------------------------------


@dataclass(frozen=True)
class MemoryConfig:
    """The settings of notebook 01 that change what is built (a finished user built with other
    settings is built again)."""

    dataset: str
    extraction_model: str = EXTRACTION_MODEL
    extraction_reasoning_effort: str = "low"
    embedding_model: str = EMBEDDING_MODEL
    batch_size: int = BATCH_SIZE
    max_segment_chars: int = MAX_SEGMENT_CHARS
    update_phase: bool = True
    update_top_k: int = UPDATE_TOP_K
    hnsw_m: int = index_mod.HNSW_M
    ef_construction: int = index_mod.EF_CONSTRUCTION

    def fingerprint(self, client: LLMClient) -> str:
        material = {
            **asdict(self),
            "backends": {
                m: client.backend_for(m) for m in (self.extraction_model, self.embedding_model)
            },
            "base_url": client.base_url,
            "prompts": [MEMORY_EXTRACT.id, MEMORY_UPDATE.id],
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class UserPlan:
    user: str
    segments: list[Segment]
    splits: list[SplitMessage]


def plan_users(
    conversations: pd.DataFrame,
    users: Sequence[str],
    *,
    batch_size: int = BATCH_SIZE,
    max_chars: int = MAX_SEGMENT_CHARS,
) -> dict[str, UserPlan]:
    """Segments for every user, in ``users`` order (a user without turns has none)."""
    groups = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
    plans = {}
    for user in users:
        turns = groups.get(user)
        segments, splits = (
            segment_conversation(turns, batch_size=batch_size, max_chars=max_chars)
            if turns is not None else ([], [])
        )
        plans[user] = UserPlan(user, segments, splits)
    return plans


def segments_table(plans: Mapping[str, UserPlan]) -> pd.DataFrame:
    """One row per planned segment (before extraction): the segmentation at a glance."""
    rows = []
    for plan in plans.values():
        for seg in plan.segments:
            rows.append(_segment_row(seg, status="planned", candidates=0, error=None))
    return pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA).to_pandas()


def splits_table(plans: Mapping[str, UserPlan]) -> pd.DataFrame:
    rows = [asdict(s) for plan in plans.values() for s in plan.splits]
    return pa.Table.from_pylist(rows, schema=SPLIT_SCHEMA).to_pandas()


def _segment_row(seg: Segment, *, status: str, candidates: int, error: str | None) -> dict:
    return {
        "conversation_id": seg.conversation_id,
        "segment_index": seg.index,
        "session_index": seg.session_index,
        "session_id": seg.session_id,
        "session_datetime": seg.session_datetime,
        "messages": len(seg.messages),
        "person_messages": len(seg.person_messages),
        "chars": seg.chars,
        "position_start": seg.messages[0].position,
        "position_end": seg.messages[-1].position,
        "split_parts": sum(1 for m in seg.messages if m.parts > 1),
        "status": status,
        "candidates": candidates,
        "error": error,
    }


@dataclass
class _UserState:
    plan: UserPlan
    memory: UserMemory
    candidates: dict[int, list[Candidate]] = field(default_factory=dict)
    segment_rows: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BuildReport:
    """What :meth:`MemoryBuilder.run` did (the notebook prints it; metrics come from files)."""

    users: int = 0
    built: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)  # finished by an earlier run: skipped
    extraction_calls: int = 0
    update_calls: int = 0
    failed_segments: int = 0
    candidates: int = 0
    wall_s: float = 0.0


class MemoryBuilder:
    """Builds every user's memory for one dataset into ``<ds>/memory/`` (notebook 01)."""

    def __init__(self, client: LLMClient, ds: DatasetPaths, config: MemoryConfig):
        self.client = client
        self.ds = ds
        self.config = config
        self.fingerprint = config.fingerprint(client)
        self.users_dir = ds.memory / "users"
        self.index_dir = ds.memory / "index"

    def user_dir(self, user: str) -> Path:
        return self.users_dir / index_mod.user_stem(user)

    def is_done(self, user: str) -> bool:
        """Finished by an earlier run with the same settings (marker written last)."""
        marker = self.user_dir(user) / "done.json"
        if not marker.is_file():
            return False
        try:
            done = read_json(marker)
        except ValueError:
            return False
        faiss_path, table_path = index_mod.index_paths(self.index_dir, user)
        return (
            done.get("fingerprint") == self.fingerprint
            and done.get("conversation_id") == user
            and faiss_path.is_file()
            and table_path.is_file()
        )

    def plan(self, conversations: pd.DataFrame, users: Sequence[str]) -> dict[str, UserPlan]:
        return plan_users(
            conversations, users,
            batch_size=self.config.batch_size, max_chars=self.config.max_segment_chars,
        )

    def run(
        self,
        conversations: pd.DataFrame,
        users: Sequence[str],
        *,
        on_user: Callable[[str], None] | None = None,
    ) -> BuildReport:
        """Build the memory of every user in ``users`` not finished yet, then write the
        dataset-wide files. ``on_user`` is called as each user is written."""
        t0 = time.perf_counter()
        cfg = self.config
        plans = self.plan(conversations, users)
        report = BuildReport(users=len(plans))
        report.resumed = [u for u in plans if self.is_done(u)]
        finished = set(report.resumed)
        pending = [u for u in plans if u not in finished]
        states = {u: _UserState(plans[u], UserMemory(u)) for u in pending}

        # Extraction: every segment of every pending user at once (independent calls).
        jobs = [(u, s) for u in pending for s in plans[u].segments if s.person_messages]
        requests = [
            extraction_request(s, dataset=cfg.dataset, model=cfg.extraction_model,
                               reasoning_effort=cfg.extraction_reasoning_effort)
            for _, s in jobs
        ]
        results = self.client.chat_many(
            requests, offline=offline_extract, parse=parse_extraction, desc="extract facts"
        ) if requests else []
        report.extraction_calls = len(requests)
        outcome = {(u, s.index): r for (u, s), r in zip(jobs, results, strict=True)}
        for u in pending:
            state = states[u]
            for seg in plans[u].segments:
                result = outcome.get((u, seg.index))
                if result is None:
                    state.segment_rows.append(
                        _segment_row(seg, status="no_person_messages", candidates=0, error=None))
                    continue
                if not result.ok:
                    report.failed_segments += 1
                    state.segment_rows.append(_segment_row(
                        seg, status="failed", candidates=0,
                        error=result.error or result.parse_error))
                    continue
                cands = candidates_from(seg, result.parsed, backend=result.backend,
                                        prompt_version=result.request.prompt_version)
                state.candidates[seg.index] = cands
                report.candidates += len(cands)
                state.segment_rows.append(
                    _segment_row(seg, status="ok", candidates=len(cands), error=None))

        # Embeddings of every candidate, one group (ledger tags) per user.
        groups = [
            ([c.text for cs in states[u].candidates.values() for c in cs],
             {"dataset": cfg.dataset, "conversation_id": u})
            for u in pending
        ]
        vectors = embed_groups(self.client, groups, model=cfg.embedding_model,
                               desc="embed facts") if pending else []
        dims = None
        for u, matrix in zip(pending, vectors, strict=True):
            dims = matrix.shape[1]
            flat = [c for cs in states[u].candidates.values() for c in cs]
            for cand, row in zip(flat, matrix, strict=True):
                cand.vector = row
        if dims is None:
            dims = self.client.embed([""], model=cfg.embedding_model).shape[1]

        # Update phase: segment by segment in order within a user, users in parallel.
        waves = max((len(plans[u].segments) for u in pending), default=0)
        for u in pending:
            if not plans[u].segments:
                self._finish(states[u], dims, on_user)
                report.built.append(u)
        for w in range(waves):
            calls, direct = [], []
            for u in pending:
                state = states[u]
                cands = state.candidates.get(w) if w < len(plans[u].segments) else None
                if not cands:
                    continue
                matrix = np.stack([c.vector for c in cands])
                similar = state.memory.similar(matrix, cfg.update_top_k)
                compared = [[fid for fid, _ in row] for row in similar]
                if not cfg.update_phase:
                    direct.append((u, cands, compared, "update phase off: added"))
                elif not state.memory.active_ids():
                    direct.append((u, cands, compared, "memory empty: added without a call"))
                else:
                    request = update_request(
                        state.memory, cands, compared, dataset=cfg.dataset,
                        model=cfg.extraction_model,
                        reasoning_effort=cfg.extraction_reasoning_effort)
                    calls.append((u, cands, compared, request))
            results = self.client.chat_many(
                [c[3] for c in calls], offline=offline_update, parse=parse_update,
                desc=f"update phase, segment {w + 1}/{waves}", progress=False,
            ) if calls else []
            report.update_calls += len(calls)
            planned: list[tuple[str, list[Decision]]] = []
            for (u, cands, compared, request), result in zip(calls, results, strict=True):
                planned.append(
                    (u, resolve_decisions(cands, compared, result, request.payload["ids"])))
            for u, cands, compared, note in direct:
                planned.append((u, resolve_decisions(cands, compared, None, {}, note=note)))
            self._apply(states, planned)
            for u in pending:
                if len(plans[u].segments) == w + 1:
                    self._finish(states[u], dims, on_user)
                    report.built.append(u)
        self.write_dataset_files(list(plans), plans)
        report.wall_s = time.perf_counter() - t0
        return report

    def _apply(self, states: Mapping[str, _UserState],
               planned: Sequence[tuple[str, list[Decision]]]) -> None:
        """Embed the merged texts of this wave's UPDATEs (one group per user), then apply."""
        groups, where = [], []
        for u, decisions in planned:
            idx = [i for i, d in enumerate(decisions)
                   if d.event == "UPDATE" and (d.text or "").strip() != d.candidate.text.strip()]
            if idx:
                groups.append(([decisions[i].text for i in idx],
                               {"dataset": self.config.dataset, "conversation_id": u}))
                where.append((u, idx))
        merged = embed_groups(self.client, groups, model=self.config.embedding_model,
                              desc="embed merged facts", progress=False) if groups else []
        vectors_of: dict[str, dict[int, np.ndarray]] = {}
        for (u, idx), matrix in zip(where, merged, strict=True):
            vectors_of[u] = {i: matrix[j] for j, i in enumerate(idx)}
        for u, decisions in planned:
            states[u].updates.extend(
                apply_decisions(states[u].memory, decisions, vectors_of.get(u, {})))

    def _finish(self, state: _UserState, dims: int, on_user: Callable[[str], None] | None) -> None:
        """Write one user's files atomically; ``done.json`` last, so a kill leaves the user
        unfinished (and redone) rather than half written."""
        user = state.plan.user
        folder = self.user_dir(user)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "done.json").unlink(missing_ok=True)
        arrow = state.memory.arrow()
        facts = arrow.to_pandas()
        _write_table(folder / "facts.parquet", arrow)
        _write_table(folder / "segments.parquet",
                     pa.Table.from_pylist(state.segment_rows, schema=SEGMENT_SCHEMA))
        with atomic_open(folder / "updates.jsonl") as handle:
            for record in state.updates:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        active = facts.loc[facts["status"] == "active"].reset_index(drop=True)
        vectors = (np.stack([state.memory.vector(f) for f in active["fact_id"]])
                   if len(active) else np.zeros((0, dims), np.float32))
        index_mod.save_user_index(
            self.index_dir, user, vectors, active, m=self.config.hnsw_m,
            ef_construction=self.config.ef_construction, dims=dims, schema=FACT_SCHEMA,
            extra_meta={"embedding_model": self.config.embedding_model,
                        "fingerprint": self.fingerprint},
        )
        write_json(folder / "done.json", {
            "conversation_id": user,
            "fingerprint": self.fingerprint,
            "facts": len(facts),
            "active_facts": len(active),
            "segments": len(state.plan.segments),
            "failed_segments": sum(r["status"] == "failed" for r in state.segment_rows),
            "finished_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        })
        if on_user is not None:
            on_user(user)

    def write_dataset_files(self, users: Sequence[str], plans: Mapping[str, UserPlan]) -> None:
        """``memory/facts.parquet``, ``updates.jsonl``, ``segments.parquet``, ``splits.parquet``:
        the finished users' files concatenated in ``users`` order (docs/architecture.md)."""
        facts, segments, updates = [], [], []
        for user in users:
            folder = self.user_dir(user)
            if not (folder / "done.json").is_file():
                continue
            facts.append(pq.read_table(folder / "facts.parquet"))
            segments.append(pq.read_table(folder / "segments.parquet"))
            updates.extend(read_jsonl(folder / "updates.jsonl", missing_ok=True))
        memory = self.ds.memory
        _write_table(memory / "facts.parquet",
                     pa.concat_tables(facts) if facts else FACT_SCHEMA.empty_table())
        _write_table(memory / "segments.parquet",
                     pa.concat_tables(segments) if segments else SEGMENT_SCHEMA.empty_table())
        _write_table(memory / "splits.parquet",
                     pa.Table.from_pylist([asdict(s) for p in plans.values() for s in p.splits],
                                          schema=SPLIT_SCHEMA))
        with atomic_open(memory / "updates.jsonl") as handle:
            for record in updates:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _write_table(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


# --- Inputs, reading the memory back, and its statistics ---------------------------------------------------


def read_inputs(ds: DatasetPaths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Notebook 00's ``conversations`` and ``questions``; missing: an error naming notebook 00."""
    missing = [p for p in (ds.conversations, ds.questions) if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{missing[0]}: not found; run notebooks/00_prepare_data.ipynb for dataset "
            f"{ds.name!r} into this run directory first"
        )
    return pd.read_parquet(ds.conversations), pd.read_parquet(ds.questions)


def memory_users(conversations: pd.DataFrame, questions: pd.DataFrame) -> list[str]:
    """Every user whose memory is built: each conversation, plus any conversation a question
    is about that has no turns (its memory is empty, and its questions get "no information")."""
    ids = conversations["conversation_id"].astype(str).tolist()
    ids += questions["conversation_id"].astype(str).tolist()
    return list(dict.fromkeys(ids))


def load_facts(ds: DatasetPaths) -> pd.DataFrame:
    """``memory/facts.parquet``; missing: an error that names notebook 01."""
    path = ds.memory / "facts.parquet"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no memory for dataset {ds.name!r}; run notebooks/01_extract_facts.ipynb "
            "first"
        )
    return pd.read_parquet(path)


def load_updates(ds: DatasetPaths) -> pd.DataFrame:
    records = read_jsonl(ds.memory / "updates.jsonl", missing_ok=True)
    columns = ["conversation_id", "segment_index", "candidate_index", "candidate_text", "speaker",
               "session_datetime", "decision", "target_fact_id", "merged_text", "fact_id",
               "compared_fact_ids", "backend", "prompt_version", "note", "error"]
    return pd.DataFrame.from_records(records, columns=columns)


def user_stats(ds: DatasetPaths, users: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per user: facts written and active, fact tokens, history tokens, compression.

    ``history_tokens`` is the long-context rendering (what a long-context request carries) from
    notebook 00's ``conversation_stats.parquet``; ``compression`` = history tokens / active-fact
    tokens (the paper: ~101,600 → ~2,909, about 35:1).
    """
    facts = load_facts(ds)
    segments = pd.read_parquet(ds.memory / "segments.parquet")
    if users is None:
        users = list(dict.fromkeys(segments["conversation_id"].tolist()
                                   + facts["conversation_id"].tolist()))
    stats_path = ds.data / "conversation_stats.parquet"
    stats = pd.read_parquet(stats_path) if stats_path.is_file() else pd.DataFrame(
        columns=["conversation_id", "n_turns", "history_tokens", "text_tokens"])
    stats = stats.set_index("conversation_id")
    rows = []
    for user in users:
        mine = facts.loc[facts["conversation_id"] == user]
        active = mine.loc[mine["status"] == "active"]
        segs = segments.loc[segments["conversation_id"] == user]
        history = int(stats.loc[user, "history_tokens"]) if user in stats.index else 0
        fact_tokens = int(active["tokens"].sum())
        rows.append({
            "conversation_id": user,
            "turns": int(stats.loc[user, "n_turns"]) if user in stats.index else 0,
            "history_tokens": history,
            "segments": len(segs),
            "failed_segments": int((segs["status"] == "failed").sum()),
            "facts_written": len(mine),
            "active_facts": len(active),
            "superseded": int((mine["status"] == "superseded").sum()),
            "deleted": int((mine["status"] == "deleted").sum()),
            "fact_tokens": fact_tokens,
            "compression": round(history / fact_tokens, 2) if fact_tokens else None,
        })
    return pd.DataFrame(rows)


def decision_counts(updates: pd.DataFrame) -> dict[str, int]:
    """Update-phase decisions by kind, every kind listed (zero when absent)."""
    counts = Counter(updates["decision"].tolist()) if len(updates) else Counter()
    return {d: int(counts.get(d, 0)) for d in DECISIONS}


def memory_metrics(ds: DatasetPaths, stats: pd.DataFrame) -> dict[str, Any]:
    """The numbers notebook 01 records (and a test or the report checks)."""
    updates = load_updates(ds)
    segments = pd.read_parquet(ds.memory / "segments.parquet")
    splits = pd.read_parquet(ds.memory / "splits.parquet")
    active = stats["active_facts"] if len(stats) else pd.Series(dtype="int64")
    history = int(stats["history_tokens"].sum()) if len(stats) else 0
    fact_tokens = int(stats["fact_tokens"].sum()) if len(stats) else 0
    return {
        "users": len(stats),
        "segments": len(segments),
        "segments_failed": int((segments["status"] == "failed").sum()),
        "segments_without_person": int((segments["status"] == "no_person_messages").sum()),
        "split_messages": len(splits),
        "candidates": len(updates),
        "facts_written": int(stats["facts_written"].sum()) if len(stats) else 0,
        "active_facts": int(active.sum()),
        "facts_per_user_mean": round(float(active.mean()), 2) if len(active) else 0.0,
        "facts_per_user_min": int(active.min()) if len(active) else 0,
        "facts_per_user_max": int(active.max()) if len(active) else 0,
        "fact_tokens_per_user_mean": round(fact_tokens / len(stats), 1) if len(stats) else 0.0,
        "history_tokens_per_user_mean": round(history / len(stats), 1) if len(stats) else 0.0,
        "compression_ratio": round(history / fact_tokens, 2) if fact_tokens else None,
        "decisions": decision_counts(updates),
        "update_notes": int(updates["note"].notna().sum()) if len(updates) else 0,
    }


def plot_facts_vs_history(stats: pd.DataFrame, *, dataset: str, backend: str = "") -> Any:
    """Active facts per user against the history's token length (one point per user), with
    the compression ratio of each user as the colour."""
    import matplotlib.pyplot as plt

    from memcost.plots import label_backend

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if len(stats):
        points = ax.scatter(stats["history_tokens"], stats["active_facts"],
                            c=stats["compression"].astype(float), cmap="viridis", s=40,
                            edgecolor="black", linewidth=0.4)
        fig.colorbar(points, ax=ax, label="history tokens per fact token")
    ax.set_xlabel("history tokens (long-context rendering)")
    ax.set_ylabel("active facts")
    ax.set_title(f"Facts per user vs history length ({dataset})")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    label_backend(ax, backend)
    return fig
