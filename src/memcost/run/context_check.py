"""After notebook 00, before any paid stage: does every long-context prompt fit its model?

Notebook 03 sizes its prompts against the model registry's context windows and stops on a
prompt that does not fit (``overflow: error``), but only after notebooks 01-02 would have been
paid for. :func:`check_context_limits` plans notebook 03's prompts right after notebook 00 (the
same planning code, with notebook 03's parameters; nothing is sent) and stops the run with the
table of what does not fit, or lets ``overflow: truncate_oldest`` apply, before anything is
spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memcost.data import read_prepared
from memcost.longctx import ContextOverflow, build_histories, plan_questions
from memcost.params import notebook_defaults
from memcost.paths import RunPaths
from memcost.run.presets import Preset, PresetError

LONG_CONTEXT_STEP = "03"


class ContextTooLong(PresetError):
    """A long-context prompt exceeds its model's window and ``overflow`` is ``error``."""


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
