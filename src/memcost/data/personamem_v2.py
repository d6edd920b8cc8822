"""The PersonaMem-v2 release (``benchmark/text/benchmark.csv`` plus one chat-history JSON per
user): an extension here. The paper's "PersonaMem v2" rows are PersonaMem's 32k split
(:mod:`memcost.data.personamem`), whose counts they match.

Each CSV row is one multiple-choice query (one correct answer, three incorrect ones) and links
to the user's 32k chat history. A history file is one conversation (its stem is the id) held as
one session: it has no sessions and no timestamps.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

from memcost.data.benchmark import (
    ROLES,
    BenchmarkData,
    as_source,
    expect_dataset,
    guess_json_dataset,
    parse_csv,
    parse_json,
    read_text,
    required,
    short,
)
from memcost.data.prepared import (
    CONVERSATION_COLUMNS,
    CONVERSATION_SCHEMA,
    QUESTION_COLUMNS,
    QUESTION_SCHEMA,
    Rows,
    frame,
)
from memcost.data.sources import (
    PERSONAMEM_V2_CSV,
    PERSONAMEM_V2_HISTORY_DIR,
    DataSource,
    RawFile,
    read_raw,
)
from memcost.paths import DISPLAY_NAMES, DataError

PERSONAMEM_V2_REQUIRED_COLUMNS: tuple[str, ...] = (
    "persona_id",
    "chat_history_32k_link",
    "user_query",
    "correct_answer",
    "incorrect_answers",
    "pref_type",
)


def _parse_literal(text: str) -> Any:
    """The CSV holds JSON or Python literals (``{'role': 'user', ...}``); accept both."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _resolve_link(root: Path, link: str) -> Path | None:
    """A chat-history link relative to the dataset root; a link that carries a machine-specific
    prefix before ``data/`` is re-rooted at that ``data/``."""
    relative = Path(link.replace("\\", "/"))
    candidates = [relative if relative.is_absolute() else root / relative]
    if "data" in relative.parts:
        candidates.append(root / Path(*relative.parts[relative.parts.index("data") :]))
    return next((c for c in candidates if c.is_file()), None)


def load_personamem_v2(source: DataSource | Path) -> BenchmarkData:
    """Read PersonaMem v2's benchmark CSV and the 32k chat histories its rows link to.

    One conversation per history file (its stem is the conversation id), one session holding
    the whole flat history (it has no sessions and no timestamps); one question per CSV row.
    """
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
        options = _options(row, source.path, where)
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
    """The CSV's header and rows; a JSON file or a CSV without the needed columns stops here."""
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
    """How an error names a row: index, question id, line in the file, persona."""
    where = f"row {row_index} ({qid}, line {row_index + 2}"
    return where + (f", persona_id {row.get('persona_id')!r})" if row.get("persona_id") else ")")


def _check_row(row: dict, header: list[str], path: Path, where: str) -> None:
    """As many fields as the header, and no required column left empty."""
    if None in row or any(v is None for v in row.values()):
        raise DataError(
            f"{path}: {where}: the row has {'more' if None in row else 'fewer'} "
            f"fields than the header ({len(header)})"
        )
    for column in PERSONAMEM_V2_REQUIRED_COLUMNS:
        if not row[column].strip():
            raise DataError(f"{path}: {where}: column '{column}' is empty")


def _question_text(row: dict, path: Path, where: str) -> str:
    """The query's text: ``user_query`` is a ``{role, content}`` literal (or plain text)."""
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


def _options(row: dict, path: Path, where: str) -> list[str]:
    """The answer options, the correct one first."""
    incorrect = _parse_literal(row["incorrect_answers"])
    if not isinstance(incorrect, list) or not all(isinstance(a, str) for a in incorrect):
        raise DataError(
            f"{path}: {where}: column 'incorrect_answers' should be a list of "
            f"strings, got {short(row['incorrect_answers'])}"
        )
    return [row["correct_answer"], *incorrect]


class _Histories:
    """Chat histories, each read once however many rows link to it; every message becomes one
    turn of a single session (PersonaMem v2 has no sessions and no timestamps)."""

    def __init__(self, root: Path, csv_path: Path, turns: Rows, files: list[RawFile]):
        self.root, self.csv_path, self.turns, self.files = root, csv_path, turns, files
        self.by_link: dict[str, str] = {}
        self.owners: dict[str, str] = {}  # conversation id -> the link that claimed it

    def conversation_id(self, link: str, where: str) -> str:
        """The id of the history ``link`` points to, reading it the first time."""
        if link not in self.by_link:
            self.by_link[link] = self._read(link, where)
        return self.by_link[link]

    def _read(self, link: str, where: str) -> str:
        """Append one history's messages as turns; the id is the history file's stem."""
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
    """The first CSV row that links to one chat history, and that history's first messages,
    exactly as PersonaMem v2's files hold them (notebook 00 shows them beside the normalised
    rows)."""
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
