"""LoCoMo (``locomo10.json``): one conversation per sample, its dated sessions (numeric order, ISO
8601) and its questions (LoCoMo's own category numbers)."""

from __future__ import annotations

import calendar
import json
import re
import warnings
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.data.benchmark import (
    CONVERSATION_COLUMNS,
    CONVERSATION_SCHEMA,
    QUESTION_COLUMNS,
    QUESTION_SCHEMA,
    BenchmarkData,
    DataWarning,
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

# LoCoMo's own evaluation code numbers the categories this way (paper §3.3). Other papers
# label them differently; the published counts below are the check that the mapping is right.
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi_hop",
    2: "temporal",
    3: "open_domain",
    4: "single_hop",
    5: "adversarial",
}
LOCOMO_CATEGORY_COUNTS: dict[int, int] = {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
LOCOMO_FULL_SAMPLES = 10  # locomo10.json holds ten conversations
# Adversarial questions have no gold answer, only the trap (`adversarial_answer`); the correct
# behaviour is to say the conversation does not tell. LoCoMo's scorer accepts answers containing
# "not mentioned" or "no information available" for them.
LOCOMO_ABSTENTION_ANSWER = "Not mentioned in the conversation"

# --- Dates ---------------------------------------------------------------------------------------

_MONTHS: dict[str, int] = {}
for _number in range(1, 13):
    _MONTHS[calendar.month_name[_number].lower()] = _number
    _MONTHS[calendar.month_abbr[_number].lower()] = _number
_MONTHS["sept"] = 9

_LOCOMO_DATETIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?"  # 1:56 pm
    r"\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?\s*,?\s*(\d{4})\s*$",  # on 8 May, 2023
    re.IGNORECASE,
)


def parse_locomo_datetime(text: str) -> str:
    """``"1:56 pm on 8 May, 2023"`` → ``"2023-05-08T13:56:00"``."""
    match = _LOCOMO_DATETIME.match(text) if isinstance(text, str) else None
    if not match:
        raise DataError(
            f"cannot parse date {text!r}; expected a LoCoMo date like '1:56 pm on 8 May, 2023'"
        )
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise DataError(f"cannot parse date {text!r}: unknown month {month_name!r}")
    hour_12 = int(hour)
    if not 1 <= hour_12 <= 12:
        raise DataError(f"cannot parse date {text!r}: hour {hour_12} is not on a 12-hour clock")
    hour_24 = hour_12 % 12 + (12 if half.lower() == "p" else 0)
    return iso_datetime(int(year), month, int(day), hour_24, int(minute), 0, text)


_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")
_LOCOMO_QA_FIELDS = frozenset({"question", "answer", "evidence", "category", "adversarial_answer"})


def _locomo_category(item: Mapping[str, Any], path: Path, where: str) -> int:
    if "category" not in item:
        raise DataError(f"{path}: {where}: missing field 'category'")
    value = item["category"]
    # Some items in the public file carry the category as a string ("5").
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value not in LOCOMO_CATEGORIES:
        raise DataError(
            f"{path}: {where}: field 'category' should be an integer 1-5, got {short(value)}"
        )
    return value


