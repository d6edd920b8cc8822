"""Command line: ``python -m memcost run --params papermill_params/smoke.yaml``."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

import yaml


def _parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    return key.strip(), yaml.safe_load(value)


def _split(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def _resume_command(args: argparse.Namespace, run_dir: str, *, drop: tuple[str, ...] = ()) -> str:
    """The command that continues this run as it was started: with its steps, datasets and
    overrides (without ``-p backend=...`` a resumed API run would go on offline), less ``drop``."""
    parts = ["python", "-m", "memcost", "run", "--params", str(args.params), "--run-name", run_dir]
    if args.steps:
        parts += ["--steps", args.steps]
    if args.datasets:
        parts += ["--datasets", args.datasets]
    for key, value in args.overrides:
        if key not in drop:
            text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16)
            parts += ["-p", f"{key}={text.removesuffix(chr(10)).removesuffix('...').strip()}"]
    return shlex.join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memcost", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute a preset's notebooks into runs/<run_name>/")
    run.add_argument("--params", required=True, help="preset: a path or a name in papermill_params/")
    run.add_argument("--run-name", help="run directory name under runs/ (default: <preset>-<time>); "
                     "reuse a name to resume a killed run from its cache")
    run.add_argument("--steps", help="comma-separated notebook numbers, e.g. 00,01,02")
    run.add_argument("--datasets", help="comma-separated datasets, overriding the preset's")
    run.add_argument("-p", "--set", dest="overrides", action="append", type=_parse_override,
                     default=[], metavar="KEY=VALUE", help="override a notebook parameter (YAML value)")
    run.add_argument("--quiet", action="store_true", help="do not stream cell output")

    report = sub.add_parser("report", help="(re)write report.md and report.html of a run")
    report.add_argument("run_dir", help="run name under runs/, or a path to a run directory")

    args = parser.parse_args(argv)
    from memcost.runner import NotebookFailed, PresetError, run_preset

    if args.command == "report":
        from memcost.paths import RunPaths
        from memcost.report import write_report

        paths = RunPaths.from_param(args.run_dir)
        if not paths.manifest.is_file():
            print(f"error: {paths.root} is not a run directory (no manifest.json)", file=sys.stderr)
            return 2
        for written in write_report(paths):
            print(written)
        return 0
    if args.command == "run":
        try:
            paths = run_preset(
                args.params,
                run_name=args.run_name,
                steps=_split(args.steps),
                datasets=_split(args.datasets),
                overrides=dict(args.overrides),
                stream=not args.quiet,
            )
        except PresetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except NotebookFailed as exc:
            print(f"\nerror: {exc}", file=sys.stderr)
            if exc.ename == "BudgetExceeded":
                # Not a fault to fix: the run reached the limit it was given.
                resume = _resume_command(args, exc.run_dir, drop=("max_cost_usd",))
                print(f"The run stopped at its budget (max_cost_usd); what it did is kept. To go "
                      f"on, resume with a higher limit (finished calls are not paid again):\n"
                      f"  {resume} -p max_cost_usd=<dollars>", file=sys.stderr)
            else:
                print(f"Fix the cause, then resume (cached model calls are not repeated) with:\n"
                      f"  {_resume_command(args, exc.run_dir)}", file=sys.stderr)
            return 1
        print(f"\nResults are in {paths.root}")
        for label, path in (("manifest", paths.manifest), ("report", paths.report_md),
                            ("report (HTML)", paths.report_html)):
            if path.exists():
                print(f"  {label}: {path}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
