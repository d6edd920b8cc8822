"""The PersonaMem 32k-split sample: two shared contexts, eight questions asked at different
points of them, in ``questions_32k.csv`` and ``shared_contexts_32k.jsonl``'s exact layout.

The invented personas and queries are the PersonaMem v2 sample's (Tomas and Mei). Each shared
context opens with the persona's system message, then filler chats and the persona's own
messages; each question points at the context up to its ``end_index_in_shared_context``
(exclusive, as the benchmark's evaluation slices it), just past the messages it rests on, so
the questions are asked at different points and the early ones do not see what follows.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
from typing import Any

from samplegen.longmemeval import FILLERS
from samplegen.personamem import Persona, _persona_mei, _persona_tomas

QUESTIONS_32K_COLUMNS = [
    "persona_id",
    "question_id",
    "question_type",
    "topic",
    "context_length_in_tokens",
    "context_length_in_letters",
    "distance_to_ref_in_blocks",
    "distance_to_ref_in_tokens",
    "num_irrelevant_tokens",
    "distance_to_ref_proportion_in_context",
    "user_question_or_message",
    "correct_answer",
    "all_options",
    "shared_context_id",
    "end_index_in_shared_context",
]
QUESTION_TYPES = [
    "recall_user_shared_facts",
    "recalling_facts_mentioned_by_the_user",
    "track_full_preference_evolution",
    "recalling_the_reasons_behind_previous_updates",
    "provide_preference_aligned_recommendations",
    "suggest_new_ideas",
    "generalizing_to_new_scenarios",
]


def _context(persona: Persona, filler: list[tuple[str, str]]) -> list[dict[str, str]]:
    system = (
        "Current user persona: "
        + persona.profile["short_persona"]
        + ". "
        + json.dumps(persona.profile, ensure_ascii=False)
    )
    chat = [{"role": "system", "content": system}]
    chat += [{"role": r, "content": c} for r, c in filler]
    chat += [{"role": m.role, "content": m.content} for m in persona.messages]
    chat.append({"role": "user", "content": "Thanks, that's all for today."})
    return chat


def _end_index(persona: Persona, query: dict[str, Any], offset: int) -> int:
    """Just past the last message the query rests on (the context's messages before it)."""
    labelled = [i for i, m in enumerate(persona.messages) if m.label in query["labels"]]
    return offset + max(labelled) + 2  # the labelled message and the assistant's reply


def build_personamem32k(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The questions CSV's rows and the shared contexts, one ``{id: messages}`` per line."""
    from memcost.text import count_tokens

    fillers = [turns for _, turns in FILLERS]
    rows: list[dict[str, Any]] = []
    contexts: list[dict[str, Any]] = []
    kinds = iter(QUESTION_TYPES * 2)
    for persona in (_persona_tomas(), _persona_mei()):
        filler = [pair for turns in rng.sample(fillers, 2) for pair in turns]
        chat = _context(persona, filler)
        context_id = hashlib.sha256(json.dumps(chat).encode()).hexdigest()
        contexts.append({context_id: chat})
        offset = 1 + len(filler)
        for query in persona.queries[:4]:
            end = _end_index(persona, query, offset)
            rows.append(_row(persona, query, next(kinds), chat, context_id, end, rng, count_tokens))
    order = list(range(len(rows)))
    rng.shuffle(order)
    return [rows[i] for i in order], contexts


def _row(
    persona: Persona,
    query: dict[str, Any],
    kind: str,
    chat: list[dict[str, str]],
    context_id: str,
    end: int,
    rng: random.Random,
    count: Any,
) -> dict[str, Any]:
    options = [query["correct"], *query["incorrect"][:3]]
    rng.shuffle(options)
    letters = "abcd"
    correct = letters[options.index(query["correct"])]
    seen = chat[:end]
    tokens = sum(count(m["content"]) for m in seen)
    return {
        "persona_id": persona.persona_id,
        "question_id": hashlib.sha256(f"{context_id}{query['query']}".encode()).hexdigest()[:32],
        "question_type": kind,
        "topic": query["topic_query"],
        "context_length_in_tokens": tokens,
        "context_length_in_letters": sum(len(m["content"]) for m in seen),
        "distance_to_ref_in_blocks": 1,
        "distance_to_ref_in_tokens": count(seen[-1]["content"]),
        "num_irrelevant_tokens": tokens // 3,
        "distance_to_ref_proportion_in_context": "5.00%",
        "user_question_or_message": query["query"],
        "correct_answer": f"({correct})",
        "all_options": json.dumps(
            [f"({letter}) {text}" for letter, text in zip(letters, options, strict=True)],
            ensure_ascii=False,
        ),
        "shared_context_id": context_id,
        "end_index_in_shared_context": end,
    }


def questions_csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    """CRLF line endings, as the published file has them."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=QUESTIONS_32K_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def contexts_jsonl_bytes(contexts: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in contexts).encode("utf-8")
