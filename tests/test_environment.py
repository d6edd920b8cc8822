"""The pinned environment: every package `make setup` installs has its version in the lock,
the Makefile and environment.yml install from it, and a run's manifest says how the installed
packages compare with it."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from importlib import metadata

import pytest

from memcost.manifest import LOCK, lock_status
from memcost.paths import REPO_ROOT


def _pins(path):
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not an exact pin"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


@pytest.mark.parametrize(
    "lock", ["constraints.txt", "constraints-cognee.txt", "constraints-hindsight.txt"]
)
def test_each_lock_pins_exact_versions_and_pip(lock):
    pins = _pins(REPO_ROOT / lock)
    assert "pip" in pins and len(pins) > 20


def test_the_lock_pins_every_declared_dependency_of_make_setup():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + [
        d
        for extra in ("dev", "libraries", "lab", "local")
        for d in project["optional-dependencies"][extra]
    ]
    names = {re.sub(r"[-_.]+", "-", re.split(r"[<>=\[; ]", d)[0]).lower() for d in declared}
    missing = names - set(_pins(LOCK)) - {"memcost"}  # an extra that names another extra
    assert not missing, f"not pinned in constraints.txt: {sorted(missing)}; run make lock"


def test_make_setup_ci_and_conda_install_from_the_lock():
    makefile = (REPO_ROOT / "Makefile").read_text()
    setup = makefile[makefile.index("$(STAMP): pyproject.toml") :].split("\n\n")[0]
    assert "$(LOCK)" in setup.splitlines()[0]  # a changed lock re-installs
    assert setup.count("-c $(LOCK)") == 2  # pip itself, then the package
    assert "LOCK           := constraints.txt" in makefile
    conda = (REPO_ROOT / "environment.yml").read_text()
    assert "- -c constraints.txt" in conda and "python=3.11" in conda


def test_the_manifest_compares_the_installed_packages_with_the_lock(tmp_path):
    pinned = {"numpy": metadata.version("numpy"), "pandas": "0.0.1"}
    lock = tmp_path / "constraints.txt"
    lock.write_text("# header\n" + "".join(f"{k}=={v}\n" for k, v in pinned.items()))
    status = lock_status(lock)
    assert status["matches"] is False
    assert status["differs"] == {
        "pandas": {"locked": "0.0.1", "installed": metadata.version("pandas")}
    }
    assert "scipy" in status["not_locked"] and "numpy" not in status["not_locked"]
    assert lock_status(tmp_path / "absent.txt") is None


def test_this_environment_is_the_locked_one():
    """What CI installs is what the lock says (`make setup` from a clean clone)."""
    status = lock_status()
    assert status["differs"] == {}, (
        f"installed packages differ from constraints.txt: {status['differs']}; run make setup"
    )


def test_make_reproduce_passes_args_to_the_runner():
    # README: make reproduce PRESET=current_locomo ARGS="-p backend=offline"
    # under `make test` this make is a sub-make: without the parent's flags, and no
    # "Entering/Leaving directory" lines
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "reproduce", "PRESET=current_locomo",
         "ARGS=-p backend=offline"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, env=env,
    )  # fmt: skip
    (run,) = [line for line in done.stdout.splitlines() if " memcost run " in line]
    preset = "current_locomo"  # found by name: papermill_params/'s or a plugin's
    assert run.split()[1:] == ["-m", "memcost", "run", "--params", preset, "-p", "backend=offline"]
