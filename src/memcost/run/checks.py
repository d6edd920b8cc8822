"""The checks around a run's spending (keys, models still served, the bill, prompts that fit) and
how each stage ended (docs/architecture.md, "Checks")."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

import memcost.memory.base as system_files
from memcost import catalog
from memcost import manifest as manifest_mod
from memcost.answers import answer_systems, load_answers, read_judgments, system_kind
from memcost.catalog import UnknownModelError, UnknownPriceError, model_info, price_for
from memcost.costs.estimate import (
    bill,
    estimate_run,
    fitting_change,
    over_budget_line,
    summary_text,
)
from memcost.data.benchmark import read_prepared
from memcost.io import read_json, write_csv, write_json
from memcost.llm.providers import EndpointClient, check_credentials, lookup_key, resolve_endpoint
from memcost.llm.requests import MissingCredentials
from memcost.longctx import ContextOverflow, build_histories, plan_questions
from memcost.memory import facts as memory_files
from memcost.params import (
    backend_of,
    client_option,
    merge_parameters,
    normalise_price_overrides,
    notebook_defaults,
    notebook_parameters,
)
from memcost.paths import NOTEBOOKS_DIR, DatasetPaths, RunPaths
from memcost.run.presets import Preset, PresetError, called_models, preset_files, selected_steps


def preflight_credentials(preset: Preset, notebooks: Mapping[str, Path]) -> None:
    """Stop before anything runs when a backend the preset uses has no key, naming each variable and
    the offline alternative."""
    steps = selected_steps(preset, notebooks)
    if not any("backend" in notebook_parameters(notebooks[s]) for s in steps):
        return
    problems: list[str] = []
    for dataset in preset.datasets or [None]:
        params = preset.parameters_for(dataset)
        try:
            check_credentials(
                str(params.get("backend", "offline")),
                base_url=str(params.get("base_url", "")),
                api_key_env=str(client_option(params, "api_key_env")),
                model_backends=client_option(params, "model_backends") or None,
            )
        except (MissingCredentials, ValueError) as exc:
            # ValueError: an endpoint that cannot be used (custom without base_url, ...)
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        # A shut-down model is refused first: a key would not make it run, the successor would.
        check_lifecycle(preset, notebooks, show_prices=False, ask_provider=False)
        raise PresetError(
            f"{preset.path}: cannot start, a backend is not set up.\n" + "\n".join(problems)
        )
    check_lifecycle(preset, notebooks)  # shut-down or unknown models: stop before any call


def uses_paid_backend(params: Mapping[str, Any]) -> bool:
    backends = {str(params.get("backend", "offline"))}
    backends |= {str(v) for v in (client_option(params, "model_backends") or {}).values()}
    return bool(backends - {"offline"})


def _cell_default(name: str) -> Any:
    """A shared parameter's default as notebook 01 declares it."""
    return notebook_defaults(NOTEBOOKS_DIR / "01_extract_facts.ipynb").get(name)


def check_estimate(
    preset: Preset, run: RunPaths, steps: Collection[str] | None = None
) -> pd.DataFrame | None:
    """After notebook 00: print what the rest of the run will cost, stop before any paid call over
    ``max_cost_usd``; the estimate of a paid run, else ``None``."""
    prepared = {
        name: (run.dataset(name), preset.parameters_for(name))
        for name in preset.datasets
        if run.dataset(name).questions.is_file()
    }
    try:
        estimate = estimate_run(prepared, steps=steps)
    except UnknownPriceError as exc:  # validate_run checks the prices; a model it did not see
        raise PresetError(
            f"{exc}; declare it with -p 'price_overrides={{\"<model>\": 0}}' "
            '(free) or {"<model>": {input: ..., output: ...}} (USD per 1M '
            "tokens)"
        ) from None
    if estimate.empty:
        return None
    write_csv(run.table.estimate_before_run, estimate)
    paid = any(uses_paid_backend(params) for _, params in prepared.values())
    # the budget the notebooks will hold: the preset's, else their parameters cell's default
    budget = preset.parameters.get("max_cost_usd", _cell_default("max_cost_usd"))
    if not paid:  # said first: the bill below is what the calls would cost, not a charge
        print(
            "\noffline backend: nothing is spent. What follows prices this run's calls as the "
            "configured models would charge for them:",
            flush=True,
        )
    text = summary_text(estimate, max_cost_usd=budget if paid else None)
    print(text if not paid else "\n" + text, flush=True)
    if not paid:
        return None
    # the bill with the chosen execution modes (batch, flex) when every stage has its price
    total = bill(estimate)
    if budget is not None and total > float(budget):

        def recompute(overrides: Mapping[str, Any]) -> Any:
            return estimate_run(
                {
                    name: (ds, merge_parameters(params, overrides))
                    for name, (ds, params) in prepared.items()
                },
                steps=steps,
            )

        first = next(iter(prepared.values()))[1]
        raise PresetError(
            over_budget_line(
                preset.path, total, float(budget), fitting_change(recompute, first, float(budget))
            )
        )
    return estimate


