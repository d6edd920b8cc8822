"""The three benchmarks by name: the one list every stage, preset check and report uses."""

from __future__ import annotations

DATASETS: tuple[str, ...] = ("locomo", "longmemeval", "personamem_v2")  # study §3.3
DISPLAY_NAMES: dict[str, str] = {
    "locomo": "LoCoMo",
    "longmemeval": "LongMemEval",
    "personamem_v2": "PersonaMem v2",
}


class DataError(ValueError):
    """Input that cannot be read as the benchmark it claims to be.

    The message names the file, the record (sample, question or CSV row) and what is wrong.
    """


def check_dataset(name: str) -> str:
    """``name`` if it is a known dataset; otherwise an error listing the valid ones."""
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return name


def display_name(name: str) -> str:
    """``LoCoMo`` for ``locomo``; an unknown name is shown as it is."""
    return DISPLAY_NAMES.get(name, name)