def _locomo_evidence(value: Any, path: Path, where: str) -> list[str]:
    """Every ``D<n>:<m>`` cited as evidence (the file has lists, ';'-joined strings, and printed
    lists)."""
    if value is None:
        return []
    if isinstance(value, str):
        return _DIA_ID.findall(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [d for v in value for d in _DIA_ID.findall(v)]
    raise DataError(
        f"{path}: {where}: field 'evidence' should be a list of dialogue ids, got {short(value)}"
    )


def load_locomo(source: DataSource | Path) -> BenchmarkData:
    source = as_source(source, "locomo")
    path, files = source.path, []
    obj = parse_json(read_raw(path, files), path, "locomo")
    expect_dataset(obj, "locomo", path)
    turns, questions = Rows(CONVERSATION_COLUMNS), Rows(QUESTION_COLUMNS)
    samples = records(obj, path, "LoCoMo samples", "sample", "sample_id", label="sample")
    for sample, sample_id, where in samples:
        conversation = required(sample, "conversation", dict, path, where)
        qa = required(sample, "qa", list, path, where)
        if _locomo_turns(conversation, sample_id, path, where, turns) == 0:
            raise DataError(f"{path}: {where}: the conversation has no turns")
        for k, item in enumerate(qa):
            _locomo_question(item, k, sample_id, path, f"{where}, qa[{k}]", questions)

    data = BenchmarkData(
        dataset="locomo",
        conversations=frame(turns.columns, CONVERSATION_SCHEMA),
        questions=frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
    )
    data.checks["locomo_category_counts"] = _check_locomo_counts(data.questions, len(obj), data)
    return data


def _locomo_turns(
    conversation: Mapping[str, Any], sample_id: str, path: Path, where: str, rows: Rows
) -> int:
    # Numeric order: session_10 comes after session_9, not after session_1.
    numbers = sorted(int(m.group(1)) for key in conversation if (m := _SESSION_KEY.match(key)))
    position = session_index = 0
    previous: str | None = None
    for number in numbers:
        key = f"session_{number}"
        turns = required(conversation, key, list, path, where)
        if not turns:
            continue  # an empty session adds nothing to the history
        date_key = f"{key}_date_time"
        date_text = required(conversation, date_key, str, path, where)
        try:
            when = parse_locomo_datetime(date_text)
        except DataError as exc:
            raise DataError(f"{path}: {where}, {date_key}: {exc}") from None
        if previous is not None and when < previous:
            warnings.warn(
                f"{path}: {where}: {key} ({when}) is dated before the session before "
                f"it ({previous}); sessions are kept in numeric order",
                DataWarning,
                stacklevel=3,
            )
        previous = when
        for t, turn in enumerate(turns):
            twhere = f"{where}, {key}[{t}]"
            if not isinstance(turn, dict):
                raise DataError(
                    f"{path}: {twhere}: expected a turn object, got {type(turn).__name__}"
                )
            speaker = required(turn, "speaker", str, path, twhere)
            dia_id = required(turn, "dia_id", str, path, twhere)
            twhere = f"{where}, {key}[{t}] (dia_id {dia_id})"
            text = required(turn, "text", str, path, twhere)
            caption = turn.get("blip_caption")
            if caption is not None and not isinstance(caption, str):
                raise DataError(
                    f"{path}: {twhere}: field 'blip_caption' should be a string, "
                    f"got {type(caption).__name__}"
                )
            rows.add(
                conversation_id=sample_id,
                session_index=session_index,
                session_id=key,
                session_datetime=when,
                turn_index=t,
                position=position,
                speaker=speaker,
                role="user",
                text=text,
                dia_id=dia_id,
                has_answer=None,
                image_caption=caption,
            )
            position += 1
        session_index += 1
    return position


def _locomo_question(item: Any, k: int, sample_id: str, path: Path, where: str, rows: Rows) -> None:
    if not isinstance(item, dict):
        raise DataError(f"{path}: {where}: expected a question object, got {type(item).__name__}")
    question = required(item, "question", str, path, where)
    category = _locomo_category(item, path, where)
    if item.get("answer") is None:
        if category != 5:
            raise DataError(f"{path}: {where}: missing field 'answer' (category {category})")
        answer = LOCOMO_ABSTENTION_ANSWER
    else:
        answer = answer_text(required(item, "answer", (str, int, float), path, where))
    adversarial = item.get("adversarial_answer")
    if adversarial is not None:
        adversarial = answer_text(
            required(item, "adversarial_answer", (str, int, float), path, where)
        )
    extra = {key: value for key, value in item.items() if key not in _LOCOMO_QA_FIELDS}
    rows.add(
        question_id=f"{sample_id}-q{k}",
        conversation_id=sample_id,
        question=question,
        answer=answer,
        adversarial_answer=adversarial,
        category=LOCOMO_CATEGORIES[category],
        category_id=category,
        question_date=None,
        evidence=_locomo_evidence(item.get("evidence"), path, where),
        is_abstention=category == 5,
        options=None,
        extra=json.dumps(extra, ensure_ascii=False, sort_keys=True),
    )


def _check_locomo_counts(
    questions: pd.DataFrame, n_samples: int, data: BenchmarkData
) -> dict[str, Any]:
    """On the full file, the published category counts (label mix-ups are the commonest error in
    published LoCoMo numbers)."""
    found = {int(k): int(v) for k, v in Counter(questions["category_id"].tolist()).items()}
    result: dict[str, Any] = {
        "checked": n_samples == LOCOMO_FULL_SAMPLES,
        "expected": LOCOMO_CATEGORY_COUNTS,
        "found": found,
        "ok": None,
    }
    if not result["checked"]:
        return result
    result["ok"] = found == LOCOMO_CATEGORY_COUNTS
    if not result["ok"]:
        lines = [
            f"  {cid} {LOCOMO_CATEGORIES[cid]:<12} expected {LOCOMO_CATEGORY_COUNTS[cid]:>4}, "
            f"found {found.get(cid, 0):>4}"
            for cid in LOCOMO_CATEGORIES
        ]
        message = (
            "\n" + "!" * 78 + "\nLoCoMo CATEGORY COUNTS DIFFER FROM THE PUBLISHED ONES "
            f"({data.source.path}).\nThe file may be a different release, or categories "
            "may be mislabelled; per-category results will not be comparable.\n"
            + "\n".join(lines)
            + "\n"
            + "!" * 78
        )
        warnings.warn(message, DataWarning, stacklevel=3)
        data.notes.append(message.strip("\n!"))
    return result


def locomo_excerpt(path: Path, conversation_id: str, turns: int = 3) -> dict[str, Any]:
    """A sample's speakers, first session and first question as the file holds them."""
    samples = json.loads(Path(path).read_bytes())
    sample = next(s for s in samples if s.get("sample_id") == conversation_id)
    conversation = sample["conversation"]
    first = min(
        (int(m.group(1)) for key in conversation if (m := _SESSION_KEY.match(key))), default=1
    )
    return {
        "sample_id": sample["sample_id"],
        "fields": sorted(sample),
        "speaker_a": conversation.get("speaker_a"),
        "speaker_b": conversation.get("speaker_b"),
        f"session_{first}_date_time": conversation.get(f"session_{first}_date_time"),
        f"session_{first}[:{turns}]": conversation.get(f"session_{first}", [])[:turns],
        "qa[0]": sample["qa"][0] if sample.get("qa") else None,
    }
