"""Run the notebooks of a preset with papermill into a run directory (docs/architecture.md, "The
runner")."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import multiprocessing
import os
import queue
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from multiprocessing.managers import SyncManager
from pathlib import Path
from typing import IO, Any

import pandas as pd
from filelock import FileLock, Timeout

from memcost import manifest as manifest_mod
from memcost.calls import CallStore, StoreError, store_path
from memcost.costs.estimate import STEP_STAGES
from memcost.io import PROGRESS_FILE, PROGRESS_LABEL, SIGN_OF_LIFE
from memcost.memory import parse_systems, system_class
from memcost.params import notebook_parameters
from memcost.paths import NOTEBOOKS_DIR, RUNS_DIR, RunPaths, resolve_run_dir
from memcost.plugins import PluginError, contributed, plugins
from memcost.run.checks import (
    StageFailures,
    StageStatus,
    check_context_limits,
    check_estimate,
    check_failures,
    preflight_credentials,
    record_status,
    uses_paid_backend,
)
from memcost.run.presets import (
    Preset,
    PresetError,
    check_fraction,
    resolve_preset,
    selected_steps,
    validate_run,
)
from memcost.run.report import write_report
from memcost.run.report.page import export_html_soon, wait_for_exports

# --- Which notebooks run ---------------------------------------------------------------------

# The core's notebooks, in order; a plugin adds its own (opt-in: each runs only where a preset's
# `steps` names it). A notebook that is not one of these never runs: copies that gather in a
# folder of notebooks (``x.nbconvert.ipynb``, ``x-Copy1.ipynb``, a student's ``x_v2.ipynb``)
# start with the same number and would otherwise run instead of the real one.
CORE_NOTEBOOKS = (
    "00_prepare_data.ipynb",
    "01_extract_facts.ipynb",
    "02_answer_from_memory.ipynb",
    "03_answer_long_context.ipynb",
    "04_judge_answers.ipynb",
    "05_analyse_costs.ipynb",
    "07_costs_today.ipynb",
)
_NUMBERED = re.compile(r"^(\d\d)_.+\.ipynb$")
_COPIES = (re.compile(r"\.nbconvert\.ipynb$"), re.compile(r"-Copy\d*\.ipynb$"))
# Steps after which the bill of the rest is estimated (00 is free, these may be paid).
PAID_STEPS = ("01", "02", "03", "04")
# Every kernel does its numerical work on one thread, unless the environment sets otherwise:
# OpenBLAS's and FAISS's thread teams spin between parallel sections and take the core of the
# dataset running beside them, and a multi-threaded HNSW build is not reproducible.
THREAD_LIMITS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
WORKERS = "MEMCOST_DATASET_WORKERS"  # datasets run at once (1: one notebook after another)


def is_copy(name: str) -> bool:
    return any(p.search(name) for p in _COPIES)


def study_notebooks() -> dict[str, Path]:
    """The core's notebooks and every plugin's, by two-digit number."""
    found = {name[:2]: NOTEBOOKS_DIR / name for name in CORE_NOTEBOOKS}
    for path in contributed("notebooks"):
        taken = found.get(path.name[:2])
        if taken is not None and taken != path:
            raise PluginError(f"two notebooks numbered {path.name[:2]}: {taken} and {path}")
        found[path.name[:2]] = path
    return dict(sorted(found.items()))


def discover_notebooks(folder: Path = NOTEBOOKS_DIR) -> dict[str, Path]:
    """The notebooks to run, by two-digit number: the study's (:func:`study_notebooks`), those of
    them a copy holds (a class's), or every ``NN_*.ipynb`` of another folder (two for one number:
    an error)."""
    study = study_notebooks()
    if folder == NOTEBOOKS_DIR:
        return {s: p for s, p in study.items() if p.is_file()}
    copies = {s: folder / p.name for s, p in study.items() if (folder / p.name).is_file()}
    if copies:
        return copies
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
        p
        for p in sorted(folder.glob("*.ipynb"))
        if p not in chosen and (_NUMBERED.match(p.name) or is_copy(p.name))
    ]


def stray_warnings(folder: Path = NOTEBOOKS_DIR) -> list[str]:
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
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- One notebook ----------------------------------------------------------------------------


class NotebookFailed(RuntimeError):
    """A notebook raised; carries what the user needs to find and fix the failing cell."""

    def __init__(
        self,
        notebook: Path,
        output: Path,
        cell_index: int | None,
        error: str,
        cell_source: str = "",
        ename: str = "",
    ):
        self.notebook, self.output = notebook, output
        self.cell_index, self.error = cell_index, error
        self.cell_source = cell_source
        self.ename = ename  # the exception's class name, e.g. BudgetExceeded: what to suggest
        self.run_dir: str = ""  # filled in by run_preset: what to pass to --run-name to resume
        where = f"cell {cell_index}" if cell_index is not None else "a cell"
        if cell_source:
            where += f" (`{cell_source.strip()[:80]}`)"
        super().__init__(
            f"{notebook.name} failed in {where}: {error}\n"
            f"The partially executed notebook is at {output}"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a dataset's process, re-raised here
        args = (self.notebook, self.output, self.cell_index, self.error)
        return (type(self), (*args, self.cell_source, self.ename))


class Tee:
    def __init__(self, *streams: IO[str]):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _not_a_dead_kernel_notice(record: logging.LogRecord) -> bool:
    """nbclient's line for a kernel gone mid-cell: :class:`NotebookFailed` says it, and after Ctrl-C
    it was a false alarm."""
    return not record.getMessage().startswith("Kernel died while waiting")


def execute_notebook(
    notebook: Path,
    output: Path,
    parameters: dict[str, Any],
    *,
    sink: IO[str] | None = None,
    progress_bar: bool = False,
) -> None:
    """Execute ``notebook`` into ``output`` (papermill, one kernel), its cells' output to ``sink``;
    a failure is :class:`NotebookFailed`, the partial notebook kept."""
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError
    from traitlets.config import Config

    output.parent.mkdir(parents=True, exist_ok=True)
    logging.getLogger("papermill").addFilter(_not_a_dead_kernel_notice)  # kept once
    try:
        with tempfile.TemporaryDirectory(prefix="memcost-kernel-") as sockets:
            papermill.execute_notebook(
                str(notebook),
                str(output),
                parameters=parameters,
                cwd=str(notebook.parent),
                kernel_name="python3",
                progress_bar=progress_bar,
                request_save_on_cell_execute=True,  # the partial notebook is saved after each cell
                stdout_file=sink,
                stderr_file=sink,
                # Unix sockets, not TCP ports: kernels that start at once in several processes
                # (datasets side by side, a test session) would race for the same free port
                config=Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/k"}}),
                # its notices are not ours, nor its complaint when stopped mid-reply (Ctrl-C):
                # a cell's error reaches us as the cell's output, a dead kernel as below
                extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            )
    except KeyboardInterrupt:
        # nbclient's unfinished tasks would print their tracebacks when they are collected
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        raise
    except PapermillExecutionError as exc:
        first_line = next((ln for ln in str(exc.source).splitlines() if ln.strip()), "")
        raise NotebookFailed(
            notebook, output, exc.cell_index, f"{exc.ename}: {exc.evalue}", first_line, exc.ename
        ) from None
    except DeadKernelError:
        index, source = last_started_cell(output)
        raise NotebookFailed(
            notebook,
            output,
            index,
            "the notebook's kernel died (killed: most often out of memory, or by a signal); "
            "what finished before it is kept",
            source,
            ename="DeadKernelError",
        ) from None


def last_started_cell(output: Path) -> tuple[int | None, str]:
    """The cell a killed kernel was running (its index and first line), ``(None, "")`` when
    unknown."""
    try:
        cells = json.loads(output.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return None, ""
    started = [
        i
        for i, c in enumerate(cells)
        if c.get("cell_type") == "code"
        and (c.get("metadata", {}).get("papermill") or {}).get("start_time")
    ]
    if not started:
        return None, ""
    source = cells[started[-1]].get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    return started[-1], next((ln for ln in source.splitlines() if ln.strip()), "")


# --- The run's log and lock ------------------------------------------------------------------


def clock(seconds: float) -> str:
    """``75.2`` → ``"1:15"``; ``3725`` → ``"1:02:05"``."""
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def notebook_log(logs: Path, notebook: Path, dataset: str | None) -> Path:
    return logs / f"{dataset + '-' if dataset else ''}{notebook.stem}.log"


class Progress:
    """The run's lines on the terminal and in ``logs/run-<time>.log``; the ETA counts the paid
    notebooks left at the estimate's time (:meth:`plan`) and the others at the mean."""

    def __init__(
        self,
        log_dir: Path,
        total: int,
        *,
        verbose: bool = False,
        quiet: bool = False,
        terminal: IO[str] | None = None,
    ):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"run-{time.strftime('%Y%m%d-%H%M%S')}.log"
        self.log: IO[str] = self.log_path.open("a", encoding="utf-8")
        self.told_path = log_dir / "progress.log"  # what kernels tell the runner, appended
        self._lock = threading.Lock()  # the log: the runner's lines and the kernels' told ones
        self.total, self.verbose, self.quiet = total, verbose, quiet
        self.terminal = terminal or sys.stdout
        self.done = 0
        self.durations: list[float] = []  # of the notebooks done that had no planned time
        self.planned: dict[str, float] = {}  # label -> estimated seconds, of those to come
        self.t0 = time.perf_counter()

    def say(self, line: str, *, always: bool = False) -> None:
        self.write(line + "\n")
        if always or not self.quiet:
            print(line, file=self.terminal, flush=True)

    def write(self, text: str) -> int:
        with self._lock:
            self.log.write(text)
            self.log.flush()
        return len(text)

    def flush(self) -> None:
        self.log.flush()

    def start(self, label: str) -> None:
        self.write(f"\n=== started: {label}\n")
        if self.verbose and not self.quiet:
            print(f"\n=== {label}", file=self.terminal, flush=True)

    def plan(self, seconds: Mapping[str, float]) -> None:
        """The estimated time of the paid notebooks to come (NaN: a batch's)."""
        self.planned = dict(seconds)

    def finish(self, label: str, status: str, wall: float) -> None:
        self.done += 1
        if self.planned.pop(label, None) is None:
            self.durations.append(wall)
        left = self.total - self.done
        mean = sum(self.durations) / len(self.durations) if self.durations else 0.0
        planned = [s for s in self.planned.values() if not math.isnan(s)]
        rest = sum(planned) + mean * max(0, left - len(self.planned))
        batches = " plus batches" if len(planned) < len(self.planned) else ""
        eta = f", ETA ~{clock(rest)}{batches}" if left > 0 else ""
        line = (
            f"notebook {self.done} of {self.total}: {label}: {status} in {wall:.1f} s "
            f"(elapsed {clock(time.perf_counter() - self.t0)}{eta})"
        )
        self.say(line)

    def cell_output(self, notebook: Path, dataset: str | None) -> Path | None:
        """A notebook's log, or ``None`` (the terminal) when ``verbose``."""
        return None if self.verbose else notebook_log(self.log_path.parent, notebook, dataset)

    def _follow(self, stop: threading.Event) -> None:
        """Pass on each whole line the kernels append to :attr:`told_path`."""
        with self.told_path.open("a+", encoding="utf-8") as told:
            told.seek(0, os.SEEK_END)  # a resumed run's earlier lines are in its earlier log
            while True:
                at = told.tell()
                line = told.readline()
                if line.endswith("\n"):
                    self.write(SIGN_OF_LIFE + line)
                    if not (self.quiet or self.verbose):
                        print(SIGN_OF_LIFE + line, end="", file=self.terminal, flush=True)
                    continue
                told.seek(at)  # a line half written: read again once it is whole
                if stop.is_set():
                    return
                stop.wait(0.2)

    @contextlib.contextmanager
    def session(self) -> Iterator[Progress]:
        """The whole run: the runner's prints also go to the log, the kernels' told lines are
        followed."""
        out, err = Tee(sys.stdout, self), Tee(sys.stderr, self)
        stop = threading.Event()
        follower = threading.Thread(target=self._follow, args=(stop,), daemon=True)
        before = os.environ.get(PROGRESS_FILE)
        os.environ[PROGRESS_FILE] = str(self.told_path)  # the kernels inherit it
        self.told_path.touch()
        follower.start()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # type: ignore[type-var]
                yield self
        finally:
            stop.set()
            follower.join(timeout=5)
            os.environ.pop(PROGRESS_FILE)
            if before is not None:
                os.environ[PROGRESS_FILE] = before
            self.log.close()


