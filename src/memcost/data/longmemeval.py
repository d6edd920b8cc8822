"""LongMemEval (S, M, oracle): each question its own user, its haystack of dated sessions (in date
order, ISO 8601) the history."""

from __future__ import annotations

import json
import re
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
    answer_text,
    as_source,
    expect_dataset,
    frame,
    iso_datetime,
    parse_json,
    records,
    required,
    short,
)
from memcost.data.sources import DataSource, read_raw
from memcost.paths import DataError

LONGMEMEVAL_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)

_LONGMEMEVAL_DATETIME = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*"  # 2023/05/20
    r"(?:\(\s*[A-Za-z]{3}\s*\))?\s*"  # (Sat)
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$"  # 02:21
)


def parse_longmemeval_datetime(text: str) -> str:
    """``"2023/05/20 (Sat) 02:21"`` → ``"2023-05-20T02:21:00"`` (the weekday is not checked)."""
    match = _LONGMEMEVAL_DATETIME.match(text) if isinstance(text, str) else None
    if not match:
        raise DataError(
            f"cannot parse date {text!r}; expected a LongMemEval date like '2023/05/20 (Sat) 02:21'"
        )
    year, month, day, hour, minute, second = match.groups()
    return iso_datetime(
        int(year), int(month), int(day), int(hour), int(minute), int(second or 0), text
    )


def load_longmemeval(source: DataSource | Path) -> BenchmarkData:
    """A LongMemEval file, parsed whole: S takes ~1.3 GB, M well over 10 GB."""
    source = as_source(source, "longmemeval")
    path, files = source.path, []
    obj = parse_json(read_raw(path, files), path, "longmemeval")
    expect_dataset(obj, "longmemeval", path)
    turns, questions = Rows(CONVERSATION_COLUMNS), Rows(QUESTION_COLUMNS)
    what = "LongMemEval questions"
    for item, qid, where in records(obj, path, what, "question", "question_id"):
        _longmemeval_item(item, qid, path, where, turns, questions)
    return BenchmarkData(
        dataset="longmemeval",
        conversations=frame(turns.columns, CONVERSATION_SCHEMA),
        questions=frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
    )


# The fields of a LongMemEval question; any other field is kept in ``extra``.
_KNOWN_FIELDS = frozenset(
    {
        "question_id",
        "question_type",
        "question",
        "answer",
        "question_date",
        "haystack_session_ids",
        "haystack_dates",
        "haystack_sessions",
        "answer_session_ids",
    }
)


def _longmemeval_item(
    item: dict[str, Any], qid: str, path: Path, where: str, turns: Rows, questions: Rows
) -> None:
    qtype = required(item, "question_type", str, path, where)
    question = required(item, "question", str, path, where)
    answer = answer_text(required(item, "answer", (str, int, float), path, where))
    date_text = required(item, "question_date", str, path, where)
    try:
        question_date = parse_longmemeval_datetime(date_text)
    except DataError as exc:
        raise DataError(f"{path}: {where}, question_date: {exc}") from None
    ids = required(item, "haystack_session_ids", list, path, where)
    dates = required(item, "haystack_dates", list, path, where)
    sessions = required(item, "haystack_sessions", list, path, where)
    evidence = required(item, "answer_session_ids", list, path, where)
    if not len(ids) == len(dates) == len(sessions):
        raise DataError(
            f"{path}: {where}: haystack_session_ids ({len(ids)}), haystack_dates "
            f"({len(dates)}) and haystack_sessions ({len(sessions)}) must have "
            "the same length"
        )
    _longmemeval_turns(qid, ids, dates, sessions, path, where, turns)
    for e, value in enumerate(evidence):
        if not isinstance(value, str):
            raise DataError(
                f"{path}: {where}: answer_session_ids[{e}] should be a string, "
                f"got {type(value).__name__}"
            )
    extra = {key: value for key, value in item.items() if key not in _KNOWN_FIELDS}
    questions.add(
        question_id=qid,
        conversation_id=qid,
        question=question,
        answer=answer,
        adversarial_answer=None,
        category=qtype,
        category_id=None,
        question_date=question_date,
        evidence=list(evidence),
        is_abstention=qid.endswith("_abs"),
        options=None,
        extra=json.dumps(extra, ensure_ascii=False, sort_keys=True),
    )


def _longmemeval_turns(
    qid: str,
    ids: list[Any],
    dates: list[Any],
    sessions: list[Any],
    path: Path,
    where: str,
    rows: Rows,
) -> None:
    parsed: list[str] = []
    for i, (session_id, date) in enumerate(zip(ids, dates, strict=True)):
        if not isinstance(session_id, str):
            raise DataError(
                f"{path}: {where}: haystack_session_ids[{i}] should be a string, "
                f"got {type(session_id).__name__}"
            )
        if not isinstance(date, str):
            raise DataError(
                f"{path}: {where}: haystack_dates[{i}] should be a string, got "
                f"{type(date).__name__}"
            )
        try:
            parsed.append(parse_longmemeval_datetime(date))
        except DataError as exc:
            raise DataError(
                f"{path}: {where}, haystack_dates[{i}] (session {session_id!r}): {exc}"
            ) from None
    # Stable sort: equal timestamps keep the file's order.
    order = sorted(range(len(parsed)), key=parsed.__getitem__)
    position = session_index = 0
    for i in order:
        session = sessions[i]
        swhere = f"{where}, session {ids[i]!r}"
        if not isinstance(session, list):
            raise DataError(
                f"{path}: {swhere}: expected a list of turns, got {type(session).__name__}"
            )
        if not session:
            continue
        for t, turn in enumerate(session):
            twhere = f"{swhere} turn {t}"
            if not isinstance(turn, dict):
                raise DataError(
                    f"{path}: {twhere}: expected a turn object, got {type(turn).__name__}"
                )
            role = required(turn, "role", str, path, twhere)
            if role not in ROLES:
                raise DataError(
                    f"{path}: {twhere}: unknown role {role!r} (expected {', '.join(sorted(ROLES))})"
                )
            content = required(turn, "content", str, path, twhere)
            flag = turn.get("has_answer", False)
            if not isinstance(flag, bool):
                raise DataError(
                    f"{path}: {twhere}: field 'has_answer' should be true/false, got {short(flag)}"
                )
            rows.add(
                conversation_id=qid,
                session_index=session_index,
                session_id=ids[i],
                session_datetime=parsed[i],
                turn_index=t,
                position=position,
                speaker=role,
                role=role,
                text=content,
                dia_id=None,
                has_answer=flag,
                image_caption=None,
            )
            position += 1
        session_index += 1


def longmemeval_excerpt(path: Path, conversation_id: str, turns: int = 3) -> dict[str, Any]:
    """A question, its date and its haystack's first sessions as the file holds them."""
    items = json.loads(Path(path).read_bytes())
    item = next(i for i in items if i.get("question_id") == conversation_id)
    sessions = item.get("haystack_sessions") or [[]]
    return {
        **{
            key: item.get(key)
            for key in (
                "question_id",
                "question_type",
                "question",
                "answer",
                "question_date",
                "answer_session_ids",
            )
        },
        "haystack_session_ids[:2]": item.get("haystack_session_ids", [])[:2],
        "haystack_dates[:2]": item.get("haystack_dates", [])[:2],
        f"haystack_sessions[0][:{turns}]": sessions[0][:turns],
    }
