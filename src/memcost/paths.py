"""Where everything lives: the benchmarks by name, the repository root and the layout of a run
directory; every path of the package and the notebooks comes from here."""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

# paper §3.3: the paper's three, then an extension. The paper's "PersonaMem v2" rows are
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
    """Input that cannot be read as the benchmark it claims to be (the message names the file, the
    record and what is wrong)."""


def check_dataset(name: str) -> str:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return name


def display_name(name: str) -> str:
    return DISPLAY_NAMES.get(name, name)


def _find_repo_root() -> Path:
    """``MEMCOST_ROOT``, else the folder with this repository's ``pyproject.toml`` above this file
    or the working directory."""
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


def notebook_path(stem: str) -> Path:
    """A study notebook by name: ``notebooks/``'s, else the plugin's that holds it."""
    from memcost.plugins import contributed

    path = NOTEBOOKS_DIR / f"{stem}.ipynb"
    found = (p for p in contributed("notebooks") if p.stem == stem)
    return path if path.is_file() else next(found, path)


ASSETS_DIR: Path = Path(__file__).resolve().parent / "assets"
RUNS_DIR: Path = Path(os.environ.get("MEMCOST_RUNS_DIR", REPO_ROOT / "runs"))
CACHE_DIR: Path = Path(os.environ.get("MEMCOST_CACHE_DIR", REPO_ROOT / ".cache"))

DEFAULT_RUN_NAME = "interactive"  # where a notebook run by hand (run_dir = "") writes
_RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def resolve_run_dir(run_dir: str | os.PathLike[str] = "") -> Path:
    """The run directory a notebook parameter names: ``""`` is ``runs/interactive``, a bare name
    ``runs/<name>``, a path as given."""
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


