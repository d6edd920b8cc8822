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
from memcost.run.lock import RunLocked, hold_run


def test_the_lock_names_its_holder_and_goes_with_a_killed_process(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom memcost.run.lock import hold_run\n"
         "with hold_run(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)",
         str(tmp_path)], stdout=subprocess.PIPE, text=True)
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
        assert f"pid {os.getpid()}" in (tmp_path / ".lock").read_text()


def test_a_run_whose_directory_is_held_exits_4_and_writes_nothing(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"datasets": ["locomo"], "steps": ["00"]}))
    run_dir = tmp_path / "run"
    with hold_run(run_dir):
        done = subprocess.run(
            [sys.executable, "-m", "memcost", "run", "--params", str(preset), "--run-name",
             str(run_dir), "--quiet"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    assert f"pid {os.getpid()}" in done.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == [".lock", "run_id"] or \
        not (run_dir / "manifest.json").exists()
