"""Reading ``-p KEY=VALUE`` overrides, and printing the command that resumes a stopped run."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

import yaml


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a YAML value (``-p top_k=10``, ``-p models=[a, b]``)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem", None) or "not a YAML value"
        raise argparse.ArgumentTypeError(
            f"{key.strip()}={value!r}: {where}; quote a list or mapping whole, e.g. "
            f"-p '{key.strip()}=[a, b]'") from None


def collect_overrides(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``-p`` overrides as one mapping, later ones winning; several ``-p 'client={...}'``
    add up (``-p 'client={cache_mode: off}' -p 'client={max_concurrency: 4}'`` sets both)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key == "client" and isinstance(out.get(key), dict) and isinstance(value, dict):
            value = {**out[key], **value}
        out[key] = value
    return out


def split_list(text: str | None) -> list[str] | None:
    """``"00,01"`` → ``["00", "01"]``; nothing → ``None``."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def resume_command(args: argparse.Namespace, run_dir: str, *, drop: tuple[str, ...] = ()) -> str:
    """The command that continues this run as it was started: with its steps, datasets and
    overrides (without ``-p backend=...`` a resumed API run would go on offline), less ``drop``."""
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
