"""The run manifest (what ran, with what, from which commit, how long it took), and the
fingerprint of the settings that made each output.

``runs/<run>/manifest.json`` is updated by the runner (parameters, timings per notebook) and by
each notebook (its step, metrics, data provenance, models). Updates are read-modify-write under
a file lock and written atomically, so concurrent notebooks or a killed run never corrupt it.

Every item a stage hands over (a user's memory, an answer, a judge vote) records the
fingerprint of the settings that made it: the backend and endpoint of each model, the models,
the prompts (with their versions), the stage's parameters and hashes of its input files'
content. A resume keeps an item only when its fingerprint equals the one the stage computes
now; any other item is **redone** (never mixed in, never refused): switching a run from
``offline`` to an API backend, changing a model, a prompt or ``top_k``, or rebuilding the memory
answers the questions again. Readers keep the last record per item, so the newest settings win.
An input file counts by what it holds, not by its bytes: a Parquet file's bytes carry the
versions of pandas and pyarrow that wrote it, and a fingerprint of bytes would redo every answer
after a package upgrade that changed no value.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from filelock import FileLock

from memcost import __version__
from memcost.catalog import stands_in_for
from memcost.io import write_json
from memcost.params import current_values
from memcost.paths import REPO_ROOT, RunPaths, notebook_path

# Packages whose versions change results or costs; recorded in every manifest.
TRACKED_PACKAGES = (
    "memcost",
    "openai",
    "tiktoken",
    "faiss-cpu",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "seaborn",
    "matplotlib",
    "datasets",
    "huggingface_hub",
    "papermill",
    "nbclient",
    "ipykernel",
)


def now_iso(timespec: str = "seconds") -> str:
    return datetime.now(UTC).isoformat(timespec=timespec)


def git_info(root: Path = REPO_ROOT) -> dict[str, Any]:
    """Commit and dirty flag of the repository (``None`` when not a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
    }


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


LOCK = REPO_ROOT / "constraints.txt"  # the versions `make setup` installs (`make lock` re-pins)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_status(lock: Path = LOCK) -> dict[str, Any] | None:
    """How the installed packages compare with the lock: ``matches`` when every installed
    package has its pinned version, else ``differs`` (``{package: {locked, installed}}``) and
    ``not_locked`` (installed packages the lock does not name). With the tracked versions this
    records every version that ran. ``None`` outside a checkout (no lock to compare with)."""
    if not lock.is_file():
        return None
    locked: dict[str, str] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        pin = line.split("#", 1)[0].strip()
        if "==" in pin:
            name, version = pin.split("==", 1)
            locked[_canonical(name)] = version.strip()
    installed = {
        _canonical(d.metadata["Name"]): d.version
        for d in metadata.distributions()
        if d.metadata["Name"]
    }
    differs = {
        name: {"locked": version, "installed": installed[name]}
        for name, version in sorted(locked.items())
        if name in installed and installed[name] != version
    }
    not_locked = sorted(set(installed) - set(locked) - {"memcost", "setuptools", "wheel"})
    return {
        "lock": lock.name,
        "matches": not differs and not not_locked,
        "differs": differs,
        "not_locked": not_locked,
    }


def tool_versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "memcost": __version__,
    }


def _locked(path: Path) -> FileLock:
    """The lock every read-modify-write of ``path`` holds (notebooks of two datasets, and the
    runner, update one manifest)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path.with_name(path.name + ".lock"))


class ManifestDamaged(ValueError):
    """A ``manifest.json`` that is not a JSON object (torn by a crash, or edited by hand)."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path  # the file to move aside


