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
from memcost.run.lock import hold_run
from memcost.run.notebooks import discover_notebooks, notebook_sha256, stray_warnings
from memcost.run.preflight import check_estimate, preflight_credentials
from memcost.run.presets import Preset, PresetError, resolve_preset, selected_steps
from memcost.run.progress import Progress, count_executions
from memcost.run.report import write_report
from memcost.run.report.executed import export_in_background
from memcost.run.status import StageFailures, StageStatus, check_failures, record_status
from memcost.run.validate import validate_run
from memcost.vectorstore.embedded import SERVER_DIR, stop_orphaned_server

# Steps after which the bill of the rest is estimated (00 is free, these may be paid).
PAID_STEPS = ("01", "02", "03", "04")


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
    run: RunPaths, notebook: Path, parameters: dict[str, Any], dataset: str | None,
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
        with progress.cells():  # cell output: the log always, the terminal with --verbose
            execute_notebook(notebook, output, parameters, True)
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
            progress.say(f"stopped the run's PostgreSQL server (pid {stopped}) left by {label}",
                         always=True)
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
    preset = resolve_preset(
        params, notebooks, steps=steps, datasets=datasets, overrides=overrides
    )
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
    total = count_executions(selected, {s: "dataset" in d for s, d in declared.items()},
                             len(preset.datasets))
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


def execute_steps(run: RunPaths, preset: Preset, notebooks: Mapping[str, Path],
                  selected: list[str], progress: Progress) -> None:
    """The selected notebooks in order, each stage's status recorded and checked."""
    record_start(run, preset, selected)
    for step in selected:
        notebook = notebooks[step]
        declared = notebook_parameters(notebook)
        statuses: list[StageStatus] = []
        for dataset in preset.datasets if "dataset" in declared else [None]:
            inputs = notebook_inputs(preset, run, declared, dataset)
            check_run_stores(run, preset)  # the cache readable, the ledger whole
            run_notebook(run, notebook, inputs, dataset, progress)
            status = record_status(run, notebook.stem, dataset)
            if status is not None:
                statuses.append(status)
        check_failures(statuses, preset.allow_failures)
        if step == "00" and any(s in selected for s in PAID_STEPS):
            check_context_limits(preset, run, notebooks, selected)
            check_estimate(preset, run, selected)
    check_run_stores(run, preset)
