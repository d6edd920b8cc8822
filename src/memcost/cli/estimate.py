"""``python -m memcost estimate --params paper_locomo``: a preset's bill before anything runs.

The runner prints the same estimate after notebook 00, from the counted data. This command
needs no data and no key: it counts a run's notebook-00 files when ``--run-name`` names a run
that has them, and otherwise the paper-scale counts (:mod:`memcost.costs.profile`). With
``-p 'client={execution: {extract: batch, judge: batch}}'`` it prints the bill in the chosen
modes beside the all-interactive one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

import pandas as pd

from memcost import paper
from memcost.cli.resume import collect_overrides, parse_override, split_list
from memcost.costs.estimate import (
    bill,
    estimate_counts,
    estimate_dataset,
    fitting_change,
    over_budget_line,
    summary_text,
)
from memcost.costs.profile import profile_note, selected_counts
from memcost.params import merge_parameters
from memcost.paths import RunPaths
from memcost.run.presets import Preset, PresetError, resolve_preset
from memcost.run.runner import discover_notebooks
from memcost.verify import SubsetPlan, plan


def add_command(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser(
        "estimate",
        help="print a preset's estimated bill (no data, no key "
        "needed), interactive and in the chosen execution modes",
    )
    cmd.add_argument(
        "--params", required=True, help="preset: a path or a name in papermill_params/"
    )
    cmd.add_argument("--datasets", help="comma-separated datasets, overriding the preset's")
    cmd.add_argument(
        "--run-name", help="count this run's notebook-00 files instead of the paper-scale counts"
    )
    cmd.add_argument(
        "-p",
        "--set",
        dest="overrides",
        action="append",
        type=parse_override,
        default=[],
        metavar="KEY=VALUE",
        help="override a notebook parameter (YAML value)",
    )


def preset_estimate(
    preset: Preset, run_name: str | None = None, overrides: Mapping[str, Any] | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """The estimate of every dataset of ``preset`` (with ``overrides`` merged in), and one line
    per dataset saying what was counted."""
    frames, notes = [], []
    for name in preset.datasets:
        params = merge_parameters(preset.parameters_for(name), overrides or {})
        ds = RunPaths.from_param(run_name).dataset(name) if run_name else None
        if ds is not None and ds.questions.is_file():
            frames.append(estimate_dataset(ds, params))
            notes.append(f"{name}: counted from {ds.data}")
        else:
            stats, questions = selected_counts(name, params)
            frames.append(estimate_counts(name, stats, questions, params))
            kept = (
                f"; this preset keeps {len(stats):,} conversations and {len(questions):,} "
                "questions of them"
                if len(questions) < paper.TABLE2[name][0]
                else ""
            )
            notes.append(profile_note(name) + kept)
    return pd.concat(frames, ignore_index=True), notes


def verify_plan(preset: Preset) -> SubsetPlan:
    """The subset :func:`memcost.verify.plan` sizes for a one-dataset preset, priced by this
    preset's own estimate (with its models, modes and settings)."""
    (dataset,) = preset.datasets

    def cost(conversations: int, questions: int) -> float:
        overrides = {"sample_conversations": conversations, "sample_questions": questions}
        return bill(preset_estimate(preset, overrides=overrides)[0])

    return plan(dataset, cost)


def command_estimate(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = collect_overrides(args.overrides)
    try:
        preset = resolve_preset(
            args.params,
            discover_notebooks(),
            datasets=split_list(args.datasets),
            overrides=overrides,
        )
        if not preset.datasets:
            raise PresetError(f"{preset.path}: names no dataset to estimate")
        estimate, notes = preset_estimate(preset, args.run_name)
    except (PresetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if offline_preset(preset):
        print(
            f"{preset.name} runs offline (the classical stand-ins answer): it costs $0. What "
            "follows is what its calls would cost with the configured models, at the scale "
            "each line below says (the paper's, unless a run's data was counted):"
        )
    budget = preset.parameters.get("max_cost_usd")
    print(summary_text(estimate, max_cost_usd=budget))
    for note in notes:
        print(f"  {note}")
    if preset.name.startswith("verify_"):
        print(f"  what this subset can show: {verify_plan(preset).describe()}")
    if budget is not None and not offline_preset(preset) and bill(estimate) > float(budget):
        change = fitting_change(
            lambda o: preset_estimate(preset, args.run_name, o)[0],
            preset.parameters_for(preset.datasets[0]),
            float(budget),
        )
        print(
            "this run would stop before its first paid call: "
            + over_budget_line(preset.path, bill(estimate), float(budget), change)
        )
    return 0


def offline_preset(preset: Any) -> bool:
    """Every dataset of the preset runs on the offline backend, every model with it."""
    for name in preset.datasets:
        params = preset.parameters_for(name)
        routes = (params.get("client") or {}).get("model_backends") or {}
        if params.get("backend", "offline") != "offline" or any(
            b != "offline" for b in routes.values()
        ):
            return False
    return True