def read_manifest(run: RunPaths) -> dict[str, Any]:
    """The run's manifest (``{}`` before the first write); :class:`ManifestDamaged` naming the
    file when it is not a JSON object. Every reader of a manifest goes through here."""
    if not run.manifest.is_file():
        return {}
    try:
        manifest = json.loads(run.manifest.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ManifestDamaged(
            f"{run.manifest}: corrupt manifest (line {exc.lineno}, column {exc.colno}); "
            "move it aside to start the run's record afresh (its tables and notebooks stay)",
            run.manifest,
        ) from None
    if not isinstance(manifest, dict):
        raise ManifestDamaged(
            f"{run.manifest}: not a JSON object but a {type(manifest).__name__}; move it aside "
            "to start the run's record afresh (its tables and notebooks stay)",
            run.manifest,
        )
    return manifest


def update_manifest(run: RunPaths, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``mutate`` to the manifest under a lock and write it back atomically."""
    with _locked(run.manifest):
        manifest = read_manifest(run)
        if not manifest:
            manifest = {
                "run_name": run.name,
                "created_at": now_iso(),
                "git": git_info(),
                "packages": package_versions(),
                "environment": lock_status(),
                "tools": tool_versions(),
            }
        mutate(manifest)
        manifest["updated_at"] = now_iso()
        write_json(run.manifest, manifest)
        return manifest


def set_entry(run: RunPaths, section: str, key: str, value: Any) -> None:
    """``manifest[section][key] = value`` (e.g. provenance of a raw file, a model snapshot)."""

    def mutate(manifest: dict[str, Any]) -> None:
        manifest.setdefault(section, {})[key] = value

    update_manifest(run, mutate)


def notebook_entries(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's notebook executions; a run by hand records its steps but no runner entry."""
    return dict(manifest.get("notebooks") or manifest.get("steps") or {})


def wall_time_s(manifest: Mapping[str, Any]) -> float:
    """Seconds the run's notebooks were running: the union of their [start, end] spans, so
    datasets that ran side by side count once and the pause before a resume not at all. Ends
    are recorded to the millisecond: to the second, each span overlapped the next."""
    spans = []
    for entry in notebook_entries(manifest).values():
        seconds = float(entry.get("wall_time_s") or 0)
        try:
            end = datetime.fromisoformat(str(entry["finished_at"])).timestamp()
        except (KeyError, ValueError):
            spans.append((0.0, seconds))  # no end recorded: its own length, not overlapped
            continue
        spans.append((end - seconds, end))
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


@dataclass
class Step:
    """One notebook's record in the manifest, opened at its top and closed by its last cell.

    ``finish`` writes the step's metrics to ``<dataset>/metrics/<step>.json`` (or the run's
    ``metrics/`` for run-wide steps) and into the manifest with the wall time.
    """

    run: RunPaths
    name: str
    dataset: str | None
    parameters: dict[str, Any]
    started_at: str = field(default_factory=now_iso)
    _t0: float = field(default_factory=time.perf_counter)

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.name}" if self.dataset else self.name

    def metrics_path(self) -> Path:
        base = self.run.dataset(self.dataset).metrics if self.dataset else self.run.metrics
        return base / f"{self.name}.json"

    def record_llm(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Store the model client's summary (``client.summary()``) under ``manifest["llm"]`` and
        the model snapshots it was served under ``manifest["models"]``; returns the summary.

        The client itself never writes the manifest: the notebook hands its summary over here.
        """
        routes = summary.get("routes", {})

        def mutate(m: dict[str, Any]) -> None:
            m.setdefault("llm", {})[self.key] = summary
            models = m.setdefault("models", {})
            for requested, served in summary.get("model_snapshots", {}).items():
                backend = routes.get(requested, summary.get("backend"))
                entry = models.setdefault(requested, {"backend": backend, "served": []})
                entry["served"] = sorted(set(entry.get("served", [])) | set(served))
                if (paper_model := stands_in_for(requested)) is not None:
                    entry["stands_in_for"] = paper_model  # a successor of a shut-down model

        update_manifest(self.run, mutate)
        return summary

    def finish(self, metrics: dict[str, Any] | None = None) -> Path:
        record = {
            "step": self.name,
            "dataset": self.dataset,
            "parameters": self.parameters,
            "started_at": self.started_at,
            "finished_at": now_iso("milliseconds"),  # spans to the ms: see wall_time_s
            "wall_time_s": round(time.perf_counter() - self._t0, 3),
            "metrics": metrics or {},
        }
        path = self.metrics_path()
        write_json(path, record)
        set_entry(self.run, "steps", self.key, record)
        return path


def notebook_parameters(namespace: dict[str, Any], notebook: str) -> dict[str, Any]:
    """The current values of the parameters ``notebook`` declares, read from ``namespace``
    (a notebook passes ``globals()``), so the record cannot drift from the parameters cell."""
    return current_values(namespace, notebook_path(notebook))


# The keys of a preset file that papermill would hand a notebook as variables, were the file
# given to ``papermill -f`` (the runner reads presets; a notebook declares none of these names)
_PRESET_KEYS = ("description", "include", "datasets", "steps", "per_dataset", "allow_failures")


def _refuse_a_preset(namespace: dict[str, Any]) -> None:
    """A preset passed to ``papermill -f`` arrives as variables the notebook never reads, and the
    notebook would run on its own defaults: refuse it in one line that says what to do."""
    if isinstance(namespace.get("parameters"), dict) and any(k in namespace for k in _PRESET_KEYS):
        raise ValueError(
            "this notebook was given a preset file (papermill -f papermill_params/<name>.yaml): "
            "papermill hands over its keys (description, datasets, parameters) as variables, "
            "and the notebook would run on its own defaults; run the preset with `python -m "
            "memcost run --params <name>`, or give papermill the notebook's parameters "
            "themselves (-p NAME VALUE, or -f a YAML file of NAME: VALUE)"
        )


def start_step(
    run: RunPaths,
    name: str,
    *,
    dataset: str | None,
    parameters: dict[str, Any] | None = None,
    namespace: dict[str, Any] | None = None,
) -> Step:
    """Open a notebook's manifest record (call it right after the parameters cell).

    Pass ``namespace=globals()`` to record the notebook's declared parameters as they are.
    """
    _refuse_a_preset(namespace or {})
    if parameters is None:
        parameters = notebook_parameters(namespace or {}, name)
    run.ensure()
    if dataset:
        run.dataset(dataset).ensure()
    step = Step(run=run, name=name, dataset=dataset, parameters=dict(parameters))
    set_entry(
        run,
        "steps",
        step.key,
        {
            "step": name,
            "dataset": dataset,
            "started_at": step.started_at,
            "parameters": step.parameters,
            "status": "running",
        },
    )
    return step


OFFLINE = "offline"
_CHUNK = 1 << 20


def content_hash(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of what a file holds (``None`` when the file does not exist): a Parquet
    file's column names and rows as JSON, whichever library version wrote it; any other
    file's bytes."""
    path = Path(path)
    if not path.is_file():
        return None
    stat = path.stat()
    return _content_hash(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=256)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
    """:func:`content_hash` of one version of a file (its size and time in the key)."""
    digest = hashlib.sha256()
    if path.endswith(".parquet"):
        table = pq.ParquetFile(path)
        digest.update(json.dumps(table.schema_arrow.names).encode())
        for batch in table.iter_batches():
            for row in batch.to_pylist():
                digest.update(json.dumps(row, default=str, ensure_ascii=False).encode())
                digest.update(b"\n")
        return digest.hexdigest()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def backends_of(client: Any, models: Iterable[str]) -> dict[str, str]:
    """Each model's backend and endpoint as the client routes it (``offline`` without one).

    ``client`` is a :class:`memcost.llm.LLMClient` (duck-typed: this module is a foundation)."""
    out = {}
    for model in models:
        endpoint = client.endpoint_for(model)
        out[model] = OFFLINE if endpoint is None else str(endpoint.identity)
    return out


def fingerprint(
    *,
    stage: str,
    client: Any,
    models: Iterable[str],
    prompts: Iterable[str] = (),
    parameters: Mapping[str, Any] | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """A 16-hex-digit hash of everything that made a stage's output."""
    material = {
        "stage": stage,
        "backends": backends_of(client, sorted(set(models))),
        "prompts": sorted(prompts),
        "parameters": dict(sorted((parameters or {}).items())),
        "inputs": {Path(p).name: content_hash(p) for p in inputs},
    }
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
