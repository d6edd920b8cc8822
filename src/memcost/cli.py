"""``python -m memcost run|report|estimate|runs|clean|workshop|forget-batch``; a stopped run prints
the one command that resumes it."""

from __future__ import annotations

import argparse
import contextlib
import errno
import multiprocessing
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memcost import __version__, catalog, paper
from memcost.answers import system_labels
from memcost.calls import StoreError, read_calls, record_cost, spent_usd
from memcost.catalog import dollars
from memcost.costs.estimate import (
    STEP_STAGES,
    bill,
    estimate_counts,
    estimate_dataset,
    file_counts,
    fitting_change,
    over_budget_line,
    profile_note,
    selected_counts,
    summary_text,
)
from memcost.data.sources import display_path, downloaded, sample_path
from memcost.llm.batch import BatchJournal
from memcost.manifest import (
    ManifestDamaged,
    now_iso,
    read_manifest,
    update_manifest,
    wall_time_s,
)
from memcost.params import merge_parameters
from memcost.paths import RUNS_DIR, RunPaths
from memcost.plugins import plugins
from memcost.run.checks import EXIT_FAILED_ITEMS, StageFailures, check_lifecycle, failed_stages
from memcost.run.presets import (
    Preset,
    PresetError,
    default_steps,
    load_preset,
    resolve_preset,
    selected_steps,
)
from memcost.run.report import RunView, write_report
from memcost.run.report.headline import (
    break_even_brief,
    ledger_replaced,
    out_of_date,
    today_answer,
)
from memcost.run.report.section import briefs
from memcost.run.runner import (
    LOCK_NAME,
    NotebookFailed,
    RunLocked,
    clock,
    discover_notebooks,
    hold_run,
    run_preset,
    study_notebooks,
)
from memcost.verify import SubsetPlan, plan

EXIT_LOCKED = 4  # another process is writing the same run directory


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m memcost", description=(__doc__ or "").replace("``", "")
    )  # the docstring's code markup, not shown in a terminal
    parser.add_argument(
        "--version", action="version", version=f"memcost {__version__} (arXiv:2603.04814)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute a preset's notebooks into runs/<run_name>/")
    run.add_argument(
        "--params", required=True, help="preset: a path or a name in papermill_params/"
    )
    run.add_argument(
        "--run-name",
        help="run directory name under runs/, or a path elsewhere (default: "
        "<preset>-<time>); reuse a name to resume a killed run from its cache",
    )
    run.add_argument("--steps", help="comma-separated notebook numbers, e.g. 00,01,02")
    # the command that resumes this run, for a caller that started it another way (make local:
    # the runner's own command would name a server that is gone once the run ends)
    run.add_argument("--resume-with", help=argparse.SUPPRESS)
    run.add_argument("--datasets", help="comma-separated datasets, overriding the preset's")
    add_overrides(run)
    run.add_argument(
        "--verbose",
        action="store_true",
        help="stream every cell's output (it is always in runs/<name>/logs/)",
    )
    run.add_argument(
        "--quiet",
        action="store_true",
        help="no line per notebook: only warnings, errors and where the results are",
    )
    run.add_argument(
        "--allow-failures",
        type=float,
        default=None,
        metavar="FRACTION",
        help="fraction of a stage's items that may fail after all retries without "
        "stopping the run (default: the preset's allow_failures, else 0)",
    )

    report = sub.add_parser("report", help="(re)write report.md and report.html of a run")
    report.add_argument("run_dir", help="run name under runs/, or a path to a run directory")
    forget = sub.add_parser(
        "forget-batch",
        help="give up a batch the provider no longer knows, so a rerun sends its requests again",
    )
    forget.add_argument("run_dir", help="run name under runs/, or a path to a run directory")
    forget.add_argument("batch_id", help="the batch id the run's error named")
    add_commands(sub)
    add_workshop_command(sub)
    add_estimate_command(sub)
    return parser


def command_forget_batch(args: argparse.Namespace) -> int:
    paths = RunPaths.from_param(args.run_dir)
    try:
        entry = BatchJournal(paths.root).forget(args.batch_id)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    print(
        f"gave up batch {args.batch_id} ({len(entry.keys)} requests of {entry.stage}); "
        "rerun the same command and they are sent again"
    )
    return 0


