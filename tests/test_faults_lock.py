"""One writer per run (fast variant; the two full runs are in test_faults_run.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from memcost.paths import REPO_ROOT
from memcost.run.runner import RunLocked, hold_run


def test_the_lock_names_its_holder_and_goes_with_a_killed_process(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom memcost.run.runner import hold_run\n"
            "with hold_run(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(RunLocked, match=f"in use by pid {holder.pid}"):
            with hold_run(tmp_path):
                pass
        assert time.monotonic() - t0 < 1
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with hold_run(tmp_path):  # the kernel released it with the killed process
        assert f"pid {os.getpid()}" in (tmp_path / ".lock.holder").read_text()


def test_a_run_whose_directory_is_held_exits_4_and_writes_nothing(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"datasets": ["locomo"], "steps": ["00"]}))
    run_dir = tmp_path / "run"
    with hold_run(run_dir):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memcost",
                "run",
                "--params",
                str(preset),
                "--run-name",
                str(run_dir),
                "--quiet",
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 4, done.stderr
    assert f"pid {os.getpid()}" in done.stderr
    assert (
        sorted(p.name for p in run_dir.iterdir()) == [".lock", "run_id"]
        or not (run_dir / "manifest.json").exists()
    )


def test_run_outputs_honour_the_umask(tmp_path):
    """Reports, the manifest and tables are readable by others under umask 022 (0644/0755)."""
    from test_runner import _notebook

    from memcost.run import run_preset

    folder = tmp_path / "nbs"
    folder.mkdir()
    _notebook(
        folder / "05_summarise.ipynb",
        'run_dir: str = ""  # where',
        "from memcost.io import write_csv\nimport pandas as pd\nfrom pathlib import Path\n"
        "write_csv(Path(run_dir, 'tables', 't.csv'), pd.DataFrame({'a': [1]}))",
    )
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"datasets": []}))
    old = os.umask(0o022)
    try:
        run = run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=folder, stream=False)
    finally:
        os.umask(old)
    for path in (
        run.report_md,
        run.report_html,
        run.manifest,
        run.root / "tables" / "t.csv",
        run.root / ".lock",
    ):
        assert oct(path.stat().st_mode & 0o777) == oct(0o644), path
    assert oct(run.root.stat().st_mode & 0o777) == oct(0o755)
