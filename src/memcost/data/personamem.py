"""PersonaMem's 32k split (``questions_32k.csv`` + ``shared_contexts_32k.jsonl``): the paper's
"PersonaMem v2" rows.

The paper's Tables 1-2 give its "PersonaMem v2" 222 conversations and 589 questions. Those are
the counts of the original PersonaMem benchmark's 32k split (Hugging Face
``bowen-upenn/PersonaMem``), not of the PersonaMem-v2 release (:mod:`memcost.data.personamem_v2`,
kept as an extension): 589 question rows over 37 shared contexts, and 222 distinct (shared
context, end index) pairs.

- **A conversation** is one (``shared_context_id``, ``end_index_in_shared_context``) pair: the
  shared context's messages ``[0, end)``. The end index is exclusive, because the benchmark's own
  evaluation (``inference_standalone_openai.py``) passes ``context[:end_index]`` to the model;
  a context is one message longer than the largest end index pointing into it. Its id is
  ``<shared_context_id>@<end index>``.
- **The persona**: a shared context opens with a system message ("Current user persona: ...").
  It describes the user; it is not dialogue. It is kept out of the turns (and so out of Table
  1, memory extraction and the long-context prompt); later system messages, if any, are turns.
- **A question** is one CSV row: the bare ``user_question_or_message``, the correct option's
  text as the gold answer, the four options (correct first, as every multiple-choice question
  here), its ``question_type`` as the category.

Bad input (a missing column, a context id the contexts file lacks, an end index past the
context's end, options that are not four ``(a) ``..``(d) `` strings, a correct answer that is
not one of their letters) stops with one line naming the file, the row and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memcost.data.benchmark import ROLES, BenchmarkData, as_source, parse_csv, read_text, short
from memcost.data.prepared import (
    CONVERSATION_COLUMNS,
    CONVERSATION_SCHEMA,
    QUESTION_COLUMNS,
    QUESTION_SCHEMA,
    Rows,
    frame,
)
from memcost.data.sources import PERSONAMEM_CONTEXTS, DataSource, RawFile
from memcost.paths import DataError

PERSONAMEM_32K_COLUMNS: tuple[str, ...] = (
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
)
# The benchmark's seven question types, in its paper's order (the category ids 1-7 here).
PERSONAMEM_QUESTION_TYPES: tuple[str, ...] = (
    "recall_user_shared_facts",
    "recalling_facts_mentioned_by_the_user",
    "track_full_preference_evolution",
    "recalling_the_reasons_behind_previous_updates",
    "provide_preference_aligned_recommendations",
    "suggest_new_ideas",
    "generalizing_to_new_scenarios",
)
_OPTION = re.compile(r"^\(([a-d])\) ")
_LETTER = re.compile(r"^\(([a-d])\)$")


def load_personamem(source: DataSource | Path) -> BenchmarkData:
    """Read the 32k split's questions CSV and the shared contexts beside it (module docstring)."""
    source = as_source(source, "personamem")
    files: list[RawFile] = []
    rows = _read_questions(source.path, files)
    contexts_path = source.root / PERSONAMEM_CONTEXTS
    contexts = _read_contexts(contexts_path, files)
    turns, questions = Rows(CONVERSATION_COLUMNS), Rows(QUESTION_COLUMNS)
    written: set[str] = set()
    for index, row in enumerate(rows):
        where = f"{source.path}: row {index} (line {index + 2}, question_id {row['question_id']!r})"
        context_id = row["shared_context_id"].strip()
        if context_id not in contexts:
            raise DataError(
                f"{where}: field shared_context_id: {short(context_id)} is not in "
                f"{contexts_path.name}"
            )
        messages = contexts[context_id]
        end = _end_index(row, len(messages), where)
        conversation_id = f"{context_id}@{end}"
        if conversation_id not in written:
            written.add(conversation_id)
            _add_turns(turns, conversation_id, messages[:end])
        options, answer, letter = _options(row, where)
        extra = {
            key: row[key]
            for key in PERSONAMEM_32K_COLUMNS
            if key not in ("user_question_or_message", "all_options", "question_type")
        }
        questions.add(
            question_id=row["question_id"],
            conversation_id=conversation_id,
            question=row["user_question_or_message"],
            answer=answer,
            adversarial_answer=None,
            category=row["question_type"],
            category_id=_category_id(row, where),
            question_date=None,
            evidence=[],
            is_abstention=False,
            options=options,
            extra=json.dumps(
                {**extra, "correct_letter": letter}, ensure_ascii=False, sort_keys=True
            ),
        )
    return BenchmarkData(
        dataset="personamem",
        conversations=frame(turns.columns, CONVERSATION_SCHEMA),
        questions=frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
        checks={
            "shared_contexts": len({c.rpartition("@")[0] for c in written}),
            "conversations": len(written),
            "questions": len(rows),
        },
    )