LISTING_TIMEOUT_S = 10.0


def paid_models(
    preset: Preset, notebooks: Mapping[str, Path], *, paid_only: bool = True
) -> dict[str, dict[str, Any]]:
    """``{model: the parameters it runs under}`` for every model an API serves (``paid_only=False``:
    every model called)."""
    return {
        model: params
        for model, params in called_models(preset, notebooks).items()
        if not paid_only or backend_of(model, params) != "offline"
    }


def _served_dates(models: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """``GET /v1/models`` of each OpenAI endpoint with a key (``{}`` on any trouble)."""
    served: dict[str, str | None] = {}
    asked: set[str] = set()
    for model, params in models.items():
        backend = backend_of(model, params)
        if backend != "openai":
            continue
        endpoint = resolve_endpoint(
            backend, base_url=str(params.get("base_url", "")),
            api_key_env=str(client_option(params, "api_key_env")),
            primary=backend == params.get("backend"),
            custom_routed="custom" in (client_option(params, "model_backends") or {}).values(),
        )  # fmt: skip
        if endpoint.identity in asked or not lookup_key(endpoint.key_env):
            continue
        asked.add(endpoint.identity)
        try:
            served.update(EndpointClient(endpoint, timeout_s=LISTING_TIMEOUT_S).list_models())
        except Exception as exc:  # noqa: BLE001 - the listing is a second opinion only
            print(f"memcost: could not list models at {endpoint.host} ({exc}); "
                  "using the registry's shutdown dates", flush=True)  # fmt: skip
    return served


def check_lifecycle(
    preset: Preset,
    notebooks: Mapping[str, Path],
    *,
    on: str | date | None = None,
    show_prices: bool = True,
    ask_provider: bool = True,
) -> None:
    """:class:`PresetError` before anything is sent when a paid model is shut down or unknown; a
    warning within :data:`catalog.WARN_DAYS` days (``ask_provider=False``: the registry alone)."""
    day = catalog.today(on)
    models = paid_models(preset, notebooks)
    unknown = []
    for model, params in models.items():
        try:
            model_info(model, client_option(params, "model_capabilities") or None)
        except UnknownModelError as exc:
            unknown.append(str(exc))
    if unknown:
        raise PresetError(f"{preset.path}: cannot start.\n" + "\n".join(unknown))
    # A provider's shutdown ends its own service (and OpenRouter's, which resells it); a server
    # of your own (custom) serves whatever it holds.
    hosted = {m: p for m, p in models.items() if backend_of(m, p) != "custom"}
    statuses = [catalog.status(m, day) for m in hosted]
    if ask_provider and not any(s.shut_down for s in statuses):  # the provider's own dates
        served = _served_dates(hosted)
        statuses = [catalog.status(m, day, served) for m in hosted]
    gone = [s for s in statuses if s.shut_down]
    if gone:
        available = list(preset_files())
        successor = catalog.successor_preset(preset.name, available)
        raise PresetError(catalog.refusal(preset.name, gone, successor, day))
    for s in statuses:
        if s.days_left is not None and s.days_left <= catalog.WARN_DAYS:
            print(f"memcost: warning: {s.describe()} ({s.days_left} days left)", flush=True)
    offline = not any(
        uses_paid_backend(preset.parameters_for(d)) for d in preset.datasets or [None]
    )
    if show_prices:
        print(
            price_lines(paid_models(preset, notebooks, paid_only=False), offline=offline),
            flush=True,
        )


def price_lines(models: Mapping[str, Mapping[str, Any]], *, offline: bool = False) -> str:
    """The prices the run's estimates use, a line per model, overrides said so."""
    what = (
        "prices its estimates use (offline backend: nothing is spent)" if offline else "prices used"
    )
    lines = [f"memcost: {what} (USD per 1M tokens: input / cached input / output):"]
    for model, params in models.items():
        try:
            overrides = normalise_price_overrides(params.get("price_overrides"))
            p = price_for(model, overrides)
        except (UnknownPriceError, ValueError) as exc:
            lines.append(f"  {model}: {exc}")
            continue
        cached = "-" if p.cached_input is None else f"{p.cached_input:g}"
        try:
            table = price_for(model)
        except UnknownPriceError:
            table = None
        whose = ", from price_overrides" if p != table else ""  # an override changed the row
        lines.append(f"  {model}: {p.input:g} / {cached} / {p.output:g} (dated {p.date}{whose})")
    return "\n".join(lines)


LONG_CONTEXT_STEP = "03"


class ContextTooLong(PresetError): ...


def check_context_limits(
    preset: Preset, run: RunPaths, notebooks: Mapping[str, Path], selected: list[str]
) -> None:
    if LONG_CONTEXT_STEP not in selected or LONG_CONTEXT_STEP not in notebooks:
        return
    defaults = notebook_defaults(notebooks[LONG_CONTEXT_STEP])
    for dataset in preset.datasets:
        ds = run.dataset(dataset)
        if not ds.questions.is_file():
            continue
        p = {**defaults, **preset.parameters_for(dataset)}
        kinds = ["long_context"] + [
            kind
            for kind, on in (
                ("rolling_window", p.get("include_rolling_window")),
                ("no_context", p.get("include_no_context")),
                ("oracle", p.get("include_oracle")),
            )
            if on
        ]
        conversations, questions = read_prepared(ds)
        try:
            plan_questions(
                questions,
                build_histories(conversations),
                models=p["models"],
                baseline_models=p.get("baseline_models") or [],
                kinds=kinds,
                window_turns=p.get("window_turns", 10),
                overflow=p.get("overflow", "error"),
                mode=p.get("mode", "open_ended"),
                generation=p.get("generation") or {},
                capabilities=client_option(p, "model_capabilities") or None,
            )
        except ContextOverflow as exc:
            table = exc.fit.to_string(index=False) if exc.fit is not None else ""
            raise ContextTooLong(
                f"{dataset}: {exc}\n{table}\nFound after notebook 00, before anything was "
                "paid for: pass -p overflow=truncate_oldest, or choose models with a larger "
                "window (-p models=[...])."
            ) from None
        except (KeyError, ValueError) as exc:  # a model the registry has no window for
            raise PresetError(f"{dataset}: cannot size the long-context prompts: {exc}") from None


COMPLETE = "complete"
WITH_FAILURES = "complete with failures"
FAILED = "failed"
EXIT_FAILED_ITEMS = 3  # the command's exit code when items failed beyond allow_failures


@dataclass(frozen=True)
class StageStatus:
    """One notebook's items for one dataset, and how many failed."""

    step: str  # notebook stem, e.g. 01_extract_facts
    dataset: str | None
    item: str  # what is counted: segments, answers, judge votes
    total: int
    failed: int
    errors: tuple[str, ...] = ()  # a few distinct error messages

    @property
    def status(self) -> str:
        if self.failed == 0:
            return COMPLETE
        return FAILED if self.failed >= self.total else WITH_FAILURES

    @property
    def fraction(self) -> float:
        return self.failed / self.total if self.total else 0.0

    def line(self) -> str:
        where = self.step + (f" [{self.dataset}]" if self.dataset else "")
        if self.failed == 0:
            return f"{where}: {COMPLETE} ({self.total} {self.item})"
        return (
            f"{where}: {self.status} ({self.failed} of {self.total} {self.item} failed"
            + (f"; {self.errors[0]}" if self.errors else "")
            + ")"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "item": self.item,
            "total": self.total,
            "failed": self.failed,
            "errors": list(self.errors),
        }


class StageFailures(RuntimeError):
    """Items failed beyond ``allow_failures``: the run stops; a resume retries them."""

    def __init__(self, failed: Sequence[StageStatus], allow: float):
        self.failed = list(failed)
        self.run_dir = ""  # filled in by run_preset: what to pass to --run-name to resume
        lines = "\n".join(f"  {s.line()}" for s in self.failed)
        super().__init__(
            f"items failed after all retries (allowed: {allow:.0%} of a stage's items):\n{lines}\n"
            "Nothing failed is recorded as finished; a resume sends the failed items again "
            "(finished calls come from the cache). To go on with these items counted as "
            "failed instead, resume with --allow-failures F (the largest share of a stage's "
            "items that may fail, e.g. 0.5), or set allow_failures in the preset."
        )


def _distinct(errors: Sequence[Any], limit: int = 3) -> tuple[str, ...]:
    out: list[str] = []
    for error in errors:
        text = str(error)[:200]
        if text and text not in out:
            out.append(text)
        if len(out) >= limit:
            break
    return tuple(out)


def _segments(ds: DatasetPaths) -> tuple[int, int, tuple[str, ...]]:
    try:
        segments = memory_files.read_segments(ds)
    except FileNotFoundError:
        return 0, 0, ()
    called = segments.loc[segments["status"].isin(["ok", "failed"])]
    failed = called.loc[called["status"] == "failed"]
    return len(called), len(failed), _distinct(failed["error"].tolist())


def _memories(ds: DatasetPaths) -> tuple[int, int, tuple[str, ...]]:
    """Segments of the paper's memory, and users of the other systems (failed ones in
    ``failed.json``)."""
    total, failed, errors = _segments(ds)
    folders = sorted((ds.memory / "systems").glob("*/")) if (ds.memory / "systems").is_dir() else []
    reasons = list(errors)
    for folder in folders:
        done, bad = system_files.read_done(folder), system_files.read_failed(folder)
        total += len(set(done) | set(bad))
        failed += len(bad)
        reasons += [f"{folder.name}: {r}" for r in bad.values()]
    return total, failed, _distinct(reasons)


def _answers(ds: DatasetPaths, memory: bool) -> tuple[int, int, tuple[str, ...]]:
    total, failed, errors = 0, 0, []
    for system in answer_systems(ds):
        if (system_kind(system) == "memory") != memory:
            continue
        frame = load_answers(ds, system)
        if frame.empty:
            continue
        bad = frame.loc[frame["error"].notna() & (frame["error"].astype(str) != "")]
        total, failed = total + len(frame), failed + len(bad)
        errors += bad["error"].tolist()
    return total, failed, _distinct(errors)


def _votes(ds: DatasetPaths) -> tuple[int, int, tuple[str, ...]]:
    votes = read_judgments(ds)
    asked = votes.loc[votes["backend"] != "rule"]
    failed = asked.loc[asked["unjudged_cause"] == "judge"]
    return len(asked), len(failed), _distinct(failed["reason"].tolist())


COUNTERS = {
    "01": ("segments", lambda ds: _memories(ds)),
    "02": ("answers", lambda ds: _answers(ds, memory=True)),
    "03": ("answers", lambda ds: _answers(ds, memory=False)),
    "04": ("judge votes", lambda ds: _votes(ds)),
}


def stage_status(run: RunPaths, stem: str, dataset: str | None) -> StageStatus | None:
    counter = COUNTERS.get(stem[:2])
    if counter is None or dataset is None:
        return None
    item, count = counter
    ds = run.dataset(dataset)
    total, failed, errors = count(ds)
    if stem[:2] == "01" and (ds.memory / "systems").is_dir():
        item = "segments and users"  # the other memory systems are built user by user
    return StageStatus(stem, dataset, item, total, failed, errors)


def record_status(run: RunPaths, stem: str, dataset: str | None) -> StageStatus | None:
    """Count the stage's failed items into its metrics and the manifest."""
    status = stage_status(run, stem, dataset)
    if status is None:
        return None
    path = run.dataset(dataset).metrics / f"{stem}.json"  # type: ignore[arg-type]
    if path.is_file():
        record = read_json(path)
        record["status"] = status.status
        record["failures"] = status.as_dict()
        write_json(path, record)
    manifest_mod.set_entry(run, "stage_status", f"{dataset}/{stem}", status.as_dict())
    print(status.line(), flush=True)
    return status


def failed_stages(manifest: Mapping[str, Any]) -> list[StageStatus]:
    stages = []
    for key, entry in sorted((manifest.get("stage_status") or {}).items()):
        if entry.get("failed"):
            dataset, _, step = key.rpartition("/")
            errors = tuple(entry.get("errors") or ())
            stages.append(
                StageStatus(step, dataset, entry["item"], entry["total"], entry["failed"], errors)
            )
    return stages


def check_failures(statuses: Sequence[StageStatus], allow_failures: float) -> None:
    over = [s for s in statuses if s.failed and s.fraction > allow_failures]
    if over:
        raise StageFailures(over, allow_failures)
