"""Date formats, ids and JSON bytes shared by the three sample builders."""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta
from typing import Any

SEED = 20_230_508  # any integer works; this one is what data/sample/ was written with

# --- Date formats and ids ------------------------------------------------------------------------


def locomo_datetime(moment: datetime) -> str:
    """LoCoMo's date format: ``1:56 pm on 8 May, 2023``."""
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {moment:%B}, {moment.year}"


def longmemeval_datetime(moment: datetime) -> str:
    """LongMemEval's date format: ``2023/05/20 (Sat) 02:21``."""
    return f"{moment:%Y/%m/%d} ({moment:%a}) {moment:%H:%M}"


def day_text(day: date) -> str:
    """``7 May 2023``: how LoCoMo's gold answers write dates."""
    return f"{day.day} {day:%B} {day.year}"


def previous_weekday(day: date, weekday: int) -> date:
    """The last ``weekday`` (Monday = 0) strictly before ``day``."""
    delta = (day.weekday() - weekday) % 7 or 7
    return day - timedelta(days=delta)


def next_weekday(day: date, weekday: int) -> date:
    """The first ``weekday`` (Monday = 0) strictly after ``day``."""
    delta = (weekday - day.weekday()) % 7 or 7
    return day + timedelta(days=delta)


def hex_id(rng: random.Random, n: int = 8) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
