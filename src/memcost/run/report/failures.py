"""The box that opens the report when anything failed: which stage, how many items, why.

It reads what the runner recorded in the manifest: each stage's status (``stage_status``:
complete, complete with failures, failed, with counts and a few error messages) and each
notebook's execution status. Nothing is shown when everything finished.
"""

from __future__ import annotations

from typing import Any

from memcost.run.report.view import RunView


def failure_lines(manifest: dict[str, Any]) -> list[str]:
    """One line per stage with failed items, and per notebook that did not finish."""
    lines = []
    for key, status in sorted((manifest.get("stage_status") or {}).items()):
        if status.get("failed"):
            why = f": {status['errors'][0]}" if status.get("errors") else ""
            lines.append(
                f"**{key}**: {status['status']}, {status['failed']} of "
                f"{status['total']} {status['item']} failed{why}"
            )
    for key, entry in sorted((manifest.get("notebooks") or {}).items()):
        if entry.get("status") not in (None, "ok"):
            lines.append(f"**{key}**: notebook {entry['status']}")
    return lines


def section_failures(view: RunView) -> list[str]:
    """A quoted box at the top of the report, or nothing when nothing failed."""
    lines = failure_lines(view.manifest)
    if not lines:
        return []
    box = [
        "> **Failures: this run is not complete.** The numbers below leave these items out "
        "(or count them as wrong). Failed items are never recorded as finished: resuming the "
        "run with the same `--run-name` sends them again.",
        ">",
    ]
    box += [f"> - {line}" for line in lines]
    return [*box, ""]
