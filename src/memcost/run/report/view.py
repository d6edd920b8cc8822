"""What the report reads from a run directory (it recomputes nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from memcost import io, paper
from memcost.answers import offline_places, system_labels
from memcost.catalog import canonical_name
from memcost.judge.votes import LETTER_MATCH
from memcost.manifest import read_manifest
from memcost.offline import LEXICAL
from memcost.paper import PAPER_MEMORY, PAPER_SETTINGS
from memcost.paths import DISPLAY_NAMES, DatasetPaths, RunPaths

DATASET_NAMES = DISPLAY_NAMES  # the report's titles are the datasets' display names
# The judge_model of votes no model cast, in words (a model's name stands for itself).
JUDGE_WORDS = {
    LEXICAL: "the offline lexical rule (word overlap, not an LLM)",
    LETTER_MATCH: "the chosen option's letter against the correct one (no judge called)",
}


PAPER_ORDER = ("longmemeval", "locomo", "personamem")  # the order of the paper's tables
# The three systems of the paper's Table 3, as this repository names them.
PAPER_SYSTEMS = (PAPER_MEMORY, "long_context_gpt-5-mini", "long_context_gpt-oss-120b")


def same_setting(got: Any, expected: Any) -> bool:
    """The same value, or another snapshot of the same model."""
    if isinstance(expected, str) and isinstance(got, str):
        return canonical_name(got) == canonical_name(expected)
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(map(same_setting, got, expected))
    return got == expected


def read_csv(path: Path) -> pd.DataFrame | None:
    """A table of the run, ``None`` where missing; a damaged one is an error naming the file."""
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable CSV table ({exc})") from exc


def read_json(path: Path) -> dict[str, Any]:
    return io.read_json(path) if path.is_file() else {}


def step_metrics(ds: DatasetPaths, step: str) -> dict[str, Any]:
    return read_json(ds.metrics / f"{step}.json").get("metrics", {})


def step_parameters(manifest: dict[str, Any], key: str) -> dict[str, Any]:
    return (manifest.get("steps", {}).get(key) or {}).get("parameters", {}) or {}


@dataclass
class DatasetView:
    paths: DatasetPaths
    provenance: dict[str, Any]
    parameters: dict[str, dict[str, Any]]  # notebook stem → its recorded parameters
    metrics: dict[str, dict[str, Any]]  # notebook stem → its metrics

    @property
    def name(self) -> str:
        return self.paths.name

    @property
    def title(self) -> str:
        return DATASET_NAMES.get(self.name, self.name)

    @property
    def origin(self) -> str:
        return str(self.provenance.get("origin") or "unknown")

    def backend(self, step: str) -> str | None:
        value = self.parameters.get(step, {}).get("backend")
        return None if value is None else str(value)

    def full_data(self) -> tuple[bool, str]:
        """The data the paper used: the real file, nothing left out?"""
        if self.origin == "sample":
            return False, "bundled sample data (invented)"
        selection = self.provenance.get("selection") or {}
        if self.name not in paper.TABLE1:
            return False, f"{DISPLAY_NAMES.get(self.name, self.name)}: not a dataset of the paper"
        if selection.get("conversations") != selection.get("of_conversations") or selection.get(
            "questions"
        ) != selection.get("of_questions"):
            return False, "a subset of the dataset (limits or sampling)"
        if self.name == "longmemeval" and "longmemeval_s" not in str(self.provenance.get("path")):
            return False, "not the LongMemEval S file the paper used"
        return True, "the full dataset"

    def paper_settings(self) -> tuple[bool, str]:
        """Notebooks 01-04 with the paper's models (any snapshot) and a real backend?"""
        for step, wanted in PAPER_SETTINGS.items():
            params = self.parameters.get(step)
            if not params:
                return False, f"{step} did not run"
            if params.get("backend") == "offline":
                return False, "offline backend (lexical methods, not LLMs)"
            for key, value in wanted.items():
                got = params.get(key)
                same = same_setting(got, value)
                if not same:
                    return False, f"{step}: {key} = {got!r}, the paper used {value!r}"
        return True, "the paper's models and settings"


@dataclass
class RunView:
    run: RunPaths
    manifest: dict[str, Any]
    datasets: list[DatasetView] = field(default_factory=list)

    @classmethod
    def load(cls, run: RunPaths) -> RunView:
        manifest = read_manifest(run)
        views = []
        for ds in run.datasets():
            steps = {
                key.split("/", 1)[1]: value
                for key, value in manifest.get("steps", {}).items()
                if key.startswith(ds.name + "/")
            }
            metrics = {}
            for path in sorted(ds.metrics.glob("*.json")):
                metrics[path.stem] = read_json(path).get("metrics", {})
            views.append(
                DatasetView(
                    paths=ds,
                    provenance=(manifest.get("provenance") or {}).get(ds.name, {}),
                    parameters={k: (v or {}).get("parameters", {}) or {} for k, v in steps.items()},
                    metrics=metrics,
                )
            )
        order = {name: i for i, name in enumerate(PAPER_ORDER)}
        views.sort(key=lambda v: order.get(v.name, len(order)))
        return cls(run=run, manifest=manifest, datasets=views)

    def dataset(self, name: str) -> DatasetView | None:
        return next((d for d in self.datasets if d.name == name), None)

    @property
    def backends(self) -> list[str]:
        found = []
        for view in self.datasets:
            for step in (
                "01_extract_facts",
                "02_answer_from_memory",
                "03_answer_long_context",
                "04_judge_answers",
            ):
                backend = view.backend(step)
                if backend and backend not in found:
                    found.append(backend)
        return found

    @property
    def run_backends(self) -> list[str]:
        """The backends of the run-wide notebooks that call models."""
        steps = (self.manifest.get("steps") or {}).items()
        found = [(v or {}).get("parameters", {}).get("backend") for k, v in steps if "/" not in k]
        return list(dict.fromkeys(str(b) for b in found if b))

    @property
    def offline(self) -> bool:
        return "offline" in self.backends

    @cached_property
    def systems(self) -> list[str]:
        found: set[str] = set()
        for ds in self.datasets:
            table = read_csv(ds.paths.table.table3)
            if table is not None and "system" in table:
                found.update(str(s) for s in table["system"])
        return sorted(found)

    @cached_property
    def _labels(self) -> dict[str, str]:
        return system_labels(self.systems, offline=self.offline)

    def label(self, system: str) -> str:
        """No model's name on an offline result."""
        return self._labels.get(system) or system_labels([system], offline=self.offline)[system]

    def offline_places_note(self) -> str:
        """Which configured model each numbered offline system stands in for."""
        places = offline_places(self.systems) if self.offline else {}
        if not places:
            return ""
        slots = ", ".join(
            f"*{self.label(s)}* in place of {model}" for s, (model, _n) in places.items()
        )
        return (
            f"Offline, one stand-in answers in the place of each configured model: {slots}. "
            "Their accuracies are the same method's; their costs are its tokens priced as "
            "that model."
        )

    @property
    def cost_parameters(self) -> dict[str, Any]:
        return step_parameters(self.manifest, "05_analyse_costs")

    def run_metrics(self, step: str) -> dict[str, Any] | None:
        """A run-wide notebook's metrics (``None``: it did not finish)."""
        path = self.run.metrics / f"{step}.json"
        return (read_json(path).get("metrics") or {}) if path.is_file() else None