# --- Tables and figures: one name each, read by attribute (``ds.table.table3``) -------------
# A notebook writes ``ds.table.table3`` and the report reads the same attribute: no file name is
# typed twice. Figures are saved as ``<stem>.png`` and ``<stem>.svg``.
DATASET_TABLES: dict[str, str] = {
    "table1": "table1_conversation_tokens",  # Table 1 (§3.3): conversation tokens, notebook 00
    "table2": "table2_question_tokens",  # Table 2 (§3.3): question tokens, notebook 00
    "questions_per_category": "questions_per_category",  # questions per category, notebook 00
    "table3": "table3_accuracy",  # Table 3 (§4.1): accuracy per system, notebook 04
    "table3_vs_paper": "table3_vs_paper",  # Table 3 beside the paper's numbers, notebook 04
    "accuracy_by_category": "accuracy_by_category",  # accuracy per question category, notebook 04
    "answer_length": "answer_length",  # answer length against correctness, notebook 04
    "failure_analysis": "failure_analysis",  # Table 6 (§4.1) failure cases, notebook 04
    "failure_tags": "failure_tags",  # failure tags per system, notebook 04
    "judge_sensitivity": "judge_sensitivity",  # accuracy under each judge prompt, notebook 04
    "mcnemar": "mcnemar",  # paired McNemar tests between systems, notebook 04
    # SIMULATED cache hits per system, notebook 03
    "simulated_prompt_cache": "simulated_prompt_cache",
}
RUN_TABLES: dict[str, str] = {
    "estimate_before_run": "estimate_before_run",  # the bill estimated after notebook 00
    "paper_vs_run": "paper_vs_run",  # every number the paper reports beside this run's, the report
    "cost_summary": "cost_summary",  # measured cost per dataset and system (§4.2), notebook 05
    "cost_by_stage": "cost_by_stage",  # cost per stage, notebook 05
    "cost_per_user": "cost_per_user",  # cost per user, notebook 05
    "cost_per_question": "cost_per_question",  # cost per question and system, notebook 05
    # long-context input billed as cached, notebook 05
    "cost_lc_cached_share": "cost_lc_cached_share",
    # output/input and reasoning/visible tokens, notebook 05
    "cost_token_ratios": "cost_token_ratios",
    # break-even by cache discount, notebook 05
    "sensitivity_cache_discount": "sensitivity_cache_discount",
    # break-even by answer length, notebook 05
    "sensitivity_output_tokens": "sensitivity_output_tokens",
    "sensitivity_batch": "sensitivity_batch",  # break-even with Batch-API prices, notebook 05
    "table4": "table4_cumulative_cost",  # Table 4 (§3.5), notebook 05
    "table5": "table5_break_even",  # Table 5 (§3.5), notebook 05
    # Tables 4-5 cell by cell against the paper, notebook 05
    "table45_vs_paper": "table45_vs_paper",
    # feasible interval of each cost constant, notebook 05
    "calibration_intervals": "calibration_intervals",
    # Tables 4-5 under each set of constants, notebook 05
    "calibration_variants": "calibration_variants",
    # measured break-even per user, notebook 05
    "cost_break_even_per_user": "cost_break_even_per_user",
    # cost as a conversation grows, notebook 05
    "cost_growing_conversation": "cost_growing_conversation",
    # the cost model with this run's measured constants, notebook 05
    "cost_model_measured": "cost_model_measured",
    "cost_per_correct_answer": "cost_per_correct_answer",  # cost per correct answer, notebook 05
    # p50/p95 of search, answer and total per system, with Mem0's published p95, notebook 05
    "latency": "latency",
    # write and read cost and break-even per memory system, notebook 05
    "cost_per_memory_system": "cost_per_memory_system",
    # cumulative cost curves behind Figure 1b, notebook 05
    "cumulative_cost_curves": "cumulative_cost_curves",
    "figure1_cost_difference": "figure1_cost_difference",  # the grid behind Figure 1, notebook 05
    # token-level against dollar break-even, notebook 05
    "token_vs_dollar_break_even": "token_vs_dollar_break_even",
    "price_schedules": "price_schedules",  # every dated price row with its source, notebook 07
    # Table 4 at the paper's and today's prices (successor models), notebook 07
    "table4_today": "table4_today",
    # Table 5 at the paper's and today's prices (successor models), notebook 07
    "table5_today": "table5_today",
    # break-even against the gap between questions per cache retention, notebook 07
    "break_even_by_gap": "break_even_by_gap",
    # break-even per arrival process (gaps, Poisson, sessions), notebook 07
    "break_even_by_arrivals": "break_even_by_arrivals",
    # break-even under each dataset's own dates, notebook 07
    "break_even_by_dataset_time": "break_even_by_dataset_time",
    # break-even across the 272K long-context tier, notebook 07
    "break_even_long_context_tier": "break_even_long_context_tier",
    # break-even with the write on the Batch API, notebook 07
    "break_even_batch_write": "break_even_batch_write",
    # paper vs today back to back / one a day / extended, notebook 07
    "break_even_headline": "break_even_headline",
}
DATASET_FIGURES: dict[str, str] = {
    "conversation_tokens": "conversation_tokens",  # conversation lengths, notebook 00
    # facts against history tokens, notebook 01
    "memory_facts_vs_history": "memory_facts_vs_history",
    "memory_evidence_recall": "memory_evidence_recall",  # evidence recall of retrieval, notebook 02
    # long-context prompt sizes, notebook 03
    "long_context_prompt_sizes": "long_context_prompt_sizes",
    # what every system put in front of the model, memory included, notebook 04
    "context_by_system": "context_by_system",
    "accuracy_by_system": "accuracy_by_system",  # accuracy per system and category, notebook 04
}
RUN_FIGURES: dict[str, str] = {
    "figure1": "figure1_break_even_heatmap",  # Figure 1 (§3.5): the break-even heatmap
    "figure1b": "figure1b_cumulative_cost",  # cumulative cost against turns at L = 101,601
    "cost_by_component": "cost_by_component",  # measured cost per component
    # feasible intervals of the cost constants
    "cost_calibration_intervals": "cost_calibration_intervals",
    "cost_sensitivity": "cost_sensitivity",  # break-even sensitivity
    # sustained break-even of a growing conversation
    "cost_sustained_break_even": "cost_sustained_break_even",
    # token-level against dollar break-even
    "cost_token_vs_dollar_break_even": "cost_token_vs_dollar_break_even",
    # Figure 1 at today's prices (successor models)
    "figure1_today": "figure1_today_break_even_heatmap",
    # break-even against L, paper vs today
    "break_even_by_context_today": "break_even_by_context_today",
    "break_even_by_gap": "break_even_by_gap",  # break-even against the gap between questions
    "cost_explorer": "cost_explorer",  # the break-even explorer's static figure
    "latency": "latency",  # latency per system and stage, Mem0's published p95 beside
}


