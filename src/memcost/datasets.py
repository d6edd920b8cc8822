"""The three benchmarks by name: the one list every stage, preset check and report uses."""

from __future__ import annotations

# study §3.3: the paper's three, then an extension. The paper's "PersonaMem v2" rows are
# PersonaMem's 32k split (their counts match it); the PersonaMem-v2 release is personamem_v2.
DATASETS: tuple[str, ...] = ("locomo", "longmemeval", "personamem", "personamem_v2")
PAPER_DATASETS: tuple[str, ...] = ("locomo", "longmemeval", "personamem")
# Datasets whose questions come with answer options (multiple choice, the judge's wrong options).
WITH_OPTIONS: tuple[str, ...] = ("personamem", "personamem_v2")
DISPLAY_NAMES: dict[str, str] = {
    "locomo": "LoCoMo",
    "longmemeval": "LongMemEval",
    "personamem": "PersonaMem (32k split)",
    "personamem_v2": "PersonaMem-v2 release",
}
# One line wherever the paper's PersonaMem rows are shown.
PERSONAMEM_NAME_NOTE = (
    'The paper calls this split "PersonaMem v2"; its counts (222 '
    "conversations, 589 questions) match PersonaMem's 32k split."
)


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
