"""Run the notebooks of a preset with papermill into a run directory.

A preset (``papermill_params/<name>.yaml``) has runner keys and notebook parameters::

    description: what this preset is for              # shown in the manifest and the report
    datasets: [locomo, longmemeval, personamem_v2]    # per-dataset notebooks run once for each
    steps: ["00", "01", "02", "03", "04", "05"]       # optional: which notebooks, by number
    parameters: {backend: offline, ...}               # given to every notebook that declares them
    per_dataset: {personamem_v2: {mode: multiple_choice}}  # overrides for one dataset

A notebook that declares a ``dataset`` parameter runs once per dataset; the others run once
for the whole run. Unknown parameter keys are an error (papermill itself only warns).
"""

from __future__ import annotations

import ast
import copy
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from memcost import manifest as manifest_mod
from memcost.paths import NOTEBOOKS_DIR, PARAMS_DIR, REPO_ROOT, RUNS_DIR, RunPaths, resolve_run_dir

RUNNER_KEYS = ("description", "datasets", "steps", "parameters", "per_dataset")
# Notebooks that run only when a preset names them in ``steps`` (a preset without ``steps`` runs
# the others): 06, the serving-cost study, is a study of its own on synthetic conversations.
OPT_IN_STEPS = ("06",)
# Parameters the runner fills in itself; a preset must not set them.
RUNNER_FILLED = ("run_dir", "dataset")


class PresetError(ValueError):
    """A preset file that cannot be run as written."""


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
        self.notebook, self.output, self.cell_index, self.error = notebook, output, cell_index, error
        self.ename = ename  # the exception's class name, e.g. BudgetExceeded: what to suggest
        self.run_dir: str = ""  # filled in by run_preset: what to pass to --run-name to resume
        where = f"cell {cell_index}" if cell_index is not None else "a cell"
        if cell_source:
            where += f" (`{cell_source.strip()[:80]}`)"
        super().__init__(
            f"{notebook.name} failed in {where}: {error}\n"
            f"The partially executed notebook is at {output}"
        )


def default_steps(notebooks: Mapping[str, Path]) -> list[str]:
    """The steps of a preset that names none: every notebook but the opt-in ones."""
    return [s for s in notebooks if s not in OPT_IN_STEPS]


def discover_notebooks(folder: Path = NOTEBOOKS_DIR) -> dict[str, Path]:
    """Pipeline notebooks by their two-digit number: ``{"00": .../00_prepare_data.ipynb, ...}``."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        found[path.name[:2]] = path
    return found


@cache
def _declared(path: Path, mtime: float) -> dict[str, dict[str, Any]]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PresetError(f"{path}: not a valid notebook (JSON error at line {exc.lineno})") from exc
    cells = [c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        return {}
    source = cells[0]["source"]
    source = "".join(source) if isinstance(source, list) else source
    lines = source.splitlines()
    declared: dict[str, dict[str, Any]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, annotation = node.target.id, ast.unparse(node.annotation)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name, annotation = node.targets[0].id, "None"
        else:
            continue
        line = lines[node.end_lineno - 1]
        comment = line.split("#", 1)[1].strip() if "#" in line[node.end_col_offset:] else ""
        declared[name] = {
            "name": name,
            "inferred_type_name": annotation,
            "default": ast.get_source_segment(source, node.value) if node.value else None,
            "help": comment,
        }
    return declared


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The parameters a notebook declares in its ``parameters`` cell (name → type, default, help).

    Read with ``ast`` rather than papermill so that a notebook can list its own parameters
    without importing papermill (seconds per notebook); a test checks both agree.
    """
    return _declared(path, path.stat().st_mtime)


@dataclass
class Preset:
    name: str
    path: Path
    description: str = ""
    datasets: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    per_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)

    def parameters_for(self, dataset: str | None) -> dict[str, Any]:
        merged = copy.deepcopy(self.parameters)
        if dataset is not None:
            merged.update(copy.deepcopy(self.per_dataset.get(dataset, {})))
        return merged

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "description": self.description,
            "datasets": self.datasets,
            "steps": self.steps,
            "parameters": self.parameters,
            "per_dataset": self.per_dataset,
        }