class RunLocked(RuntimeError):
    """Another process is writing this run directory."""


LOCK_NAME = ".lock"


@contextlib.contextmanager
def hold_run(root: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the run directory's lock (the system releases it with a killed process);
    :class:`RunLocked` names the holder."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(root / LOCK_NAME)
    holder = root / f"{LOCK_NAME}.holder"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who = holder.read_text(encoding="utf-8").strip() if holder.is_file() else ""
        raise RunLocked(
            f"run directory {root} is in use by {who or 'another process'}; one run writes a "
            "run directory at a time. Wait for it to finish (or stop that process), or choose "
            "another --run-name."
        ) from None
    try:
        command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:6]))
        holder.write_text(f"pid {os.getpid()} ({command})\n", encoding="utf-8")
        yield
    finally:
        lock.release()


# --- The run ---------------------------------------------------------------------------------


def check_store(run: RunPaths) -> None:
    """Before each notebook: a damaged store of calls stops the run with what to do."""
    if not store_path(run.root).is_file():
        return
    # a damaged one is set aside (one line says where); StoreError: what to do, then resume
    CallStore(run.root, set_aside_damaged=True).close()


def default_run_name(preset: Preset) -> str:
    return f"{preset.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def record_start(run: RunPaths, preset: Preset, steps: list[str]) -> None:

    def mutate(m: dict[str, Any]) -> None:
        m.setdefault("runs", []).append(
            {"started_at": manifest_mod.now_iso(), "preset": preset.as_dict(), "steps": steps}
        )
        m["preset"] = preset.as_dict()

    manifest_mod.update_manifest(run, mutate)


