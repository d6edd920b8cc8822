"""``python -m memcost runs`` lists the run directories; ``python -m memcost clean <name>``
deletes one.

The list reads each run's ``manifest.json`` and store of calls only: name, preset, backend,
status (from the notebooks' recorded statuses), wall time, dollars spent and the list-price
estimate of the same calls (what an offline run's tokens would cost with the configured models).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from memcost.calls import read_calls, record_cost, spent_usd
from memcost.manifest import ManifestDamaged, read_manifest
from memcost.paths import RUNS_DIR, RunPaths
from memcost.run.presets import OPT_IN_STEPS, load_preset
from memcost.run.runner import CANONICAL_NOTEBOOKS, clock, discover_notebooks


def add_commands(sub: argparse._SubParsersAction) -> None:
    runs = sub.add_parser(
        "runs", help="list the runs under runs/: name, preset, status, time, cost"
    )
    runs.add_argument("--dir", default=str(RUNS_DIR), help="folder of runs (default: runs/)")
    clean = sub.add_parser("clean", help="delete one run directory under runs/")
    clean.add_argument("name", help="run name under runs/ (as `python -m memcost runs` lists it)")
    clean.add_argument("--dir", default=str(RUNS_DIR), help="folder of runs (default: runs/)")


def run_status(manifest: dict[str, Any], root: Path) -> str:
    """What actually ran: ``failed`` / ``interrupted`` if a notebook ended so; ``ok`` when every
    notebook the preset names ran (and the report was written); ``partial (steps ...)`` when the
    runner ran only some of them; ``incomplete`` when one started and did not finish. A run of
    notebooks opened by hand (no runner) is judged by the notebooks' own records."""
    entries = manifest.get("notebooks") or {}
    if not entries:  # by hand: each notebook records its own start and finish
        steps = (manifest.get("steps") or {}).values()
        if not steps:
            return "incomplete"
        return "ok (by hand)" if all(s.get("finished_at") for s in steps) else "incomplete"
    statuses = [e.get("status") for e in entries.values()]
    for bad in ("failed", "interrupted"):
        if bad in statuses:
            return bad
    if not (root / "report.md").is_file():
        return "incomplete"
    stems = {key.rsplit("/", 1)[-1] for key in entries}
    if not stems <= {name.removesuffix(".ipynb") for name in CANONICAL_NOTEBOOKS}:
        return "ok"  # another folder of notebooks (a test's, a fork's): all of them ran
    ran = {stem[:2] for stem in stems}
    missing = _planned(manifest.get("preset") or {}) - ran

    return f"partial (steps {', '.join(sorted(ran))})" if missing else "ok"


def _planned(preset: dict[str, Any]) -> set[str]:
    """The steps the preset itself runs (the manifest records those a --steps run chose)."""
    try:
        steps = load_preset(preset["path"]).steps
    except (KeyError, OSError, ValueError):
        steps = list(preset.get("steps") or [])
    return set(steps) or {s for s in discover_notebooks() if s not in OPT_IN_STEPS}


def _wall(manifest: dict[str, Any]) -> float:
    entries = (manifest.get("notebooks") or {}).values() or (manifest.get("steps") or {}).values()
    return sum(float(e.get("wall_time_s") or 0) for e in entries)


def summarise(root: Path) -> dict[str, Any] | None:
    """One row of the list, or ``None`` for a folder that is not a run."""
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file():
        return None
    try:
        manifest = read_manifest(RunPaths(root))
    except (OSError, ManifestDamaged):
        return {
            "name": root.name,
            "preset": "?",
            "backend": "?",
            "status": "unreadable",
            "wall": "",
            "spent": "",
            "estimate": "",
        }
    preset = manifest.get("preset") or {}
    params = preset.get("parameters") or {}
    wall = _wall(manifest)
    calls = read_calls(root)
    priced = [record_cost(r) for r in calls]
    return {
        "name": root.name,
        "preset": preset.get("name") or "(by hand)",
        "backend": params.get("backend") or ("offline" if calls else "—"),
        "status": run_status(manifest, root),
        "wall": clock(wall),
        "spent": f"${spent_usd(calls):.2f}",
        "estimate": f"${sum(p for p in priced if p is not None):.2f}",
    }


def list_runs(folder: Path) -> list[dict[str, Any]]:
    rows = [summarise(p) for p in sorted(folder.iterdir()) if p.is_dir()] if folder.is_dir() else []
    return [r for r in rows if r is not None]


COLUMNS = (
    ("name", "name"),
    ("preset", "preset"),
    ("backend", "backend"),
    ("status", "status"),
    ("wall", "wall time"),
    ("spent", "spent"),
    ("estimate", "list-price estimate"),
)


def format_table(rows: list[dict[str, Any]]) -> str:
    widths = {k: max([len(title)] + [len(str(r[k])) for r in rows]) for k, title in COLUMNS}
    lines = ["  ".join(title.ljust(widths[k]) for k, title in COLUMNS)]
    lines += ["  ".join(str(r[k]).ljust(widths[k]) for k, _ in COLUMNS) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def command_runs(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    rows = list_runs(folder)
    if not rows:
        print(f"no runs in {folder}")
        return 0
    print(format_table(rows))
    return 0


def command_clean(args: argparse.Namespace) -> int:
    folder = Path(args.dir).resolve()
    target = (folder / args.name).resolve()
    if target.parent != folder or not (target / "manifest.json").is_file():
        print(
            f"error: {args.name} is not a run under {folder} (see `python -m memcost runs`)",
            file=sys.stderr,
        )
        return 2
    server = running_server(target)
    if server is not None:
        pid, pgdata = server
        print(
            f"error: {args.name} is in use: its PostgreSQL server (pid {pid}) is running on "
            f"{pgdata}; stop it first (pg_ctl -D {pgdata} stop), then clean again",
            file=sys.stderr,
        )
        return 2
    shutil.rmtree(target)
    print(f"deleted {target}")
    return 0


def running_server(run_dir: Path) -> tuple[int, Path] | None:
    """``(pid, pgdata)`` of a live PostgreSQL server on the run's private data directory
    (``<run>/pgvector/pgdata/postmaster.pid`` names a process that exists), else ``None``."""
    pgdata = run_dir / "pgvector" / "pgdata"
    try:
        pid = int((pgdata / "postmaster.pid").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)  # signal 0: is there such a process (ours or another user's)?
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid, pgdata
