"""PersonaMem: the 32k split the paper used, and the PersonaMem-v2 release as ``personamem_v2`` (an
extension; docs/architecture.md, "PersonaMem")."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from memcost.data.benchmark import (
    CONVERSATION_COLUMNS,
    CONVERSATION_SCHEMA,
    QUESTION_COLUMNS,
    QUESTION_SCHEMA,
    ROLES,
    BenchmarkData,
    Rows,
    as_source,
    expect_dataset,
    frame,
    guess_json_dataset,
    parse_csv,
    parse_json,
    read_text,
    required,
    short,
)
from memcost.data.sources import (
    PERSONAMEM_CONTEXTS,
    PERSONAMEM_QUESTIONS,
    PERSONAMEM_QUESTIONS_SHA256,
    PERSONAMEM_V2_CSV,
    PERSONAMEM_V2_HISTORY_DIR,
    DataSource,
    RawFile,
    read_raw,
)
from memcost.paths import DISPLAY_NAMES, DataError

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
    """The 32k split's questions CSV and the shared contexts beside it."""
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
        notes=_hash_notes(source, files),
        checks={
            "shared_contexts": len({c.rpartition("@")[0] for c in written}),
            "conversations": len(written),
            "questions": len(rows),
        },
    )


def _hash_notes(source: DataSource, files: list[RawFile]) -> list[str]:
    """One line when the questions file is not the pinned one (public copies differ byte
    for byte)."""
    read = next((f.sha256 for f in files if f.path.endswith(PERSONAMEM_QUESTIONS)), None)
    if source.origin == "sample" or read in (None, PERSONAMEM_QUESTIONS_SHA256):
        return []
    return [
        f"{PERSONAMEM_QUESTIONS}: sha256 {read} is not the pinned "
        f"{PERSONAMEM_QUESTIONS_SHA256} (public copies differ byte for byte); loaded, and this "
        "hash is recorded"
    ]


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
    """``(options with the correct one first, its text, its letter)``."""
    # The published file writes the list as JSON in some rows and as a Python literal (single
    # quotes) in others: both are the same four options.
    listed = _parse_literal(row["all_options"])
    letters = [
        m.group(1) if isinstance(o, str) and (m := _OPTION.match(o)) else None
        for o in (listed if isinstance(listed, list) else [])
    ]
    if not isinstance(listed, list) or letters != list("abcd"):
        raise DataError(
            f"{where}: field all_options: expected a list (JSON or a Python literal) of four "
            f"strings beginning (a) .. (d), got {short(row['all_options'])}"
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
    """The user and assistant messages (the system messages are the persona, not dialogue)."""
    dialogue = [m for m in messages if m["role"] != "system"]
    for position, message in enumerate(dialogue):
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
    """A conversation's first question row and context messages as the files hold them."""
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


PERSONAMEM_V2_REQUIRED_COLUMNS: tuple[str, ...] = (
    "persona_id",
    "chat_history_32k_link",
    "user_query",
    "correct_answer",
    "incorrect_answers",
    "pref_type",
)


def _parse_literal(text: str) -> Any:
    """JSON or Python literals (``{'role': 'user', ...}``)."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _resolve_link(root: Path, link: str) -> Path | None:
    """A chat-history link under the dataset root (a machine-specific prefix before ``data/``
    re-rooted)."""
    relative = Path(link.replace("\\", "/"))
    candidates = [relative if relative.is_absolute() else root / relative]
    if "data" in relative.parts:
        candidates.append(root / Path(*relative.parts[relative.parts.index("data") :]))
    return next((c for c in candidates if c.is_file()), None)


def load_personamem_v2(source: DataSource | Path) -> BenchmarkData:
    """PersonaMem v2's benchmark CSV and the 32k chat histories its rows link to."""
    source = as_source(source, "personamem_v2")
    files: list[RawFile] = []
    header, rows = _read_benchmark_csv(source.path, files)
    turns, questions = Rows(CONVERSATION_COLUMNS), Rows(QUESTION_COLUMNS)
    histories = _Histories(source.root, source.path, turns, files)
    options_count: Counter[int] = Counter()
    for row_index, row in enumerate(rows):
        qid = f"pm-{row_index}"
        where = _row_place(row_index, qid, row)
        _check_row(row, header, source.path, where)
        question = _question_text(row, source.path, where)
        options = _v2_options(row, source.path, where)
        options_count[len(options)] += 1
        conversation_id = histories.conversation_id(row["chat_history_32k_link"].strip(), where)
        extra = {
            k: v
            for k, v in row.items()
            if k not in ("user_query", "correct_answer", "incorrect_answers", "pref_type")
        }
        questions.add(
            question_id=qid,
            conversation_id=conversation_id,
            question=question,
            answer=row["correct_answer"],
            adversarial_answer=None,
            category=row["pref_type"],
            category_id=None,
            question_date=None,
            evidence=[],
            is_abstention=False,
            options=options,
            extra=json.dumps(extra, ensure_ascii=False, sort_keys=True),
        )
    result = BenchmarkData(
        dataset="personamem_v2",
        conversations=frame(turns.columns, CONVERSATION_SCHEMA),
        questions=frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
    )
    odd = {n: c for n, c in options_count.items() if n != 4}
    if odd:
        result.notes.append(f"{source.path}: some rows do not have 4 options (options: rows) {odd}")
    return result


def _read_benchmark_csv(path: Path, files: list[RawFile]) -> tuple[list[str], list[dict]]:
    text = read_text(path, files)
    if text.lstrip().startswith(("[", "{")):
        guess = guess_json_dataset(_parse_literal(text) if len(text) < 50_000_000 else None)
        what = f"a {DISPLAY_NAMES[guess]} JSON file" if guess else "a JSON file"
        raise DataError(
            f"{path}: this looks like {what}, not PersonaMem v2's benchmark CSV "
            f"({PERSONAMEM_V2_CSV})" + (f"; pass dataset='{guess}'" if guess else "")
        )
    header, rows = parse_csv(text, path)
    missing = [c for c in PERSONAMEM_V2_REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{path}: not a PersonaMem v2 benchmark CSV: missing column(s) "
            f"{', '.join(missing)} (found: {', '.join(header[:12]) or 'none'})"
        )
    return header, rows


def _row_place(row_index: int, qid: str, row: dict) -> str:
    where = f"row {row_index} ({qid}, line {row_index + 2}"
    return where + (f", persona_id {row.get('persona_id')!r})" if row.get("persona_id") else ")")


def _check_row(row: dict, header: list[str], path: Path, where: str) -> None:
    if None in row or any(v is None for v in row.values()):
        raise DataError(
            f"{path}: {where}: the row has {'more' if None in row else 'fewer'} "
            f"fields than the header ({len(header)})"
        )
    for column in PERSONAMEM_V2_REQUIRED_COLUMNS:
        if not row[column].strip():
            raise DataError(f"{path}: {where}: column '{column}' is empty")


def _question_text(row: dict, path: Path, where: str) -> str:
    """``user_query``: a ``{role, content}`` literal, or plain text."""
    query = _parse_literal(row["user_query"])
    if isinstance(query, dict):
        content = query.get("content")
        if not isinstance(content, str) or not content.strip():
            raise DataError(
                f"{path}: {where}: column 'user_query' has no text 'content': "
                f"{short(row['user_query'])}"
            )
        return content
    if row["user_query"].lstrip().startswith("{"):
        raise DataError(
            f"{path}: {where}: column 'user_query' is not a {{role, content}} "
            f"literal: {short(row['user_query'])}"
        )
    return row["user_query"]


def _v2_options(row: dict, path: Path, where: str) -> list[str]:
    incorrect = _parse_literal(row["incorrect_answers"])
    if not isinstance(incorrect, list) or not all(isinstance(a, str) for a in incorrect):
        raise DataError(
            f"{path}: {where}: column 'incorrect_answers' should be a list of "
            f"strings, got {short(row['incorrect_answers'])}"
        )
    return [row["correct_answer"], *incorrect]


class _Histories:
    """Chat histories, each read once, every message one turn of a single session."""

    def __init__(self, root: Path, csv_path: Path, turns: Rows, files: list[RawFile]):
        self.root, self.csv_path, self.turns, self.files = root, csv_path, turns, files
        self.by_link: dict[str, str] = {}
        self.owners: dict[str, str] = {}  # conversation id -> the link that claimed it

    def conversation_id(self, link: str, where: str) -> str:
        if link not in self.by_link:
            self.by_link[link] = self._read(link, where)
        return self.by_link[link]

    def _read(self, link: str, where: str) -> str:
        history_path = _resolve_link(self.root, link)
        if history_path is None:
            raise DataError(
                f"{self.csv_path}: {where}: chat history not found: {link!r} "
                f"(relative to {self.root}); the history files belong under "
                f"{self.root / PERSONAMEM_V2_HISTORY_DIR}"
            )
        conversation_id = history_path.stem
        if self.owners.setdefault(conversation_id, link) != link:
            raise DataError(
                f"{self.csv_path}: {where}: two different history links share the "
                f"file name {conversation_id!r} ({self.owners[conversation_id]!r}, "
                f"{link!r})"
            )
        obj = parse_json(read_raw(history_path, self.files), history_path)
        if isinstance(obj, dict) and "chat_history" in obj:
            messages = obj["chat_history"]
        elif isinstance(obj, list) and guess_json_dataset(obj) is None:
            messages = obj
        else:
            expect_dataset(obj, "personamem_v2", history_path)
            raise DataError(
                f"{history_path}: expected a chat history object with a 'chat_history' list"
            )
        if not isinstance(messages, list) or not messages:
            raise DataError(
                f"{history_path}: 'chat_history' should be a non-empty list of messages"
            )
        for t, message in enumerate(messages):
            mwhere = f"chat_history[{t}]"
            if not isinstance(message, dict):
                raise DataError(
                    f"{history_path}: {mwhere}: expected a message object, got "
                    f"{type(message).__name__}"
                )
            role = required(message, "role", str, history_path, mwhere)
            if role not in ROLES:
                raise DataError(
                    f"{history_path}: {mwhere}: unknown role {role!r} "
                    f"(expected {', '.join(sorted(ROLES))})"
                )
            content = required(message, "content", str, history_path, mwhere)
            self.turns.add(
                conversation_id=conversation_id,
                session_index=0,
                session_id="history",
                session_datetime=None,
                turn_index=t,
                position=t,
                speaker=role,
                role=role,
                text=content,
                dia_id=None,
                has_answer=None,
                image_caption=None,
            )
        return conversation_id


def personamem_v2_excerpt(
    source: DataSource, conversation_id: str, turns: int = 3
) -> dict[str, Any]:
    """The first CSV row linking to a history, and its first messages, as the files hold them."""
    text = Path(source.path).read_bytes().decode("utf-8-sig")
    rows = csv.DictReader(io.StringIO(text, newline=""))
    row = next(
        r
        for r in rows
        if Path(r["chat_history_32k_link"].strip().replace("\\", "/")).stem == conversation_id
    )
    link = row["chat_history_32k_link"].strip()
    history = json.loads(_resolve_link(source.root, link).read_bytes())
    messages = history["chat_history"] if isinstance(history, dict) else history
    return {
        **{key: row[key] for key in PERSONAMEM_V2_REQUIRED_COLUMNS},
        f"chat_history[:{turns}]": messages[:turns],
    }