def notebook_inputs(
    preset: Preset, run: RunPaths, declared: Mapping[str, Any], dataset: str | None
) -> dict[str, Any]:
    """The preset's parameters that the notebook declares, and the run directory and dataset."""
    chosen = {k: v for k, v in preset.parameters_for(dataset).items() if k in declared}
    chosen["run_dir"] = str(run.root)
    if dataset is not None:
        chosen["dataset"] = dataset
    return chosen


def run_notebook(
    run: RunPaths,
    notebook: Path,
    parameters: dict[str, Any],
    dataset: str | None,
    cell_output: Path | None,
) -> tuple[str, float]:
    """Execute one notebook into the run, record its status and wall time in the manifest, export it
    to HTML; returns ``(status, wall seconds)``."""
    out_dir = run.dataset(dataset).notebooks if dataset else run.notebooks
    output = out_dir / notebook.name
    t0 = time.perf_counter()
    status, error, ename = "ok", None, ""
    os.environ[PROGRESS_LABEL] = f"[{dataset}] " if dataset else ""  # its kernel inherits it
    try:
        shown = contextlib.nullcontext(sys.stdout)
        with open(cell_output, "a", encoding="utf-8") if cell_output else shown as sink:
            execute_notebook(notebook, output, parameters, sink=sink)
        export_html_soon(output)
    except NotebookFailed as exc:
        status, ename = "failed", exc.ename  # the exception's class: a budget stop is no fault
        where = f"cell {exc.cell_index}" if exc.cell_index is not None else "a cell"
        error = f"{where}: {exc.error}"[:400]  # what the report says failed
        raise
    except BaseException:
        status = "interrupted"
        raise
    finally:
        # A kernel killed mid-notebook cannot stop the servers it started: the runner does.
        for stop in (p.stop_orphans for p in plugins() if p.stop_orphans):
            if said := stop(run.root):
                print(f"{said} (left by {notebook.stem})")
        wall = round(time.perf_counter() - t0, 3)
        key = f"{dataset}/{notebook.stem}" if dataset else notebook.stem
        entry = {"notebook": str(output.relative_to(run.root)), "parameters": parameters,
                 "wall_time_s": wall, "status": status,
                 "finished_at": manifest_mod.now_iso("milliseconds"),
                 "sha256": notebook_sha256(notebook), **({"error": error} if error else {}),
                 **({"ename": ename} if ename else {})}  # fmt: skip
        manifest_mod.update_manifest(run, functools.partial(_record_notebook, key, entry))
    return status, wall