def command_report(args: argparse.Namespace) -> int:
    paths = RunPaths.from_param(args.run_dir)
    try:
        read_manifest(paths)
    except ManifestDamaged as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not paths.manifest.is_file():
        print(f"error: {paths.root} is not a run directory (no manifest.json)", file=sys.stderr)
        return 2
    if not os.access(paths.root, os.W_OK):
        print(
            f"error: {paths.root} cannot be written (a read-only folder), and the report is "
            f"written into the run: copy it first (cp -r {paths.root} <a folder of yours>) and "
            "run memcost report on the copy",
            file=sys.stderr,
        )
        return 2
    try:
        written = write_report(paths)
    except OSError as exc:
        where = exc.filename or "the report"
        print(f"error: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a damaged file of the run, named in the message
        print(
            f"error: {exc}; resume the run to let its notebook write the file again, or delete "
            "the file and the report leaves its section out",
            file=sys.stderr,
        )
        return 2
    for path in written:
        print(path)
    return 0


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP taken as Ctrl-C: what finished is kept, the rest marked interrupted."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# The stop signals this process received: a signal sent to the whole process group may kill a
# kernel first, and the error that brings to the runner (a reset connection) is its doing.
STOP_SIGNALS: list[int] = []


def _stop_on(signum: int, _frame: Any) -> None:
    # Ctrl-C reaches every process of the terminal's group; a signal sent to the runner alone
    # is passed on to its helper processes (datasets side by side) as the Ctrl-C they expect
    STOP_SIGNALS.append(signum)
    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            os.kill(child.pid, signal.SIGINT)
    raise Stopped(signum)


def command_run(args: argparse.Namespace) -> int:
    if threading.current_thread() is not threading.main_thread():  # signals reach the main one
        return _command_run(args)
    stops = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    STOP_SIGNALS.clear()
    before = {signum: signal.signal(signum, _stop_on) for signum in stops}
    try:
        return _command_run(args)
    finally:  # a caller in the same process (make local, a test) gets its own handlers back
        for signum, handler in before.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _command_run(args: argparse.Namespace) -> int:
    try:
        paths = run_preset(
            args.params,
            run_name=args.run_name,
            steps=split_list(args.steps),
            datasets=split_list(args.datasets),
            overrides=collect_overrides(args.overrides),
            stream=args.verbose,
            quiet=args.quiet,
            allow_failures=args.allow_failures,
        )
    except ManifestDamaged as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(
            "Move it aside, then resume (the run's tables, notebooks and calls stay):\n"
            f"  mv {shlex.quote(str(exc.path))} {shlex.quote(str(exc.path) + '.damaged')} && "
            f"{resume_command(args, args.run_name or str(exc.path.parent))}",
            file=sys.stderr,
        )
        return 2
    except StoreError as exc:  # unwritable, full or damaged: the message says what to do first
        print(f"error: {exc}", file=sys.stderr)
        print(
            f"Then resume with:\n  {resume_command(args, stopped_run(exc, args))}", file=sys.stderr
        )
        return 2
    except PresetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except StageFailures as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        print(
            f"Resume once the cause is fixed (only the failed items are sent again):\n"
            f"  {resume_command(args, exc.run_dir)}",
            file=sys.stderr,
        )
        return EXIT_FAILED_ITEMS
    except NotebookFailed as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        print_resume_hint(args, exc)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: no traceback, but how to go on
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        return _interrupted(args, exc, signum)
    except OSError as exc:  # a full disk, a read-only folder: where, what, and how to go on
        if STOP_SIGNALS:  # a kernel the same signal killed first
            return _interrupted(args, exc, STOP_SIGNALS[-1])
        if exc.errno == errno.ENAMETOOLONG:
            print(
                f"\nerror: a name in {exc.filename} is longer than the file system allows: "
                "choose a shorter --run-name",
                file=sys.stderr,
            )
            return 2
        if exc.filename is None and exc.errno not in FILE_ERRORS:
            print(
                f"\nerror: {exc}. Resume (finished work is kept) with:\n"
                f"  {resume_command(args, stopped_run(exc, args))}",
                file=sys.stderr,
            )
            return 1
        where = exc.filename or "a file of the run"
        print(
            f"\nerror: cannot write {where}: {exc.strerror or exc}. Free space or make it "
            f"writable, then resume (finished work is kept) with:\n"
            f"  {resume_command(args, stopped_run(exc, args))}",
            file=sys.stderr,
        )
        return 1
    print("\n" + "\n".join(result_lines(paths)))
    if any(ds.judged_before_answers() for ds in paths.datasets()):
        again = argparse.Namespace(**{**vars(args), "steps": "04,05", "resume_with": None})
        print(
            f"Judge the new answers with:\n  {resume_command(again, args.run_name or paths.name)}"
        )
    if failed_stages(read_manifest(paths)):  # allowed by allow_failures, but never finished
        print(
            "Resume to send the failed items again:\n  "
            + resume_command(args, args.run_name or paths.name)
        )
    print(f"\nResults are in {paths.root}")
    for label, path in (
        ("manifest", paths.manifest),
        ("report", paths.report_md),
        ("report (HTML)", paths.report_html),
    ):
        if path.exists():
            print(f"  {label}: {path}")
    return 0


def result_lines(paths: RunPaths) -> list[str]:
    """What the run found, in a few lines: accuracy per system, the plugins' lines, today's
    break-even, the bill."""
    try:
        records = read_calls(paths.calls) if paths.calls.is_file() else []
    except StoreError:
        records = []
    offline = bool(records) and all(r.get("backend") == "offline" for r in records)
    lines = []
    for folder in sorted(p for p in paths.root.iterdir() if p.is_dir()):
        table_path = folder / "tables" / "table3_accuracy.csv"
        if not table_path.is_file():
            continue
        table = pd.read_csv(table_path)
        table = table[table["prompt_name"] == table["prompt_name"].iloc[0]]
        # offline, no model answered: the labels carry none of the configured models' names
        labels = system_labels(table["system"], offline=offline)
        scores = "; ".join(
            f"{labels[r.system]}: {100 * r.accuracy:.1f}%" for r in table.itertuples()
        )
        who = (
            "the offline stand-ins (deterministic methods, not LLMs)"
            if offline
            else f"judge {table['judge_model'].iloc[0]}"
        )
        lines.append(f"{folder.name} accuracy, {who}: {scores}")
    # the other notebooks' answers and the run's warnings, as the report's first screen words them
    view = RunView.load(paths)
    found = (
        *briefs(view, leading=False),
        out_of_date(view),
        ledger_replaced(view),
        break_even_brief(view),
        today_answer(view),
        *briefs(view, leading=True),
    )
    lines += [brief.replace("**", "").replace("`", "") for brief in found if brief]
    note = (
        " (offline: no model was called; the report prices the calls as an estimate)"
        if offline
        else " (no model was called)"
        if not records
        else ""
    )
    lines.append(f"bill: ${spent_usd(records):,.2f} spent{note}")
    failed = failed_stages(read_manifest(paths))
    if failed:
        lines.append("FAILED items, left out of these numbers (allow_failures let the run go on):")
        lines += [f"  {stage.line()}" for stage in failed]
    return lines


def plugin_hints(what: str, steps: Iterable[str]) -> list[str]:
    return [
        p.hints[what]
        for p in plugins()
        if what in p.hints and {n.name[:2] for n in p.notebooks} & set(steps)
    ]


def print_resume_hint(args: argparse.Namespace, exc: NotebookFailed) -> None:
    if exc.ename == "DataError" and "could not download" in exc.error:
        hints = plugin_hints("download", run_steps(exc.run_dir))
        if hints:  # files no bundled sample stands in for: download=false alone cannot help
            print(*hints, sep="\n", file=sys.stderr)
            return
        # One line that works as given: the same run on the bundled samples.
        resume = resume_command(args, exc.run_dir, drop=("download",))
        print(
            f"No network? Use the bundled samples instead: {resume} -p download=false",
            file=sys.stderr,
        )
    elif exc.ename == "BudgetExceeded":
        # Not a fault to fix: the run reached the limit it was given.
        resume = resume_command(args, exc.run_dir, drop=("max_cost_usd",))
        print(
            f"The run stopped at its budget (max_cost_usd); what it did is kept. To go "
            f"on, resume with a higher limit (finished calls are not paid again):\n"
            f"  {resume} -p max_cost_usd=<dollars>",
            file=sys.stderr,
        )
    elif exc.ename == "BatchWaitExceeded":
        # Not a fault either: the batches keep running at the provider, recorded in the run.
        print(
            f"The run stopped waiting for the Batch API (max_wait_hours); its batches stay "
            f"recorded in the run directory and are not submitted again. Resume later (a "
            f"larger -p 'client={{max_wait_hours: <hours>}}' waits longer) with:\n"
            f"  {resume_command(args, exc.run_dir)}",
            file=sys.stderr,
        )
    else:
        print(
            f"Fix the cause, then resume (cached model calls are not repeated) with:\n"
            f"  {resume_command(args, exc.run_dir)}",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:  # the day the lifecycle gate and today's prices are checked for, before any command
        catalog.today()
    except ValueError as exc:
        print(f"error: {exc} (unset it for today's date)", file=sys.stderr)
        return 2
    if args.command == "report":
        return command_report(args)
    if args.command == "run":
        return command_run(args)
    if args.command == "forget-batch":
        return command_forget_batch(args)
    if args.command == "estimate":
        return command_estimate(args)
    if args.command == "runs":
        return command_runs(args)
    if args.command == "workshop":
        return command_workshop(args)
    if args.command == "clean":
        return command_clean(args)
    return 2


def add_commands(sub: argparse._SubParsersAction) -> None:
    runs = sub.add_parser(
        "runs", help="list the runs under runs/: name, preset, status, time, cost"
    )
    runs.add_argument("--dir", default=str(RUNS_DIR), help="folder of runs (default: runs/)")
    clean = sub.add_parser("clean", help="delete one run directory under runs/")
    clean.add_argument("name", help="run name under runs/ (as `python -m memcost runs` lists it)")
    clean.add_argument("--dir", default=str(RUNS_DIR), help="folder of runs (default: runs/)")
    clean.add_argument(
        "--yes",
        action="store_true",
        help="delete a run that holds paid model calls too (its calls.sqlite is what a resume "
        "or client: {reuse_runs: [...]} reuses instead of paying again)",
    )


def run_status(manifest: dict[str, Any], root: Path) -> str:
    """``failed`` / ``interrupted`` (``stopped at its budget``), ``ok``, ``partial (steps ...)``,
    ``incomplete``, with ``, N items failed`` where allowed; a run by hand judged by the
    notebooks' own records."""
    entries = manifest.get("notebooks") or {}
    if not entries:  # by hand: each notebook records its own start and finish
        steps = (manifest.get("steps") or {}).values()
        if not steps:
            return "incomplete"
        return "ok (by hand)" if all(s.get("finished_at") for s in steps) else "incomplete"
    for bad in ("failed", "interrupted"):
        ended = [e for e in entries.values() if e.get("status") == bad]
        if ended and all(e.get("ename") == "BudgetExceeded" for e in ended):
            return "stopped at its budget"  # the limit it was given, not a fault
        if ended:
            return bad
    if ((manifest.get("runs") or [{}])[-1]).get("interrupted_by"):
        return "interrupted"  # between two notebooks
    if not (root / "report.md").is_file():
        return "incomplete"
    stems = {key.rsplit("/", 1)[-1] for key in entries}
    if not stems <= {path.stem for path in study_notebooks().values()}:
        return "ok"  # another folder of notebooks (a test's, a fork's): all of them ran
    ran = {stem[:2] for stem in stems}
    missing = _planned(manifest.get("preset") or {}) - ran
    status = f"partial (steps {', '.join(sorted(ran))})" if missing else "ok"
    failed = sum(stage.failed for stage in failed_stages(manifest))
    return f"{status}, {failed} items failed" if failed else status


def _planned(preset: dict[str, Any]) -> set[str]:
    try:
        steps = load_preset(preset["path"]).steps
    except (KeyError, OSError, ValueError):
        steps = list(preset.get("steps") or [])
    return set(steps) or set(default_steps(discover_notebooks()))


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
    wall = wall_time_s(manifest)
    problem = ""
    try:
        calls = read_calls(root)
    except StoreError as exc:  # one damaged store never hides the other runs: this one is marked
        calls, problem = None, str(exc)
    priced = [record_cost(r) for r in calls or []]
    return {
        "name": root.name,
        "preset": preset.get("name") or "(by hand)",
        "backend": params.get("backend") or ("offline" if calls else "—"),
        "status": run_status(manifest, root) if calls is not None else "store of calls damaged",
        "wall": clock(wall),
        "spent": f"${spent_usd(calls):.2f}" if calls is not None else "?",
        "estimate": f"${sum(p for p in priced if p is not None):.2f}" if calls is not None else "?",
        "problem": problem,
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
    for row in rows:
        if row.get("problem"):
            print(f"{row['name']}: {row['problem']}")
    return 0


def command_clean(args: argparse.Namespace) -> int:
    folder = Path(args.dir).resolve()
    named = folder / args.name
    if named.is_symlink():
        print(
            f"error: {args.name} is a link to {named.resolve()}, not a run: remove the link "
            f"with rm {named}, or clean the run it names",
            file=sys.stderr,
        )
        return 2
    target = named.resolve()
    if target.parent != folder or not (target / "manifest.json").is_file():
        print(
            f"error: {args.name} is not a run under {folder} (see `python -m memcost runs`)",
            file=sys.stderr,
        )
        return 2
    paid = _paid_calls(target)
    if paid and not args.yes:
        print(
            f"error: {args.name} holds paid model calls (${paid:,.2f} at list price) that a "
            "resume, or another run with client: {reuse_runs: [...]}, would reuse instead of "
            f"paying again; delete it anyway with: python -m memcost clean {args.name} --yes",
            file=sys.stderr,
        )
        return 2
    try:
        with hold_run(target):  # held while it is deleted: no run can start in it meanwhile
            for running in (p.running for p in plugins() if p.running):
                if said := running(target):
                    print(f"error: {args.name} is in use: {said}", file=sys.stderr)
                    return 2
            kept = class_notebooks(target)
            for path in target.iterdir():
                if path in kept:
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            if not kept:
                target.rmdir()
    except RunLocked:
        holder = target / f"{LOCK_NAME}.holder"
        who = holder.read_text(encoding="utf-8").strip() if holder.is_file() else "a process"
        print(
            f"error: {args.name} is running ({who}): deleting it would lose its work; stop "
            "that run first (Ctrl-C where it runs, or kill its pid), then clean again",
            file=sys.stderr,
        )
        return 2
    if kept:
        print(
            f"deleted the run in {target}; kept the {len(kept)} notebook(s) a class works in "
            f"there ({', '.join(sorted(p.name for p in kept))})"
        )
    else:
        print(f"deleted {target}")
    return 0


def class_notebooks(folder: Path) -> set[Path]:
    """What ``memcost workshop`` put in a folder, and a class edited: its notebooks and the
    ``previous-*`` copies of them. A run writes its notebooks one level down, never there."""
    return {
        path
        for path in folder.iterdir()
        if (path.suffix == ".ipynb" and path.is_file())
        or (path.is_dir() and path.name.startswith("previous-") and any(path.glob("*.ipynb")))
    }


def _paid_calls(run_dir: Path) -> float:
    store = RunPaths(run_dir).calls
    try:
        return spent_usd(read_calls(store)) if store.is_file() else 0.0
    except StoreError:
        return 0.0


def add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p",
        "--set",
        dest="overrides",
        action="append",
        type=parse_override,
        default=[],
        metavar="KEY=VALUE",
        help="override a notebook parameter (YAML value)",
    )


def add_estimate_command(sub: argparse._SubParsersAction) -> None:
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
    add_overrides(cmd)


def preset_estimate(
    preset: Preset,
    run_name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    paper_scale: bool = False,
) -> tuple[pd.DataFrame, list[str]]:
    """The estimate of every dataset of ``preset`` as the runner prints it after notebook 00, and a
    line per dataset on what was counted (a download in ``data/raw/`` as the file it is, unless
    ``paper_scale``)."""
    steps = selected_steps(preset, discover_notebooks())
    if not set(steps) & set(STEP_STAGES):  # none of the notebooks whose calls it prices
        return pd.DataFrame(), []
    frames, notes = [], []
    for name in preset.datasets:
        params = merge_parameters(preset.parameters_for(name), overrides or {})
        ds = RunPaths.from_param(run_name).dataset(name) if run_name else None
        cached = None
        if params.get("download") and not params.get("data_path") and not paper_scale:
            cached = downloaded(
                name,
                revision=str(params.get("revision") or ""),
                longmemeval_file=str(params.get("longmemeval_file") or "s"),
            )
        if ds is not None and ds.questions.is_file():
            frames.append(estimate_dataset(ds, params, steps=steps))
            notes.append(f"{name}: counted from {ds.data}")
        elif params.get("data_path") or not params.get("download") or cached:
            # the file notebook 00 will read (the user's own, the download already made, else
            # the bundled sample), as it will select it
            if cached:
                params = {**params, "data_path": str(cached)}
            stats, questions, turns = file_counts(name, params)
            frames.append(
                estimate_counts(name, stats, questions, params, steps=steps, conversations=turns)
            )
            where = (
                f"the download in {display_path(cached)}"
                if cached
                else params.get("data_path")
                or f"the bundled sample {display_path(sample_path(name))}"
            )
            notes.append(
                f"{name}: counted from {where} ({len(stats):,} "
                f"conversation{'s' * (len(stats) != 1)}, {len(questions):,} questions)"
            )
        else:  # the download, at the paper's scale
            stats, questions = selected_counts(name, params)
            frames.append(estimate_counts(name, stats, questions, params, steps=steps))
            kept = (
                f"; this preset keeps {len(stats):,} conversation{'s' * (len(stats) != 1)} and "
                f"{len(questions):,} questions of them"
                if len(questions) < paper.TABLE2[name][0]
                else ""
            )
            notes.append(profile_note(name) + kept)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), notes


def verify_plan(preset: Preset) -> SubsetPlan:
    """The subset :func:`memcost.verify.plan` sizes for a one-dataset preset, priced by its own
    estimate."""
    (dataset,) = preset.datasets

    def cost(conversations: int, questions: int) -> float:
        overrides = {"sample_conversations": conversations, "sample_questions": questions}
        return bill(preset_estimate(preset, overrides=overrides, paper_scale=True)[0])

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
        estimate, notes = preset_estimate(preset, args.run_name)
    except (PresetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if estimate.empty:
        steps = selected_steps(preset, discover_notebooks())
        which = f"notebook {steps[0]}" if len(steps) == 1 else f"notebooks {', '.join(steps)}"
        print(
            f"{preset.name} runs {which}, which make{'s' * (len(steps) == 1)} none of the calls "
            "this estimate prices (notebooks 01-04's); a notebook that calls a model on its own "
            "(a plugin's) is held to its max_cost_usd"
        )
        if preset.parameters.get("backend", "offline") != "offline":
            budget = preset.parameters.get("max_cost_usd")
            limit = f" ({dollars(float(budget))})" if budget is not None else ""
            print(*(f"{hint}{limit}" for hint in plugin_hints("estimate", steps)), sep="\n")
        return 0
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
    if not offline_preset(preset):  # priced or not, a shut-down model cannot be called
        try:
            check_lifecycle(preset, discover_notebooks(), show_prices=False)
        except PresetError as exc:
            # the refusal's first line speaks of a run that stopped; the estimate keeps its list
            print("this preset cannot run today:\n" + str(exc).split("\n", 1)[-1])
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
    for name in preset.datasets:
        params = preset.parameters_for(name)
        routes = (params.get("client") or {}).get("model_backends") or {}
        if params.get("backend", "offline") != "offline" or any(
            b != "offline" for b in routes.values()
        ):
            return False
    return True


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a YAML value (``-p top_k=10``, ``-p models=[a, b]``)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem", None) or "not a YAML value"
        raise argparse.ArgumentTypeError(
            f"{key.strip()}={value!r}: {where}; quote a list or mapping whole, e.g. "
            f"-p '{key.strip()}=[a, b]'"
        ) from None
    slip = _colon_slip(parsed)
    if slip is not None:
        name, setting = slip.split(":", 1)
        raise argparse.ArgumentTypeError(
            f"{key.strip()}={value!r}: '{slip}' reads as one key with no value; write "
            f"{{{name}: {setting}}} with a space after the colon"
        )
    return key.strip(), parsed


def _colon_slip(value: Any) -> str | None:
    """A key like ``extract:batch`` without a value: YAML's reading of a missing space."""
    if isinstance(value, dict):
        for k, v in value.items():
            if v is None and isinstance(k, str) and ":" in k and not k.startswith("http"):
                return k
            found = _colon_slip(v)
            if found:
                return found
    return None


def collect_overrides(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``-p`` overrides, later ones winning; several ``-p 'client={...}'`` add up."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key == "client" and isinstance(out.get(key), dict) and isinstance(value, dict):
            value = {**out[key], **value}
        out[key] = value
    return out


def split_list(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


# What a disk or a folder says when it cannot take a file.
FILE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


def _interrupted(args: argparse.Namespace, exc: BaseException, signum: int) -> int:
    name = signal.Signals(signum).name
    why = f" (stopped by {name})" if signum != signal.SIGINT else ""
    mark_interrupted(stopped_run(exc, args), name)
    print(
        f"\ninterrupted{why}: the notebooks that finished and every answered call are kept (the "
        "manifest marks the stopped notebooks interrupted). Resume (answered calls are not sent "
        f"again) with:\n  {resume_command(args, stopped_run(exc, args))}",
        file=sys.stderr,
    )
    return 128 + signum  # as the shell reports a process ended by the signal


def stopped_run(exc: BaseException, args: argparse.Namespace) -> str:
    return getattr(exc, "run_dir", None) or args.run_name or "<run>"


def mark_interrupted(run_dir: str, signal_name: str) -> None:
    """The run's latest start ended by a signal, even between two notebooks (where no notebook is
    marked interrupted): ``memcost runs`` says so."""
    try:
        run = RunPaths.from_param(run_dir)
    except ValueError:
        return
    if not run.manifest.is_file():
        return

    def mutate(manifest: dict[str, Any]) -> None:
        if manifest.get("runs"):
            manifest["runs"][-1].update(interrupted_by=signal_name, ended_at=now_iso())

    with contextlib.suppress(OSError, ManifestDamaged):
        update_manifest(run, mutate)


def run_steps(run_dir: str) -> list[str]:
    try:
        starts = read_manifest(RunPaths.from_param(run_dir)).get("runs") or [{}]
    except (OSError, ManifestDamaged):
        return []
    return [str(step) for step in starts[-1].get("steps") or []]


def resume_command(args: argparse.Namespace, run_dir: str, *, drop: tuple[str, ...] = ()) -> str:
    """The command that continues this run as it was started (its steps, datasets, overrides), less
    ``drop``."""
    if getattr(args, "resume_with", None) and not drop:
        return str(args.resume_with)
    parts = ["python", "-m", "memcost", "run", "--params", str(args.params), "--run-name", run_dir]
    if args.steps:
        parts += ["--steps", args.steps]
    if args.datasets:
        parts += ["--datasets", args.datasets]
    if getattr(args, "allow_failures", None) is not None:
        parts += ["--allow-failures", str(args.allow_failures)]
    for key, value in args.overrides:
        if key not in drop:
            text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16)
            parts += ["-p", f"{key}={text.removesuffix(chr(10)).removesuffix('...').strip()}"]
    return shlex.join(parts)


WORKSHOP_DIR = RUNS_DIR / "workshop"


def add_workshop_command(sub: argparse._SubParsersAction) -> None:
    workshop = sub.add_parser(
        "workshop",
        help="copy the notebooks to runs/workshop/ for a class (the committed ones stay clean)",
    )
    workshop.add_argument(
        "--dir", default=str(WORKSHOP_DIR), help="where the copies go (default: runs/workshop/)"
    )
    workshop.add_argument(
        "--fresh",
        action="store_true",
        help="start over: move the old copies to <dir>/previous-<time>/",
    )


# Parameters a workshop copy sets for a live kernel: notebook 07's sliders (a headless run leaves
# them off: nbclient can hang on a cell that displays widgets, jupyter/nbclient#312).
LIVE_PARAMETERS = {"07_costs_today.ipynb": {"interactive_explorer": True}}


def copy_notebooks(target: Path, *, fresh: bool = False) -> tuple[list[str], list[str]]:
    """Copy the study notebooks into ``target``: ``(copied, kept)``."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    target.mkdir(parents=True, exist_ok=True)
    notebooks = list(study_notebooks().values())
    if fresh:
        old = [target / p.name for p in notebooks if (target / p.name).exists()]
        if old:
            aside = target / f"previous-{time.strftime('%Y%m%d-%H%M%S')}"
            aside.mkdir()
            for path in old:
                path.rename(aside / path.name)
    copied, kept = [], []
    for source in notebooks:
        name, destination = source.name, target / source.name
        if destination.exists():
            kept.append(name)
            continue
        if name in LIVE_PARAMETERS:  # what a class in JupyterLab has and a batch run has not
            notebook = load_notebook_node(str(source))
            nbformat.write(parameterize_notebook(notebook, LIVE_PARAMETERS[name]), destination)
        else:
            shutil.copyfile(source, destination)
        copied.append(name)
    return copied, kept


def command_workshop(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    copied, kept = copy_notebooks(target, fresh=args.fresh)
    print(
        f"workshop notebooks in {target}: {len(copied)} copied, {len(kept)} kept as the class "
        "left them" + (" (--fresh starts over)" if kept else "")
    )
    return 0
