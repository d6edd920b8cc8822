"""A stage-like script for the Batch API's kill test: answers N questions of a stage set to
``batch`` through the client, appending one output line per answer (skipping those answered)."""

from __future__ import annotations

import argparse
from pathlib import Path

from memcost.io import JsonlAppender, read_jsonl
from memcost.llm import ChatRequest, make_client
from memcost.paths import RunPaths


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--n", type=int, default=40)
    args = parser.parse_args()
    run = RunPaths(Path(args.run)).ensure()
    out_path = run.root / "answers.jsonl"
    done = {r["question_id"] for r in read_jsonl(out_path, missing_ok=True)}
    requests = [
        ChatRequest(
            model="gpt-5-mini-2025-08-07",
            stage="read",
            prompt_version="worker@v1",
            messages=(("user", f"Question number {i}: answer briefly."),),
            reasoning_effort="low",
            tags={"dataset": "test", "question_id": f"q{i:03d}"},
        )
        for i in range(args.n)
        if f"q{i:03d}" not in done
    ]
    client = make_client(
        run,
        backend="openai",
        base_url=args.url,
        execution={"read": "batch"},
        batch_poll_s=0.05,
        progress=True,
        max_retries=2,
        env_file=Path(args.run) / "absent.env",
    )
    with JsonlAppender(out_path) as out:
        client.chat_many(
            requests,
            desc="worker",
            on_result=lambda result: out.write(
                {
                    "question_id": result.request.tags["question_id"],
                    "answer": result.text,
                    "execution": "batch",
                }
            ),
        )
    client.close()


if __name__ == "__main__":
    main()
