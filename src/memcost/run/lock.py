"""One writer per run: an exclusive OS lock on the run directory for the whole run.

Two processes writing the same run directory would both pay for every uncached call, each
under its own budget, and append duplicate ledger records and answers. :func:`hold_run` takes
``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``<run>/.lock`` (the kernel releases it when the process
exits or is killed: there is no stale pid file to clean up) and writes the holder's pid and
command into the file, so a second run with the same name stops at once and names it.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".lock"


class RunLocked(RuntimeError):
    """Another process is writing this run directory."""


def lock_path(root: Path) -> Path:
    return Path(root) / LOCK_NAME


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    return text or "another process"


@contextmanager
def hold_run(root: Path) -> Iterator[None]:
    """Hold the run directory's lock while the body runs; :class:`RunLocked` if it is taken."""
    path = lock_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(
                f"run directory {root} is in use by {_holder(path)}; one run writes a run "
                "directory at a time. Wait for it to finish (or stop that process), or choose "
                "another --run-name."
            ) from None
        os.ftruncate(fd, 0)
        command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:6]))
        os.write(fd, f"pid {os.getpid()} ({command})\n".encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
