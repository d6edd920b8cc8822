"""The run manifest (what ran, with what, from which commit, how long), and the fingerprint of the
settings that made each output (docs/architecture.md, "Fingerprints and stage status")."""

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
    """The installed packages against the lock: ``matches``, else ``differs`` and ``not_locked``;
    ``None`` outside a checkout."""
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
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path.with_name(path.name + ".lock"))


class ManifestDamaged(ValueError):
    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path  # the file to move aside


def read_manifest(run: RunPaths) -> dict[str, Any]:
    """The run's manifest (``{}`` before the first write); :class:`ManifestDamaged` naming the file
    when it is not a JSON object."""
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
    """Apply ``mutate`` under a lock and write the manifest back atomically."""
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

    def mutate(manifest: dict[str, Any]) -> None:
        manifest.setdefault(section, {})[key] = value

    update_manifest(run, mutate)


def notebook_entries(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(manifest.get("notebooks") or manifest.get("steps") or {})


def wall_time_s(manifest: Mapping[str, Any]) -> float:
    """The union of the notebooks' spans: datasets side by side count once, a pause before a resume
    not at all."""
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
    """One notebook's record, opened at its top and closed (:meth:`finish`: its metrics file and
    wall time) by its last cell."""

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
        """The client's summary under ``llm`` and the model snapshots it was served under ``models``
        (the client never writes the manifest)."""
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
    return current_values(namespace, notebook_path(notebook))


# The keys of a preset file that papermill would hand a notebook as variables, were the file
# given to ``papermill -f`` (the runner reads presets; a notebook declares none of these names)
_PRESET_KEYS = ("description", "include", "datasets", "steps", "per_dataset", "allow_failures")


def _refuse_a_preset(namespace: dict[str, Any]) -> None:
    """A preset passed to ``papermill -f`` would leave the notebook on its defaults: refuse it in
    one line."""
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
    """Open a notebook's record right after its parameters cell (``namespace=globals()``: its
    declared parameters)."""
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
    """The sha256 of what a file holds (``None``: no file): a Parquet file's columns and rows,
    whatever wrote them; another file's bytes."""
    path = Path(path)
    if not path.is_file():
        return None
    stat = path.stat()
    return _content_hash(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=256)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
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
    """Each model's backend and endpoint as ``client`` routes it."""
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