def resolve_preset_path(params: str | os.PathLike[str]) -> Path:
    path = Path(params)
    candidates = [path, REPO_ROOT / path, PARAMS_DIR / path, PARAMS_DIR / f"{path}.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    available = ", ".join(sorted(p.stem for p in PARAMS_DIR.glob("*.yaml")))
    raise PresetError(f"preset not found: {params} (available in {PARAMS_DIR}: {available})")


def load_preset(params: str | os.PathLike[str]) -> Preset:
    path = resolve_preset_path(params)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise PresetError(f"{path}: a preset must be a mapping of keys, got {type(raw).__name__}")
    unknown = [key for key in raw if key not in RUNNER_KEYS]
    if unknown:
        raise PresetError(
            f"{path}: unknown top-level key(s) {unknown}; a preset has {list(RUNNER_KEYS)} "
            "(notebook parameters go under 'parameters:')"
        )
    preset = Preset(
        name=path.stem,
        path=path,
        description=str(raw.get("description", "")),
        datasets=[str(d) for d in raw.get("datasets") or []],
        steps=[f"{int(s):02d}" if str(s).isdigit() else str(s) for s in raw.get("steps") or []],
        parameters=dict(raw.get("parameters") or {}),
        per_dataset={str(k): dict(v or {}) for k, v in (raw.get("per_dataset") or {}).items()},
    )
    stray = [d for d in preset.per_dataset if d not in preset.datasets]
    if stray:
        raise PresetError(f"{path}: per_dataset names {stray}, which are not in datasets {preset.datasets}")
    return preset


def validate_preset(preset: Preset, notebooks: Mapping[str, Path]) -> None:
    """Every parameter key must be declared by at least one notebook the preset runs."""
    steps = preset.steps or default_steps(notebooks)
    missing = [s for s in steps if s not in notebooks]
    if missing:
        raise PresetError(
            f"{preset.path}: steps {missing} have no notebook in {NOTEBOOKS_DIR} "
            f"(available: {sorted(notebooks)})"
        )
    declared: dict[str, set[str]] = {s: set(notebook_parameters(notebooks[s])) for s in steps}
    valid = set().union(*declared.values()) if declared else set()
    blocks = [("parameters", preset.parameters)] + [
        (f"per_dataset.{name}", values) for name, values in preset.per_dataset.items()
    ]
    for where, values in blocks:
        for key in values:
            if key in RUNNER_FILLED:
                raise PresetError(
                    f"{preset.path}: '{where}.{key}' is set by the runner; remove it "
                    "(use --run-name for the run directory and 'datasets:' for datasets)"
                )
            if key not in valid:
                listing = "\n".join(
                    f"  {notebooks[s].name}: {', '.join(sorted(declared[s] - set(RUNNER_FILLED)))}"
                    for s in steps
                )
                raise PresetError(
                    f"{preset.path}: unknown parameter '{where}.{key}'; no notebook in this "
                    f"preset declares it. Valid parameters:\n{listing}"
                )
    per_dataset_steps = [s for s in steps if "dataset" in declared[s]]
    if per_dataset_steps and not preset.datasets:
        raise PresetError(
            f"{preset.path}: steps {per_dataset_steps} run per dataset but 'datasets:' is empty"
        )


def preflight_credentials(preset: Preset, notebooks: Mapping[str, Path]) -> None:
    """Stop before anything runs (or is paid for) when a backend the preset uses has no key.

    The message names each missing variable and the offline alternative.
    """
    steps = preset.steps or default_steps(notebooks)
    if not any("backend" in notebook_parameters(notebooks[s]) for s in steps):
        return
    from memcost.llm import MissingCredentials, check_credentials

    problems: list[str] = []
    for dataset in preset.datasets or [None]:
        params = preset.parameters_for(dataset)
        try:
            check_credentials(
                str(params.get("backend", "offline")),
                base_url=str(params.get("base_url", "")),
                api_key_env=str(params.get("api_key_env", "")),
                model_backends=params.get("model_backends") or None,
            )
        except (MissingCredentials, ValueError) as exc:
            # ValueError: an endpoint that cannot be used (custom without base_url, ...)
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        raise PresetError(
            f"{preset.path}: cannot start, a backend is not set up.\n" + "\n".join(problems)
        )


def uses_paid_backend(params: Mapping[str, Any]) -> bool:
    backends = {str(params.get("backend", "offline"))}
    backends |= {str(v) for v in (params.get("model_backends") or {}).values()}
    return bool(backends - {"offline"})


def check_estimate(preset: Preset, run: RunPaths) -> None:
    """After notebook 00 (free): print what the rest of the run will cost and stop before any
    paid call when that exceeds ``max_cost_usd``."""
    from memcost.estimate import estimate_run, summary_text
    from memcost.io import write_csv

    prepared = {
        name: (run.dataset(name), preset.parameters_for(name))
        for name in preset.datasets
        if run.dataset(name).questions.is_file()
    }
    estimate = estimate_run(prepared)
    if estimate.empty:
        return
    write_csv(run.tables / "estimate_before_run.csv", estimate)
    paid = any(uses_paid_backend(params) for _, params in prepared.values())
    budget = preset.parameters.get("max_cost_usd", 50.0)
    print("\n" + summary_text(estimate, max_cost_usd=budget if paid else None), flush=True)
    if not paid:
        print("  (offline backend: nothing is spent; these are the configured models' prices)",
              flush=True)
        return
    total = float(estimate["usd"].sum())
    if budget is not None and total > float(budget):
        raise PresetError(
            f"{preset.path}: the estimated bill ${total:,.2f} exceeds max_cost_usd "
            f"${float(budget):,.2f}; nothing has been spent yet. Raise max_cost_usd in the preset "
            f"(or pass -p max_cost_usd=...), reduce limit_questions / limit_conversations, or run "
            f"the estimate_<dataset> preset for a finer figure. Estimate: "
            f"{run.tables / 'estimate_before_run.csv'}"
        )


def default_run_name(preset: Preset) -> str:
    return f"{preset.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _kernel_manager_class() -> type:
    """A kernel manager that talks to the kernel over IPC sockets in the temp directory.

    The default TCP transport makes every kernel print a plain-text-transport warning into the
    terminal; local IPC sockets avoid both the warning and the open ports.
    """
    import tempfile
    import uuid

    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any):
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault(
                "ip", os.path.join(tempfile.gettempdir(), f"memcost-kernel-{uuid.uuid4().hex[:12]}")
            )
            super().__init__(**kwargs)

    return IPCKernelManager