class FileSet:
    """Named files of one kind in one folder: ``files.table3`` is ``folder/table3_accuracy.csv``; an
    unknown name is an error listing the known ones."""

    def __init__(self, folder: Path, stems: dict[str, str], suffix: str):
        self._folder, self._stems, self._suffix = folder, stems, suffix

    def __getattr__(self, name: str) -> Path:
        try:
            return self._folder / f"{self._stems[name]}{self._suffix}"
        except KeyError:
            raise AttributeError(
                f"no file named {name!r} here; known: {', '.join(sorted(self._stems))}"
            ) from None

    def stem(self, name: str) -> str:
        getattr(self, name)
        return self._stems[name]

    def names(self) -> list[str]:
        return list(self._stems)


@dataclass(frozen=True)
class DatasetPaths:
    """One dataset inside a run, ``runs/<run>/<dataset>/``: notebooks 00-04's hand-over files."""

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

    def judged_before_answers(self) -> bool:
        """Notebook 02 or 03 wrote answers after notebook 04 judged: Table 3 and its costs are the
        earlier answers'."""
        if not self.judgments.is_file():
            return False
        written = [p.stat().st_mtime_ns for p in self.answers.glob("answers_*.jsonl")]
        return max(written, default=0) > self.judgments.stat().st_mtime_ns

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

    @property
    def table(self) -> FileSet:
        return FileSet(self.tables, DATASET_TABLES, ".csv")

    @property
    def figure(self) -> FileSet:
        return FileSet(self.figures, DATASET_FIGURES, "")

    def answers_file(self, system: str) -> Path:
        return self.answers / f"answers_{system}.jsonl"

    def ensure(self) -> DatasetPaths:
        for folder in (
            self.data,
            self.memory,
            self.answers,
            self.tables,
            self.figures,
            self.metrics,
        ):
            folder.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class RunPaths:
    """A run directory ``runs/<run_name>/`` (docs/architecture.md, "Run directory")."""

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
        return self.root / "calls.sqlite"

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

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def table(self) -> FileSet:
        return FileSet(self.tables, RUN_TABLES, ".csv")

    @property
    def figure(self) -> FileSet:
        return FileSet(self.figures, RUN_FIGURES, "")

    @property
    def run_id_file(self) -> Path:
        return self.root / "run_id"

    def run_id(self) -> str:
        """This run directory's id (the Batch API's batches carry it), made once and whole (a hard
        link), so two notebooks starting together agree on it."""
        path = self.run_id_file
        if not path.is_file():
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".run_id.{uuid.uuid4().hex}.tmp"
            tmp.write_text(uuid.uuid4().hex + "\n", encoding="utf-8")
            try:
                os.link(tmp, path)  # fails if another process made it first: theirs wins
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        return path.read_text(encoding="utf-8").strip()

    def dataset(self, name: str) -> DatasetPaths:
        return DatasetPaths(self.root / name)

    def datasets(self) -> list[DatasetPaths]:
        """The dataset folders notebook 00 has written."""
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
