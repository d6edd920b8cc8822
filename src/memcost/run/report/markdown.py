"""Markdown building blocks of the report: tables, numbers, percentages, dollars, figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# An interval over fewer conversations than this is flagged: questions of one conversation are
# not independent, and a cluster bootstrap over 2 or 3 conversations is not a 95% interval.
FEW_CONVERSATIONS = 10


def fmt(value: Any, *, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return number(value, digits=digits)
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(rows: Sequence[Sequence[Any]], header: Sequence[str], *, digits: int = 4) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(v, digits=digits) for v in row) + " |")
    return "\n".join(lines) + "\n"


def merge_rows(rows: Sequence[Sequence[Any]], column: int) -> list[list[Any]]:
    """Rows that differ only in ``column`` as one row listing its values."""
    merged: list[list[Any]] = []
    for row in rows:
        row = list(row)
        rest = row[:column] + row[column + 1 :]
        match = next((m for m in merged if m[:column] + m[column + 1 :] == rest), None)
        if match is None:
            merged.append(row)
        else:
            match[column] = f"{match[column]}, {row[column]}"
    return merged


def number(value: float, *, digits: int = 4) -> str:
    """The report's one format for a number: thousands separators, one decimal from 10 up, at most
    ``digits`` significant digits below (45.5, 0.0435, 1,234)."""
    if math.isnan(value):
        return "—"
    if value.is_integer():
        return f"{int(value):,}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    text = f"{value:.{max(digits, 1)}g}"
    return text if "e" not in text else f"{value:.{digits}f}".rstrip("0").rstrip(".")


def pct(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * float(value):.1f}"


def usd(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    value = float(value)
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def figure(lines: list[str], path: Path, root: Path, caption: str) -> None:
    if path.is_file():
        lines += [f"![{caption}]({path.relative_to(root).as_posix()})", ""]


def png(stem: Path) -> Path:
    return stem.with_name(stem.name + ".png")