def _execute(notebook: Path, output: Path, parameters: dict[str, Any], stream: bool) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters=parameters,
            cwd=str(notebook.parent),
            kernel_name="python3",
            progress_bar=False,
            request_save_on_cell_execute=True,  # the partial notebook is on disk after every cell
            log_output=False,
            stdout_file=sys.stdout if stream else None,
            stderr_file=sys.stderr if stream else None,
            kernel_manager_class=_kernel_manager_class(),
        )
    except PapermillExecutionError as exc:
        first_line = next((ln for ln in str(exc.source).splitlines() if ln.strip()), "")
        raise NotebookFailed(
            notebook, output, exc.cell_index, f"{exc.ename}: {exc.evalue}", first_line, exc.ename
        ) from exc


def run_preset(
    params: str | os.PathLike[str],
    *,
    run_name: str | None = None,
    steps: list[str] | None = None,
    datasets: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    stream: bool = True,
    notebooks_dir: Path = NOTEBOOKS_DIR,
) -> RunPaths:
    """Execute a preset's notebooks in order; stop at the first failure.

    Returns the run's paths. Raises :class:`PresetError` before running anything if the preset
    is invalid and :class:`NotebookFailed` when a notebook fails.
    """
    preset = load_preset(params)
    notebooks = discover_notebooks(notebooks_dir)
    if datasets:
        preset.datasets = list(datasets)
    if overrides:
        preset.parameters.update(overrides)
    # Keys are checked against every notebook the preset names, so running a subset of its
    # steps does not turn the other notebooks' keys into errors.
    validate_preset(preset, notebooks)
    if steps:
        chosen = [f"{int(s):02d}" if s.isdigit() else s for s in steps]
        outside = [s for s in chosen if s not in (preset.steps or default_steps(notebooks))]
        if outside:
            raise PresetError(f"{preset.path}: steps {outside} are not part of this preset "
                              f"(its steps: {preset.steps or default_steps(notebooks)})")
        preset.steps = chosen
    preflight_credentials(preset, notebooks)
    selected = preset.steps or default_steps(notebooks)

    run = RunPaths(resolve_run_dir(run_name or default_run_name(preset))).ensure()

    def record_start(m: dict[str, Any]) -> None:
        m.setdefault("runs", []).append(
            {"started_at": manifest_mod.now_iso(), "preset": preset.as_dict(), "steps": selected}
        )
        m["preset"] = preset.as_dict()

    manifest_mod.update_manifest(run, record_start)
    print(f"memcost: run '{run.name}' with preset {preset.path.name} -> {run.root}", flush=True)

    for step in selected:
        notebook = notebooks[step]
        declared = notebook_parameters(notebook)
        for dataset in preset.datasets if "dataset" in declared else [None]:
            params_all = preset.parameters_for(dataset)
            chosen = {k: v for k, v in params_all.items() if k in declared}
            chosen["run_dir"] = str(run.root)
            if dataset is not None:
                chosen["dataset"] = dataset
            out_dir = run.dataset(dataset).notebooks if dataset else run.notebooks
            output = out_dir / notebook.name
            label = f"{notebook.stem}" + (f" [{dataset}]" if dataset else "")
            print(f"\n=== {label}", flush=True)
            t0 = time.perf_counter()
            status = "ok"
            try:
                _execute(notebook, output, chosen, stream)
            except NotebookFailed as exc:
                status = "failed"
                exc.run_dir = run.name if run.root.parent == RUNS_DIR else str(run.root)
                raise
            except BaseException:
                status = "interrupted"
                raise
            finally:
                wall = round(time.perf_counter() - t0, 3)
                key = f"{dataset}/{notebook.stem}" if dataset else notebook.stem
                manifest_mod.set_entry(
                    run,
                    "notebooks",
                    key,
                    {"notebook": str(output.relative_to(run.root)), "parameters": chosen,
                     "wall_time_s": wall, "status": status, "finished_at": manifest_mod.now_iso()},
                )
            print(f"=== {label}: done in {wall:.1f} s", flush=True)
        if step == "00" and any(s in selected for s in ("01", "02", "03", "04")):
            check_estimate(preset, run)
    from memcost.report import write_report

    write_report(run)
    return run