def _read_questions(path: Path, files: list[RawFile]) -> list[dict[str, str]]:
    header, rows = parse_csv(read_text(path, files), path)
    missing = [c for c in PERSONAMEM_32K_COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{path}: header (line 1): not PersonaMem's questions_32k.csv: missing "
            f"field(s) {', '.join(missing)}"
        )
    for index, row in enumerate(rows):
        if None in row or any(v is None for v in row.values()):
            raise DataError(
                f"{path}: row {index} (line {index + 2}): the row has "
                f"{'more' if None in row else 'fewer'} fields than the header"
            )
    return rows


def _read_contexts(path: Path, files: list[RawFile]) -> dict[str, list[dict[str, Any]]]:
    if not path.is_file():
        raise DataError(
            f"{path}: file not found: the shared contexts belong beside the questions CSV"
        )
    contexts: dict[str, list[dict[str, Any]]] = {}
    for number, line in enumerate(read_text(path, files).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {number}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or len(obj) != 1:
            raise DataError(
                f"{path}: line {number}: expected one {{shared_context_id: [messages]}}}} object"
            )
        ((context_id, messages),) = obj.items()
        if not isinstance(messages, list) or not messages:
            raise DataError(
                f"{path}: line {number} ({short(context_id)}): expected a "
                "non-empty list of messages"
            )
        for t, message in enumerate(messages):
            if (
                not isinstance(message, dict)
                or message.get("role") not in ROLES
                or not isinstance(message.get("content"), str)
            ):
                raise DataError(
                    f"{path}: line {number} ({short(context_id)}), message {t}: "
                    "expected {role: system | user | assistant, content: text}"
                )
        contexts[str(context_id)] = messages
    return contexts


def _end_index(row: dict[str, str], length: int, where: str) -> int:
    value = row["end_index_in_shared_context"].strip()
    try:
        end = int(value)
    except ValueError:
        raise DataError(
            f"{where}: field end_index_in_shared_context: {short(value)} is not a whole number"
        ) from None
    if not 0 < end <= length:
        raise DataError(
            f"{where}: field end_index_in_shared_context: {end} is past the end of "
            f"its shared context ({length} messages)"
            if end > length
            else f"{where}: field end_index_in_shared_context: {end} leaves no message"
        )
    return end


def _options(row: dict[str, str], where: str) -> tuple[list[str], str, str]:
    """``(options with the correct one first, the correct option's text, its letter)``."""
    try:
        listed = json.loads(row["all_options"])
    except json.JSONDecodeError:
        listed = None
    letters = [
        m.group(1) if isinstance(o, str) and (m := _OPTION.match(o)) else None
        for o in (listed if isinstance(listed, list) else [])
    ]
    if not isinstance(listed, list) or letters != list("abcd"):
        raise DataError(
            f"{where}: field all_options: expected a JSON list of four strings "
            f"beginning (a) .. (d) , got {short(row['all_options'])}"
        )
    correct = _LETTER.match(row["correct_answer"].strip())
    if correct is None:
        raise DataError(
            f"{where}: field correct_answer: expected an option letter such as (c), "
            f"got {short(row['correct_answer'])}"
        )
    texts = [o[4:] for o in listed]
    at = "abcd".index(correct.group(1))
    return [texts[at], *texts[:at], *texts[at + 1 :]], texts[at], correct.group(1)


def _category_id(row: dict[str, str], where: str) -> int:
    kind = row["question_type"].strip()
    if kind not in PERSONAMEM_QUESTION_TYPES:
        raise DataError(
            f"{where}: field question_type: {short(kind)} is not one of the "
            f"benchmark's seven ({', '.join(PERSONAMEM_QUESTION_TYPES)})"
        )
    return PERSONAMEM_QUESTION_TYPES.index(kind) + 1


def _add_turns(turns: Rows, conversation_id: str, messages: list[dict[str, Any]]) -> None:
    """The conversation's dialogue: every message but the opening persona message."""
    start = 1 if messages and messages[0]["role"] == "system" else 0
    for position, message in enumerate(messages[start:]):
        turns.add(
            conversation_id=conversation_id,
            session_index=0,
            session_id="context",
            session_datetime=None,
            turn_index=position,
            position=position,
            speaker=message["role"],
            role=message["role"],
            text=message["content"],
            dia_id=None,
            has_answer=None,
            image_caption=None,
        )


def personamem_excerpt(source: DataSource, conversation_id: str, turns: int = 3) -> dict[str, Any]:
    """The first question row of one conversation and its context's first messages, exactly as
    the two files hold them (notebook 00 shows them beside the normalised rows)."""
    context_id, _, end = conversation_id.rpartition("@")
    _, rows = parse_csv(Path(source.path).read_bytes().decode("utf-8-sig"), source.path)
    row = next(
        r
        for r in rows
        if r["shared_context_id"] == context_id and r["end_index_in_shared_context"].strip() == end
    )
    path = source.root / PERSONAMEM_CONTEXTS
    messages: list[Any] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if context_id in line[: len(context_id) + 8]:  # the id is the line's only key
            messages = next(iter(json.loads(line).values()))
            break
    return {
        "conversation (shared context @ end index)": conversation_id,
        **{key: row[key] for key in PERSONAMEM_32K_COLUMNS},
        f"{PERSONAMEM_CONTEXTS}[{context_id}][:{turns}]": messages[:turns],
    }
