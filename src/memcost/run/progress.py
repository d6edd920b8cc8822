"""The runner's log: one line per notebook in the terminal, everything in ``runs/<name>/logs/``.

A smoke run executes 16 notebooks. The terminal shows, for each, its index, what it is, how it
ended, how long it took, the run's elapsed time and an ETA (the mean time of the notebooks done
so far times the number left: a rough guide, since notebooks differ). Cell output (prompts,
tables, prints) goes to the log file always and to the terminal only with ``--verbose``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from memcost.io import SIGN_OF_LIFE


def clock(seconds: float) -> str:
    """``75.2`` → ``"1:15"``; ``3725`` → ``"1:02:05"``."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class SignsOfLife:
    """A text stream that passes on only the whole lines marked as signs of life."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        # A progress bar redraws itself after a carriage return: that ends a line too.
        lines = (self._partial + text).replace("\r", "\n").split("\n")
        self._partial = lines.pop()
        for line in lines:
            start = line.find(SIGN_OF_LIFE)  # a bar may be drawn before it on the same line
            if start >= 0:
                self.stream.write(line[start:] + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


class Tee:
    """A text stream that writes to several streams (any of them may be ``None``)."""

    def __init__(self, *streams: IO[str] | None):
        self.streams = [s for s in streams if s is not None]

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # some libraries ask; the log file is a real file
        return self.streams[-1].fileno() if self.streams else -1


class Progress:
    """Counts the notebooks of one run and writes the concise log.

    ``verbose`` streams cell output to the terminal; ``quiet`` prints nothing per notebook (the
    log file has it all either way).
    """

    def __init__(
        self,
        log_dir: Path,
        total: int,
        *,
        verbose: bool = False,
        quiet: bool = False,
        terminal: IO[str] | None = None,
    ):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"run-{time.strftime('%Y%m%d-%H%M%S')}.log"
        self.log: IO[str] = self.log_path.open("a", encoding="utf-8")
        self.total, self.verbose, self.quiet = total, verbose, quiet
        self.terminal = terminal or sys.stdout
        self.done = 0
        self.durations: list[float] = []
        self.t0 = time.perf_counter()
        # Set while datasets' notebooks run side by side: a notebook's line is printed whole
        # when it ends, and its cell output reaches the log in one piece.
        self.side_by_side = False
        self._lock = threading.RLock()

    def say(self, line: str, *, always: bool = False) -> None:
        """A line for the terminal (unless quiet) and the log."""
        with self._lock:
            self.log.write(line + "\n")
            self.log.flush()
            if always or not self.quiet:
                print(line, file=self.terminal, flush=True)

    def eta(self) -> str:
        left = self.total - self.done
        if not self.durations or left <= 0:
            return ""
        mean = sum(self.durations) / len(self.durations)
        return f", ETA ~{clock(mean * left)}"

    def start(self, label: str) -> None:
        with self._lock:
            self._start(label)

    def _start(self, label: str) -> None:
        if self.side_by_side:
            self.log.write(f"=== started: {label}\n")
            self.log.flush()
            return  # its line is printed whole when it ends
        index = self.done + 1
        line = f"notebook {index} of {self.total}: {label}"
        self.log.write(f"\n=== {line}\n")
        self.log.flush()
        if self.quiet:
            return
        if self.verbose:
            print(f"\n=== {line}", file=self.terminal, flush=True)
        else:
            print(f"{line} ...", end="", file=self.terminal, flush=True)

    def finish(self, label: str, status: str, wall: float) -> None:
        with self._lock:
            self._finish(label, status, wall)

    def _finish(self, label: str, status: str, wall: float) -> None:
        self.done += 1
        self.durations.append(wall)
        elapsed = clock(time.perf_counter() - self.t0)
        tail = f"{status} in {wall:.1f} s (elapsed {elapsed}{self.eta()})"
        self.log.write(f"=== notebook {self.done} of {self.total}: {label}: {tail}\n")
        self.log.flush()
        if self.quiet:
            return
        if self.verbose:
            print(f"=== {label}: {tail}", file=self.terminal, flush=True)
        elif self.side_by_side:
            print(
                f"notebook {self.done} of {self.total}: {label}: {tail}",
                file=self.terminal,
                flush=True,
            )
        else:
            print(f" {tail}", file=self.terminal, flush=True)

    @contextlib.contextmanager
    def cells(self, label: str = "") -> Iterator[IO[str]]:
        """While a notebook runs: the stream its cell output goes to, the log, and the terminal
        if verbose (without it, only the signs of life of long waits:
        :data:`memcost.io.SIGN_OF_LIFE`). Side by side, the output is kept until the notebook
        ends and then written to the log under its label."""
        shown = self.terminal if self.verbose else SignsOfLife(self.terminal)
        if self.side_by_side:
            kept = io.StringIO()
            try:
                yield Tee(None if self.quiet and not self.verbose else shown, kept)  # type: ignore[misc]
            finally:
                with self._lock:
                    self.log.write(f"\n=== cell output of {label}\n{kept.getvalue()}")
                    self.log.flush()
            return
        sink = Tee(None if self.quiet and not self.verbose else shown, self.log)
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):  # type: ignore[type-var]
            yield sink  # type: ignore[misc]

    @contextlib.contextmanager
    def session(self) -> Iterator[Progress]:
        """The whole run: whatever the runner prints also lands in the log; closes the log."""
        out = Tee(sys.stdout, self.log)
        err = Tee(sys.stderr, self.log)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # type: ignore[type-var]
                yield self
        finally:
            self.log.close()


def count_executions(steps: list[str], per_dataset: dict[str, bool], n_datasets: int) -> int:
    """How many notebook executions a run makes: per-dataset steps once per dataset."""
    return sum(n_datasets if per_dataset.get(s) else 1 for s in steps)
