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
    """A mapping key like ``extract:batch`` with no value: YAML's reading of a missing space."""
    if isinstance(value, dict):
        for k, v in value.items():
            if v is None and isinstance(k, str) and ":" in k and not k.startswith("http"):
                return k
            found = _colon_slip(v)
            if found:
                return found
    return None


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