def _record_notebook(key: str, entry: dict[str, Any], manifest: dict[str, Any]) -> None:
    manifest.setdefault("notebooks", {})[key] = entry
    # The notebook's own record said "running" when it opened; its last cell, which would
    # have closed it, did not run: it says how the notebook ended instead.
    step = manifest.get("steps", {}).get(key)
    if entry["status"] != "ok" and step and step.get("status") == "running":
        step["status"] = entry["status"]


def label_of(step_path: Path, dataset: str | None) -> str:
    return step_path.stem + (f" [{dataset}]" if dataset else "")


def planned_seconds(estimate: pd.DataFrame, notebooks: Mapping[str, Path]) -> dict[str, float]:
    """The estimated time of each paid notebook, by label (NaN: it waits for a batch)."""
    planned: dict[str, float] = {}
    for step, stages in STEP_STAGES.items():
        if step not in notebooks:
            continue
        for dataset, rows in estimate.loc[estimate["stage"].isin(stages)].groupby("dataset"):
            minutes = rows["minutes"]
            seconds = math.nan if minutes.isna().any() else 60.0 * float(minutes.sum())
            planned[label_of(notebooks[step], str(dataset))] = seconds
    return planned


def dataset_workers(preset: Preset, *, verbose: bool) -> int:
    """How many datasets run at once: one per core offline, else 1 (``MEMCOST_DATASET_WORKERS`` caps
    it)."""
    wanted = os.environ.get(WORKERS, "").strip()
    limit = int(wanted) if wanted.isdigit() and int(wanted) > 0 else (os.cpu_count() or 1)
    params = [preset.parameters_for(d) for d in preset.datasets] or [preset.parameters]
    if verbose or any(uses_paid_backend(p) or _uses_run_server(p) for p in params):
        return 1
    return max(1, min(limit, len(preset.datasets)))


