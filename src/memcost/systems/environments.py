"""The environments of the memory libraries that cannot share this repository's (cognee needs
pandas < 3; Hindsight sqlalchemy < 2.1 and a server of its own): each is a virtual environment
beside ``.venv`` (``make setup-cognee``, ``make setup-hindsight``) or an interpreter named by an
environment variable, asked for its library's version before a run starts, and given an
environment without any key when the library runs there as a child process.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from memcost.paths import REPO_ROOT

# Variables a child library process never gets: the gateway holds the client's key.
_KEY_NAMES = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


@dataclass(frozen=True)
class LibraryEnvironment:
    """Where one library lives and which of its versions the adapter supports."""

    system: str  # the memory system's name, e.g. "cognee"
    package: str  # the distribution whose version counts, e.g. "cognee"
    pinned: str  # what make installs
    supported: tuple[str, str]  # [low, high)
    venv: str  # e.g. ".venv-cognee"
    python_env: str  # the variable naming another interpreter
    why: str  # why it has an environment of its own, for the error message
    # dependencies that must stay below a version there: {package: (version, why)}
    below: tuple[tuple[str, str, str], ...] = ()

    @property
    def setup(self) -> str:
        return f"make setup-{self.system}"

    def python(self) -> Path:
        named = os.environ.get(self.python_env)
        return Path(named) if named else REPO_ROOT / self.venv / "bin" / "python"

    def version(self) -> str:
        """The library's version there, or ``ValueError`` in one line when the environment is
        missing, lacks the library, or holds a version outside the supported range."""
        python = self.python()
        if not python.is_file():
            raise ValueError(
                f"memory system {self.system} runs in its own environment ({self.why}): "
                f"{self.setup}, or set {self.python_env} to a Python with "
                f"{self.package}=={self.pinned}"
            )
        version = _installed(python, self.package)
        if version is None:
            raise ValueError(
                f"memory system {self.system}: {python} has no {self.package} package; "
                f"{self.setup} installs {self.package}=={self.pinned} there"
            )
        low, high = (_parts(v) for v in self.supported)
        if not low <= _parts(version) < high:
            raise ValueError(
                f"{self.package} {version} is not supported: the adapter supports "
                f">={self.supported[0]},<{self.supported[1]} ({self.pinned} pinned; "
                f"{self.setup})"
            )
        for package, limit, why in self.below:
            found = _installed(python, package)
            if found is not None and _parts(found) >= _parts(limit):
                raise ValueError(
                    f"{package} {found} in {self.system}'s environment: {why}; "
                    f"{self.setup} installs {package}<{limit}"
                )
        return version


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


@functools.lru_cache(maxsize=8)
def _installed(python: Path, package: str) -> str | None:
    done = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def keyless_environ() -> dict[str, str]:
    """This process's environment without anything named like a key, token or secret."""
    return {k: v for k, v in os.environ.items() if not _KEY_NAMES.search(k)}


def user_slot(dataset: str, user: str) -> str:
    """A library's name for one user's memory (a dataset, a bank): readable, and unique
    however the user id is spelled."""
    safe = re.sub(r"[^A-Za-z0-9]", "_", user)[:40]
    return f"{dataset}_{safe}_{hashlib.sha1(user.encode()).hexdigest()[:8]}"
