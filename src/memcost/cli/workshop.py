"""``python -m memcost workshop``: a class's own copy of the notebooks, under ``runs/workshop/``.

JupyterLab saves outputs and metadata into whatever notebook it has open; in the committed
``notebooks/`` that makes the clone dirty and the repository checks fail after an afternoon's
class. ``make lab`` therefore opens a copy: this command copies each study notebook that the
copy folder does not have yet (a student's edited copy is never overwritten; ``--fresh`` starts
over, moving the old copies aside), and the committed notebooks are never opened for editing.
``runs/`` is ignored by git, so nothing a class does there shows in ``git status``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from memcost.paths import NOTEBOOKS_DIR, RUNS_DIR
from memcost.run.runner import CANONICAL_NOTEBOOKS

WORKSHOP_DIR = RUNS_DIR / "workshop"


def add_command(sub: argparse._SubParsersAction) -> None:
    workshop = sub.add_parser(
        "workshop",
        help="copy the notebooks to runs/workshop/ for a class (the committed ones stay clean)",
    )
    workshop.add_argument(
        "--dir", default=str(WORKSHOP_DIR), help="where the copies go (default: runs/workshop/)"
    )
    workshop.add_argument(
        "--fresh",
        action="store_true",
        help="start over: move the old copies to <dir>/previous-<time>/",
    )


def copy_notebooks(target: Path, *, fresh: bool = False) -> tuple[list[str], list[str]]:
    """Copy the study notebooks into ``target``: ``(copied, kept)`` file names."""
    target.mkdir(parents=True, exist_ok=True)
    if fresh:
        old = [target / n for n in CANONICAL_NOTEBOOKS if (target / n).exists()]
        if old:
            aside = target / f"previous-{time.strftime('%Y%m%d-%H%M%S')}"
            aside.mkdir()
            for path in old:
                path.rename(aside / path.name)
    copied, kept = [], []
    for name in CANONICAL_NOTEBOOKS:
        destination = target / name
        if destination.exists():
            kept.append(name)
            continue
        shutil.copyfile(NOTEBOOKS_DIR / name, destination)
        copied.append(name)
    return copied, kept


def command_workshop(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    copied, kept = copy_notebooks(target, fresh=args.fresh)
    print(
        f"workshop notebooks in {target}: {len(copied)} copied, {len(kept)} kept as the class "
        "left them" + (" (--fresh starts over)" if kept else "")
    )
    return 0