def _uses_run_server(params: Mapping[str, Any]) -> bool:
    """Two datasets' processes would race to start the run's database server."""
    for name, given in parse_systems(
        params.get("memory_systems") or ["mem0_style"], runnable=False
    ):
        cls = system_class(name)
        if cls.uses_run_server(cls.settings_from(given, params)):
            return True
    return False


def run_preset(
    params: str | os.PathLike[str],
    *,
    run_name: str | None = None,
    steps: list[str] | None = None,
    datasets: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    stream: bool = False,
    quiet: bool = False,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    allow_failures: float | None = None,
) -> RunPaths:
    """Execute a preset's notebooks in order, stopping at the first failure; returns the run's
    paths. Raises :class:`PresetError` (before anything runs), :class:`RunLocked`,
    :class:`NotebookFailed`, or :class:`StageFailures` past ``allow_failures``."""
    notebooks = discover_notebooks(notebooks_dir)
    preset = resolve_preset(params, notebooks, steps=steps, datasets=datasets, overrides=overrides)
    if allow_failures is not None:
        preset.allow_failures = check_fraction(allow_failures, "--allow-failures")
    try:
        run_dir = resolve_run_dir(run_name or default_run_name(preset))
    except ValueError as exc:
        raise PresetError(str(exc)) from None
    validate_run(preset, notebooks, run_dir)  # nothing is created before this passes
    preflight_credentials(preset, notebooks)
    selected = selected_steps(preset, notebooks)
    run = RunPaths(run_dir).ensure()
    per_dataset = {s: "dataset" in notebook_parameters(notebooks[s]) for s in selected}
    total = sum(len(preset.datasets) if per_dataset[s] else 1 for s in selected)
    progress = Progress(run.logs, total, verbose=stream, quiet=quiet)
    for name, value in THREAD_LIMITS.items():  # the kernels inherit the runner's environment
        os.environ.setdefault(name, value)
    with hold_run(run.root), progress.session():
        progress.say(f"memcost: run '{run.name}' with preset {preset.path.name} -> {run.root}")
        for warning in stray_warnings(notebooks_dir):
            progress.say(warning, always=True)
        for note in preset.notes:
            progress.say(note)
        try:
            execute_steps(run, preset, notebooks, selected, per_dataset, progress)
        except (StoreError, KeyboardInterrupt) as exc:  # what to resume: the caller says how
            exc.run_dir = run.name if run.root.parent == RUNS_DIR else str(run.root)
            if isinstance(exc, KeyboardInterrupt):  # the log says why it ends here
                why = str(exc) or "Ctrl-C"  # a signal's name when memcost.cli stopped on one
                progress.log.write(f"\n=== interrupted ({why}) at {manifest_mod.now_iso()}\n")
            raise
        except (OSError, NotebookFailed, StageFailures) as exc:
            exc.run_dir = run.name if run.root.parent == RUNS_DIR else str(run.root)
            if not isinstance(exc, OSError):
                try:
                    write_report(run)  # the failures box opens it: what failed, how to resume
                except Exception as report_error:  # noqa: BLE001 - the run's own error first
                    progress.say(f"(the report could not be written: {report_error})", always=True)
            raise
        write_report(run)
        progress.say(f"log: {progress.log_path}")
    return run


