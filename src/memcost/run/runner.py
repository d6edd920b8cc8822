"""Run the notebooks of a preset with papermill into a run directory.

A notebook that declares a ``dataset`` parameter runs once per dataset; the others run once
for the whole run. The runner records each notebook's parameters, wall time and status in the
manifest, checks the estimated bill after notebook 00 and writes the report at the end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memcost import manifest as manifest_mod
from memcost.params import notebook_parameters
from memcost.paths import NOTEBOOKS_DIR, RUNS_DIR, RunPaths, resolve_run_dir
from memcost.run.context_check import check_context_limits
from memcost.run.execute import NotebookFailed, execute_notebook
from memcost.run.integrity import check_run_stores
from memcost.run.kernel_forks import expect_kernels
from memcost.run.kernel_forks import stop as stop_kernels
from memcost.run.lock import hold_run
from memcost.run.notebooks import (
    READS_NOTHING_OF,
    discover_notebooks,
    notebook_sha256,
    stray_warnings,
)
from memcost.run.preflight import check_estimate, preflight_credentials
from memcost.run.presets import Preset, PresetError, resolve_preset, selected_steps
from memcost.run.progress import Progress, count_executions
from memcost.run.report import write_report
from memcost.run.report.executed import export_in_background
from memcost.run.side_by_side import SideBySide, Task, dataset_workers
from memcost.run.status import StageFailures, StageStatus, check_failures, record_status
from memcost.run.validate import validate_run
from memcost.vectorstore.embedded import SERVER_DIR, stop_orphaned_server

# Steps after which the bill of the rest is estimated (00 is free, these may be paid).
PAID_STEPS = ("01", "02", "03", "04")
# Run-wide notebooks that read only what the per-dataset ones wrote (not each other's output).
INDEPENDENT_RUN_WIDE = frozenset({"05", "07"})


def default_run_name(preset: Preset) -> str:
    return f"{preset.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def record_start(run: RunPaths, preset: Preset, steps: list[str]) -> None:
    """Note in the manifest that the preset started (a resumed run appends another entry)."""

    def mutate(m: dict[str, Any]) -> None:
        m.setdefault("runs", []).append(
            {"started_at": manifest_mod.now_iso(), "preset": preset.as_dict(), "steps": steps}
        )
        m["preset"] = preset.as_dict()

    manifest_mod.update_manifest(run, mutate)


def notebook_inputs(
    preset: Preset, run: RunPaths, declared: Mapping[str, Any], dataset: str | None
) -> dict[str, Any]:
    """The parameters one execution gets: the preset's that the notebook declares, plus the
    run directory and dataset the runner fills in."""
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
    progress: Progress,
) -> None:
    """Execute one notebook into the run and record its status and wall time in the manifest."""
    out_dir = run.dataset(dataset).notebooks if dataset else run.notebooks
    output = out_dir / notebook.name
    label = f"{notebook.stem}" + (f" [{dataset}]" if dataset else "")
    progress.start(label)
    t0 = time.perf_counter()
    status = "ok"
    try:
        with progress.cells(label) as sink:  # the log always, the terminal with --verbose
            execute_notebook(notebook, output, parameters, True, sink)
        export_in_background(output)  # its HTML for the report, while the next one runs
    except NotebookFailed:
        status = "failed"
        raise
    except BaseException:
        status = "interrupted"
        raise
    finally:
        # A kernel killed mid-notebook cannot stop the run's private PostgreSQL: the runner does.
        stopped = stop_orphaned_server(run.root / SERVER_DIR / "pgdata")
        if stopped is not None:
            progress.say(
                f"stopped the run's PostgreSQL server (pid {stopped}) left by {label}", always=True
            )
        wall = round(time.perf_counter() - t0, 3)
        key = f"{dataset}/{notebook.stem}" if dataset else notebook.stem
        manifest_mod.set_entry(
            run,
            "notebooks",
            key,
            {"notebook": str(output.relative_to(run.root)), "parameters": parameters,
             "wall_time_s": wall, "status": status, "finished_at": manifest_mod.now_iso(),
             "sha256": notebook_sha256(notebook)},
        )  # fmt: skip
        progress.finish(label, status, wall)


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
    """Execute a preset's notebooks in order; stop at the first failure.

    ``stream`` shows cell output in the terminal (``--verbose``), ``quiet`` hides the line per
    notebook; the run's ``logs/`` keeps everything either way. Returns the run's paths. Raises
    :class:`PresetError` before running anything if the preset is invalid, :class:`RunLocked`
    when another process writes the same run directory, :class:`NotebookFailed` when a notebook
    fails and :class:`StageFailures` when a stage left more failed items than ``allow_failures``
    (a fraction; the preset's when not given) allows.
    """
    notebooks = discover_notebooks(notebooks_dir)
    preset = resolve_preset(params, notebooks, steps=steps, datasets=datasets, overrides=overrides)
    if allow_failures is not None:
        preset.allow_failures = float(allow_failures)
    try:
        run_dir = resolve_run_dir(run_name or default_run_name(preset))
    except ValueError as exc:
        raise PresetError(str(exc)) from None
    validate_run(preset, notebooks, run_dir)  # nothing is created before this passes
    preflight_credentials(preset, notebooks)
    selected = selected_steps(preset, notebooks)
    run = RunPaths(run_dir).ensure()
    declared = {step: notebook_parameters(notebooks[step]) for step in selected}
    total = count_executions(
        selected, {s: "dataset" in d for s, d in declared.items()}, len(preset.datasets)
    )
    progress = Progress(run.logs, total, verbose=stream, quiet=quiet)
    expect_kernels(total)
    with hold_run(run.root), progress.session():
        progress.say(f"memcost: run '{run.name}' with preset {preset.path.name} -> {run.root}")
        for warning in stray_warnings(notebooks_dir):
            progress.say(warning, always=True)
        for note in preset.notes:
            progress.say(note)
        try:
            execute_steps(run, preset, notebooks, selected, progress)
        except OSError as exc:  # a full disk, a read-only folder: the command line says how
            exc.run_dir = run.name if run.root.parent == RUNS_DIR else str(run.root)
            raise
        except (NotebookFailed, StageFailures) as exc:
            exc.run_dir = run.name if run.root.parent == RUNS_DIR else str(run.root)
            try:
                write_report(run)  # the failures box opens it: what failed, how to resume
            except Exception as report_error:  # noqa: BLE001 - the run's own error comes first
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
    progress: Progress,
) -> None:
    """The selected notebooks in order, each stage's status recorded and checked. An offline
    run's notebooks run side by side where nothing depends on another's output
    (:mod:`memcost.run.side_by_side`)."""
    record_start(run, preset, selected)
    workers = dataset_workers(preset, verbose=progress.verbose)
    per_dataset = {s: "dataset" in notebook_parameters(notebooks[s]) for s in selected}
    groups: list[list[str]] = []  # runs of steps, each group of one kind
    for step in selected:
        if groups and per_dataset[groups[-1][0]] == per_dataset[step] and groups[-1] != ["00"]:
            groups[-1].append(step)
        else:
            groups.append([step])  # 00 apart: the estimate comes between it and the rest
    for group in groups:
        if workers > 1 and per_dataset[group[0]]:
            tasks = [(s, d) for d in preset.datasets for s in group]
            after = {
                (s, d): {(t, d) for t in group[:i] if t not in READS_NOTHING_OF.get(s, ())}
                for d in preset.datasets
                for i, s in enumerate(group)
            }
            _side_by_side(run, preset, notebooks, tasks, after, progress, workers)
        elif workers > 1 and set(group) <= INDEPENDENT_RUN_WIDE:
            _side_by_side(run, preset, notebooks, [(s, None) for s in group], {}, progress, workers)
        else:
            for step in group:
                statuses = [
                    status
                    for d in (preset.datasets if per_dataset[step] else [None])
                    if (status := _run_one(run, preset, notebooks, step, d, progress))
                ]
                check_failures(statuses, preset.allow_failures)
        if group[-1] == "00":
            _after_prepare(run, preset, notebooks, selected)
    check_run_stores(run, preset)


def _run_one(
    run: RunPaths,
    preset: Preset,
    notebooks: Mapping[str, Path],
    step: str,
    dataset: str | None,
    progress: Progress,
) -> StageStatus | None:
    notebook = notebooks[step]
    inputs = notebook_inputs(preset, run, notebook_parameters(notebook), dataset)
    check_run_stores(run, preset)  # the cache readable, the ledger whole
    run_notebook(run, notebook, inputs, dataset, progress)
    return record_status(run, notebook.stem, dataset)


def _after_prepare(
    run: RunPaths, preset: Preset, notebooks: Mapping[str, Path], selected: list[str]
) -> None:
    """Once every dataset is prepared (notebook 00, free): the prompts that would not fit and
    the bill of the rest, before any notebook that may pay."""
    if any(s in selected for s in PAID_STEPS):
        check_context_limits(preset, run, notebooks, selected)
        check_estimate(preset, run, selected)


def _side_by_side(
    run: RunPaths,
    preset: Preset,
    notebooks: Mapping[str, Path],
    tasks: list[Task],
    after: Mapping[Task, set[Task]],
    progress: Progress,
    workers: int,
) -> None:
    runner = SideBySide(
        lambda step, dataset: _run_one(run, preset, notebooks, step, dataset, progress),
        lambda status: status.failed > 0 and status.fraction > preset.allow_failures,
        workers,
    )
    progress.side_by_side = True
    try:
        statuses = runner.run(tasks, after)
    except KeyboardInterrupt:
        stop_kernels()  # the kernels the other chains' notebooks run in end with the server
        raise
    finally:
        progress.side_by_side = False
    for step in dict.fromkeys(s for s, _ in tasks):  # in the steps' order
        check_failures([v for (s, _d), v in statuses.items() if s == step], preset.allow_failures)
