"""Benchmark of the model-call client against the local OpenAI-compatible server.

1. 200 requests to a server that takes 50 ms per answer: sequential vs ``max_concurrency=16``
   (target: at least 8x faster).
2. Replaying 10,000 cached requests (target: under 5 s): into a new run directory (every call
   gets a ``cached=true`` ledger record) and into the same run again (the ledger checkpoint: no
   new records).

The server runs in its own process, as a real API would, so its work does not compete with the
client for the interpreter. Run: ``.venv/bin/python benchmarks/bench_client.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memcost.llm import ChatRequest, make_client
from memcost.paths import RunPaths

N_LATENCY = 200
N_REPLAY = 10_000
LATENCY_S = 0.05


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_api.openai_server", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1] / "tests",  # the server lives with the tests
    )
    url = proc.stdout.readline().strip()  # type: ignore[union-attr]
    if not url.startswith("http"):
        proc.kill()
        raise RuntimeError("the local server did not start")
    return proc, url


def requests(n: int, tag: str) -> list[ChatRequest]:
    return [
        ChatRequest(
            "gpt-5-mini-2025-08-07",
            (
                ("system", "You answer questions about a user's history."),
                ("user", f"[{tag}] question {i}?"),
            ),
            "read",
            "bench@v1",
            reasoning_effort="medium",
            tags={"dataset": "bench", "question_id": f"{tag}-{i}"},
        )
        for i in range(n)
    ]


def timed(label: str, fn) -> float:
    t0 = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - t0
    print(f"  {label:<44} {elapsed:8.2f} s")
    return elapsed


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="memcost-bench-"))
    common = dict(backend="custom", progress=False, env_file=tmp / "none.env")

    print(f"1. {N_LATENCY} requests, server latency {LATENCY_S * 1000:.0f} ms")
    server, url = start_server(LATENCY_S)
    try:
        make_client(RunPaths(tmp / "warm"), base_url=url, cache_mode="off", **common).chat_many(
            requests(4, "warm")
        )
        seq_client = make_client(
            RunPaths(tmp / "seq"), base_url=url, cache_mode="off", max_concurrency=1, **common
        )
        par_client = make_client(
            RunPaths(tmp / "par"), base_url=url, cache_mode="off", max_concurrency=16, **common
        )
        seq = timed(
            "sequential (max_concurrency=1)", lambda: seq_client.chat_many(requests(N_LATENCY, "s"))
        )
        par = timed(
            "parallel (max_concurrency=16)", lambda: par_client.chat_many(requests(N_LATENCY, "p"))
        )
        ideal = N_LATENCY / 16 * LATENCY_S
        print(f"  speed-up {seq / par:.1f}x (target >= 8x; the latency floor is {ideal:.2f} s)")
    finally:
        server.kill()

    print(f"2. replay of {N_REPLAY:,} cached requests")
    server, url = start_server(0.0)
    work = requests(N_REPLAY, "r")
    try:
        fill = make_client(RunPaths(tmp / "fill"), base_url=url, max_concurrency=16, **common)
        filled = timed("fill the cache (server without latency)", lambda: fill.chat_many(work))
        print(f"  ({N_REPLAY / filled:,.0f} requests/s through the SDK)")
    finally:
        server.kill()  # from here on nothing may reach a server
    reuse = [str(tmp / "fill")]
    other = make_client(RunPaths(tmp / "replay"), base_url=url, reuse_runs=reuse, **common)
    t_new = timed("replay into a new run (cached records)", lambda: other.chat_many(work))
    same = make_client(RunPaths(tmp / "fill"), base_url=url, **common)
    t_same = timed("replay into the same run (checkpoint)", lambda: same.chat_many(work))
    assert other.stats.cache_hits == N_REPLAY and other.stats.api_calls == 0
    assert same.stats.replayed == N_REPLAY
    rates = f"{N_REPLAY / t_new:,.0f} and {N_REPLAY / t_same:,.0f}"
    print(f"  {rates} cached requests/s (target: 10,000 in < 5 s)")

    ok = seq / par >= 8 and max(t_new, t_same) < 5
    print("targets met" if ok else "TARGETS MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