def execute_steps(
    run: RunPaths,
    preset: Preset,
    notebooks: Mapping[str, Path],
    selected: list[str],
    per_dataset: Mapping[str, bool],
    progress: Progress,
) -> None:
    """Notebook 00 of every dataset, the checks before anything is paid, the other per-dataset
    notebooks, then the run-wide ones."""
    record_start(run, preset, selected)
    workers = dataset_workers(preset, verbose=progress.verbose)
    prepare = [s for s in selected if s == "00" and per_dataset[s]]
    rest = [s for s in selected if per_dataset[s] and s not in prepare]
    for group in (prepare, rest):
        if not group:
            continue
        statuses = _run_datasets(run, preset, notebooks, group, progress, workers)
        for step in group:
            check_failures([s for s in statuses if s.step[:2] == step], preset.allow_failures)
        if group is prepare and any(s in selected for s in PAID_STEPS):
            check_context_limits(preset, run, notebooks, selected)
            estimate = check_estimate(preset, run, selected)
            if estimate is not None:  # the ETA of a paid run: the estimate's time, not the mean
                progress.plan(planned_seconds(estimate, notebooks))
    for step in (s for s in selected if not per_dataset[s]):
        check_store(run)
        _run_step(run, preset, notebooks[step], None, progress)
    check_store(run)


def _run_step(
    run: RunPaths,
    preset: Preset,
    notebook: Path,
    dataset: str | None,
    progress: Progress,
) -> StageStatus | None:
    inputs = notebook_inputs(preset, run, notebook_parameters(notebook), dataset)
    label = label_of(notebook, dataset)
    progress.start(label)
    status, wall = "failed", 0.0
    t0 = time.perf_counter()
    try:
        status, wall = run_notebook(
            run, notebook, inputs, dataset, progress.cell_output(notebook, dataset)
        )
    except KeyboardInterrupt:
        status = "interrupted"  # as the manifest records it
        raise
    finally:
        progress.finish(label, status, wall or time.perf_counter() - t0)
    return record_status(run, notebook.stem, dataset)


