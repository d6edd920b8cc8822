"""Which notebooks the runner executes: an explicit list, never whatever a glob finds.

A folder of notebooks gathers copies: ``jupyter nbconvert --execute`` leaves
``05_analyse_costs.nbconvert.ipynb``, Jupyter's "Duplicate" leaves ``05_analyse_costs-Copy1.ipynb``,
a student saves ``05_analyse_costs_v2.ipynb``. Each starts with the same number, so picking "the
notebook numbered 05" by sorting would run whichever copy sorts last. The runner runs the files
named in :data:`CANONICAL_NOTEBOOKS` and warns about every other ``NN_*.ipynb`` it sees.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from memcost.paths import NOTEBOOKS_DIR

# The study, in order. A notebook that is not in this list never runs; add a new one by one line.
CANONICAL_NOTEBOOKS = (
    "00_prepare_data.ipynb",
    "01_extract_facts.ipynb",
    "02_answer_from_memory.ipynb",
    "03_answer_long_context.ipynb",
    "04_judge_answers.ipynb",
    "05_analyse_costs.ipynb",
    "06_serving_cost_study.ipynb",  # opt-in: runs only where a preset's `steps` names 06
    "07_costs_today.ipynb",
)

# What a dataset's notebook does not read of the notebooks before it. When notebooks run side by
# side (an offline run), a notebook waits for the earlier ones of its dataset except these:
# long context (03) reads only notebook 00's data, so it answers while the memory is built and
# read (01, 02). A notebook not named here waits for every one before it.
READS_NOTHING_OF: dict[str, frozenset[str]] = {"03": frozenset({"01", "02"})}

NUMBERED = re.compile(r"^(\d\d)_.+\.ipynb$")
# Names that are always copies, whatever folder they are in.
COPY_PATTERNS = (re.compile(r"\.nbconvert\.ipynb$"), re.compile(r"-Copy\d*\.ipynb$"))


def is_copy(name: str) -> bool:
    return any(p.search(name) for p in COPY_PATTERNS)


def discover_notebooks(folder: Path = NOTEBOOKS_DIR) -> dict[str, Path]:
    """The notebooks to run, by two-digit number: ``{"00": .../00_prepare_data.ipynb, ...}``.

    In a folder that holds the study's notebooks, exactly the files of
    :data:`CANONICAL_NOTEBOOKS` that exist. A folder of other notebooks (a test's, a fork's)
    has no list: every ``NN_*.ipynb`` that is not a copy, and two for one number is an error.
    """
    canonical = [folder / name for name in CANONICAL_NOTEBOOKS if (folder / name).is_file()]
    if canonical:
        return {p.name[:2]: p for p in canonical}
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        if is_copy(path.name):
            continue
        step = path.name[:2]
        if step in found:
            raise ValueError(
                f"two notebooks numbered {step} in {folder}: {found[step].name} and {path.name}; "
                "rename or remove one"
            )
        found[step] = path
    return found


def stray_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Numbered notebooks in ``folder`` that the runner does not execute (copies, variants)."""
    chosen = set(discover_notebooks(folder).values())
    return [
        p for p in sorted(folder.glob("*.ipynb"))
        if p not in chosen and (NUMBERED.match(p.name) or is_copy(p.name))
    ]  # fmt: skip


def stray_warnings(folder: Path = NOTEBOOKS_DIR) -> list[str]:
    """One line per stray notebook, saying it is not run and which notebook is."""
    chosen = discover_notebooks(folder)
    lines = []
    for path in stray_notebooks(folder):
        instead = chosen.get(path.name[:2])
        ran = f"; {instead.name} runs instead" if instead else ""
        lines.append(
            f"warning: {path.name} in {folder.name}/ is not a canonical notebook and is "
            f"not run{ran} (delete it or leave it: the runner ignores it)"
        )
    return lines


def notebook_sha256(path: Path) -> str:
    """The sha256 of the notebook file as it was executed (recorded in the manifest)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
