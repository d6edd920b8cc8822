"""Run-directory layout and the manifest."""

from __future__ import annotations

import json
import threading

import pytest

from memcost import manifest, paths
from memcost.paths import RunPaths


def test_repo_root_is_this_checkout():
    assert (paths.REPO_ROOT / "pyproject.toml").is_file()
    assert (paths.REPO_ROOT / "src" / "memcost" / "paths.py").is_file()


def test_resolve_run_dir(tmp_path):
    assert paths.resolve_run_dir("") == paths.RUNS_DIR / "interactive"
    assert paths.resolve_run_dir("smoke-1") == paths.RUNS_DIR / "smoke-1"
    assert paths.resolve_run_dir(str(tmp_path / "x")) == tmp_path / "x"
    with pytest.raises(ValueError, match="invalid run name"):
        paths.resolve_run_dir("bad name!")


def test_layout(run_paths: RunPaths):
    ds = run_paths.dataset("locomo").ensure()
    assert ds.conversations == run_paths.root / "locomo" / "data" / "conversations.parquet"
    assert ds.answers_file("memory").name == "answers_memory.jsonl"
    assert run_paths.datasets() == []  # no questions.parquet yet
    ds.questions.write_bytes(b"")
    assert [d.name for d in run_paths.datasets()] == ["locomo"]


def test_manifest_records_git_packages_and_steps(run_paths: RunPaths):
    step = manifest.start_step(
        run_paths,
        "00_prepare_data",
        dataset="locomo",
        parameters={"dataset": "locomo", "limit_questions": 0},
    )
    metrics_path = step.finish({"n_questions": 12})
    data = json.loads(run_paths.manifest.read_text())
    assert data["git"]["commit"] is None or len(data["git"]["commit"]) == 40
    assert data["packages"]["tiktoken"]
    entry = data["steps"]["locomo/00_prepare_data"]
    assert entry["metrics"] == {"n_questions": 12}
    assert entry["wall_time_s"] >= 0
    assert json.loads(metrics_path.read_text())["parameters"]["dataset"] == "locomo"
    assert metrics_path == run_paths.root / "locomo" / "metrics" / "00_prepare_data.json"


def test_manifest_concurrent_updates_are_not_lost(run_paths: RunPaths):
    def worker(i: int) -> None:
        for j in range(10):
            manifest.set_entry(run_paths, "provenance", f"file-{i}-{j}", {"sha256": str(i * j)})

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(manifest.read_manifest(run_paths)["provenance"]) == 40


def test_corrupt_manifest_is_a_clear_error(run_paths: RunPaths):
    run_paths.manifest.write_text("{not json")
    with pytest.raises(ValueError, match="corrupt manifest"):
        manifest.read_manifest(run_paths)


def test_run_id_is_made_once_and_kept(tmp_path):
    run = RunPaths(tmp_path / "run")
    first = run.run_id()
    assert len(first) == 32 and int(first, 16) >= 0
    assert run.run_id_file.read_text() == first + "\n"
    assert RunPaths(tmp_path / "run").run_id() == first  # a resumed run keeps its id
    assert not list(run.root.glob(".run_id.*"))  # no temporary file left behind
    assert not run.manifest.exists()  # the id does not live in the manifest


def test_a_recreated_run_gets_a_new_id(tmp_path):
    run = RunPaths(tmp_path / "run")
    first = run.run_id()
    for path in run.root.iterdir():
        path.unlink()
    run.root.rmdir()
    assert run.run_id() != first


def test_processes_starting_together_agree_on_the_run_id(tmp_path):
    run = RunPaths(tmp_path / "run")
    seen: list[str] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        seen.append(run.run_id())

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and len(set(seen)) == 1


def test_a_preset_handed_to_papermill_is_refused_before_the_notebook_runs_on_its_defaults(
    tmp_path,
):
    """``papermill nb.ipynb out.ipynb -f papermill_params/smoke.yaml`` passes the preset's keys
    as variables (papermill only warns "Passed unknown parameter"); the notebook stops in one
    line that says how to run a preset, before it writes anything."""
    import papermill
    import yaml

    from memcost.paths import NOTEBOOKS_DIR, PARAMS_DIR

    preset = yaml.safe_load((PARAMS_DIR / "smoke.yaml").read_text(encoding="utf-8"))
    run_dir = tmp_path / "run"
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        papermill.execute_notebook(
            str(NOTEBOOKS_DIR / "00_prepare_data.ipynb"),
            str(tmp_path / "out.ipynb"),
            parameters={**preset, "run_dir": str(run_dir)},
            progress_bar=False,
            kernel_name="python3",
        )
    assert caught.value.ename == "ValueError"
    assert caught.value.evalue.startswith(
        "this notebook was given a preset file (papermill -f papermill_params/<name>.yaml)"
    )
    assert "python -m memcost run --params <name>" in caught.value.evalue
    assert not (run_dir / "manifest.json").exists()
    # the notebook's own parameters, and a notebook that later names a variable `steps`, pass
    namespace = {"parameters": None, "steps": 3}
    manifest._refuse_a_preset(namespace)