def _run_datasets(
    run: RunPaths,
    preset: Preset,
    notebooks: Mapping[str, Path],
    steps: Sequence[str],
    progress: Progress,
    workers: int,
) -> list[StageStatus]:
    """``steps`` for every dataset, one after another or ``workers`` at once, each in a process of
    its own; a failure lets those beside it finish, starts no other, and is raised then."""
    statuses: list[StageStatus] = []
    if workers <= 1:
        for step in steps:
            for dataset in preset.datasets:
                check_store(run)
                status = _run_step(run, preset, notebooks[step], dataset, progress)
                if status is not None:
                    statuses.append(status)
            check_failures([s for s in statuses if s.step[:2] == step], preset.allow_failures)
        return statuses
    check_store(run)
    context = multiprocessing.get_context("spawn")  # no fork of a process holding threads
    # the helper processes end with the runner, even one killed outright (SIGKILL, the OOM
    # killer), instead of going on with notebooks, and calls, that nobody watches
    manager = SyncManager(ctx=context)
    manager.start(_end_with, (os.getpid(),))
    with manager:
        events, stop = manager.Queue(), manager.Event()
        job = {
            "run": str(run.root),
            "preset": preset,
            "notebooks": {s: notebooks[s] for s in steps},
            "logs": str(progress.log_path.parent),
        }
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_end_with, initargs=(os.getpid(), True)
        ) as pool:
            futures = [
                pool.submit(_dataset_chain, job, dataset, events, stop)
                for dataset in preset.datasets
            ]
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                    _show(events, progress)
                    if any(f.exception() is not None for f in done):
                        stop.set()  # nothing new starts; what runs finishes
            except KeyboardInterrupt:  # they are interrupted too: their last lines, then stop
                stop.set()
                wait(pending, timeout=30)
                _show(events, progress)
                raise
            _show(events, progress)
        for future in futures:
            statuses.extend(future.result())  # the first failure, in the datasets' order
    return statuses


def _end_with(parent: int, interruptible: bool = False) -> None:
    """In a helper process: exit once ``parent`` is gone (its kernels then end too); an
    ``interruptible`` one takes SIGINT as Ctrl-C even when started with it ignored."""
    if interruptible:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)  # nothing to clean up that a resume does not redo

    threading.Thread(target=watch, name="end-with-runner", daemon=True).start()


def _show(events: Any, progress: Progress) -> None:
    while True:
        try:
            kind, *what = events.get_nowait()
        except queue.Empty:
            return
        if kind == "start":
            progress.start(*what)
        else:
            progress.finish(*what)


def _dataset_chain(job: dict[str, Any], dataset: str, events: Any, stop: Any) -> list[StageStatus]:
    run, preset = RunPaths(Path(job["run"])), job["preset"]
    statuses: list[StageStatus] = []
    for notebook in job["notebooks"].values():
        if stop.is_set():
            break
        label = label_of(notebook, dataset)
        events.put(("start", label))
        inputs = notebook_inputs(preset, run, notebook_parameters(notebook), dataset)
        cell_output = notebook_log(Path(job["logs"]), notebook, dataset)
        t0 = time.perf_counter()
        try:
            state, wall = run_notebook(run, notebook, inputs, dataset, cell_output)
        except BaseException as exc:
            ended = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            events.put(("finish", label, ended, time.perf_counter() - t0))
            stop.set()
            raise
        events.put(("finish", label, state, wall))
        status = record_status(run, notebook.stem, dataset)
        if status is not None:
            statuses.append(status)
            if status.failed and status.fraction > preset.allow_failures:
                break  # as one after another: this dataset goes no further than the step
    wait_for_exports()
    return statuses
