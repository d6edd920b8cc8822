"""Where everything lives: the repository root and the layout of a run directory.

Every path in the package and the notebooks comes from here, so that a notebook opened in
JupyterLab, a papermill run and a test all agree on where files are.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


def _find_repo_root() -> Path:
    """The directory holding this repository's ``pyproject.toml``.

    ``MEMCOST_ROOT`` wins when set; otherwise walk up from this file (editable install), then from
    the working directory (a notebook started inside the repository).
    """
    if env := os.environ.get("MEMCOST_ROOT"):
        return Path(env).resolve()
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            pyproject = candidate / "pyproject.toml"
            if pyproject.is_file() and 'name = "memcost"' in pyproject.read_text(encoding="utf-8"):
                return candidate
    raise RuntimeError(
        "cannot find the memcost repository root (a directory with memcost's pyproject.toml); "
        "set MEMCOST_ROOT to the repository path"
    )


REPO_ROOT: Path = _find_repo_root()
NOTEBOOKS_DIR: Path = REPO_ROOT / "notebooks"
DATA_DIR: Path = REPO_ROOT / "data"
SAMPLE_DIR: Path = DATA_DIR / "sample"  # bundled samples, in each dataset's native schema
RAW_DIR: Path = DATA_DIR / "raw"  # downloads from the datasets' public homes, never modified
FIGURES_DIR: Path = REPO_ROOT / "figures"  # figures of the paper presets, committed
PARAMS_DIR: Path = REPO_ROOT / "papermill_params"
ASSETS_DIR: Path = Path(__file__).resolve().parent / "assets"
RUNS_DIR: Path = Path(os.environ.get("MEMCOST_RUNS_DIR", REPO_ROOT / "runs"))
CACHE_DIR: Path = Path(os.environ.get("MEMCOST_CACHE_DIR", REPO_ROOT / ".cache"))

DEFAULT_RUN_NAME = "interactive"  # where a notebook run by hand (run_dir = "") writes
_RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def resolve_run_dir(run_dir: str | os.PathLike[str] = "") -> Path:
    """The run directory a notebook parameter points to.

    ``""`` means ``runs/interactive`` (a notebook opened by hand); a bare name means
    ``runs/<name>``; anything with a path separator is used as given.
    """
    text = os.fspath(run_dir)
    if not text:
        return RUNS_DIR / DEFAULT_RUN_NAME
    if os.sep in text or "/" in text:
        return Path(text).expanduser().resolve()
    if not _RUN_NAME_RE.match(text):
        raise ValueError(
            f"invalid run name {text!r}: use letters, digits, '.', '_' or '-' (or give a path)"
        )
    return RUNS_DIR / text


@dataclass(frozen=True)
class DatasetPaths:
    """Layout of one dataset inside a run: ``runs/<run>/<dataset>/``.

    Notebooks 00-04 read and write only here (and the run's ``calls.jsonl``); each file is the
    hand-over between two notebooks, with its schema documented in ``docs/architecture.md``.
    """

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def conversations(self) -> Path:
        return self.data / "conversations.parquet"

    @property
    def questions(self) -> Path:
        return self.data / "questions.parquet"

    @property
    def memory(self) -> Path:
        return self.root / "memory"

    @property
    def answers(self) -> Path:
        return self.root / "answers"

    @property
    def judgments(self) -> Path:
        return self.root / "judgments.jsonl"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    def answers_file(self, system: str) -> Path:
        return self.answers / f"answers_{system}.jsonl"

    def ensure(self) -> DatasetPaths:
        for folder in (self.data, self.memory, self.answers, self.tables, self.figures, self.metrics):
            folder.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class RunPaths:
    """Layout of a run directory ``runs/<run_name>/``.

    ``manifest.json`` and ``calls.jsonl`` (one record per model call, every notebook) sit at the
    top; one subfolder per dataset holds notebooks 00-04's files; ``tables/`` and ``figures/`` at
    the top hold what looks across datasets (notebook 05, the report).
    """

    root: Path

    @classmethod
    def from_param(cls, run_dir: str | os.PathLike[str] = "") -> RunPaths:
        return cls(resolve_run_dir(run_dir))

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def calls(self) -> Path:
        return self.root / "calls.jsonl"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    def dataset(self, name: str) -> DatasetPaths:
        return DatasetPaths(self.root / name)

    def datasets(self) -> list[DatasetPaths]:
        """Dataset folders present in this run (those that notebook 00 has written)."""
        if not self.root.is_dir():
            return []
        return [
            DatasetPaths(p)
            for p in sorted(self.root.iterdir())
            if p.is_dir() and (p / "data" / "questions.parquet").is_file()
        ]

    def ensure(self) -> RunPaths:
        for folder in (self.root, self.tables, self.figures, self.notebooks, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        return self
