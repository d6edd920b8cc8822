"""Command line: ``python -m memcost run --params papermill_params/smoke.yaml``."""

from __future__ import annotations

import argparse
import sys

from memcost import catalog
from memcost.cli import runs as runs_cli
from memcost.cli import workshop as workshop_cli
from memcost.cli.estimate import add_command as add_estimate_command
from memcost.cli.estimate import command_estimate
from memcost.cli.resume import collect_overrides, parse_override, resume_command, split_list
from memcost.llm.batch import BatchJournal
from memcost.manifest import ManifestDamaged, read_manifest
from memcost.paths import RunPaths
from memcost.run.presets import PresetError
from memcost.run.report import write_report
from memcost.run.runner import NotebookFailed, RunLocked, run_preset
from memcost.run.status import EXIT_FAILED_ITEMS, StageFailures

EXIT_LOCKED = 4  # another process is writing the same run directory


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m memcost", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute a preset's notebooks into runs/<run_name>/")
    run.add_argument(
        "--params", required=True, help="preset: a path or a name in papermill_params/"
    )
    run.add_argument(
        "--run-name",
        help="run directory name under runs/ (default: <preset>-<time>); "
        "reuse a name to resume a killed run from its cache",
    )
    run.add_argument("--steps", help="comma-separated notebook numbers, e.g. 00,01,02")
    run.add_argument("--datasets", help="comma-separated datasets, overriding the preset's")
    run.add_argument(
        "-p",
        "--set",
        dest="overrides",
        action="append",
        type=parse_override,
        default=[],
        metavar="KEY=VALUE",
        help="override a notebook parameter (YAML value)",
    )
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
    runs_cli.add_commands(sub)
    workshop_cli.add_command(sub)
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
    for written in write_report(paths):
        print(written)
    return 0


def command_run(args: argparse.Namespace) -> int:
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
    except (PresetError, ManifestDamaged) as exc:
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
    except OSError as exc:  # a full disk, a read-only folder: where, what, and how to go on
        where = exc.filename or "a file of the run"
        run_dir = getattr(exc, "run_dir", None) or args.run_name or "<run>"
        print(
            f"\nerror: cannot write {where}: {exc.strerror or exc}. Free space or make it "
            f"writable, then resume (finished work is kept) with:\n"
            f"  {resume_command(args, run_dir)}",
            file=sys.stderr,
        )
        return 1
    print(f"\nResults are in {paths.root}")
    for label, path in (
        ("manifest", paths.manifest),
        ("report", paths.report_md),
        ("report (HTML)", paths.report_html),
    ):
        if path.exists():
            print(f"  {label}: {path}")
    return 0


def print_resume_hint(args: argparse.Namespace, exc: NotebookFailed) -> None:
    if exc.ename == "DataError" and "could not download" in exc.error:
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
        return runs_cli.command_runs(args)
    if args.command == "workshop":
        return workshop_cli.command_workshop(args)
    if args.command == "clean":
        return runs_cli.command_clean(args)
    return 2
