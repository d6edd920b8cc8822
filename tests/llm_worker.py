"""A stage-like script for the subprocess tests: answers N questions through the client and
appends one output line per answer, skipping questions already answered (a stage's resume)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memcost.io import JsonlAppender, read_jsonl
from memcost.llm import ChatRequest, FatalAPIError, make_client, parse_json_object
from memcost.manifest import Step
from memcost.paths import RunPaths


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--backend", default="custom")
    parser.add_argument("--api-key-env", default="")
    parser.add_argument(
        "--fail-401", action="store_true", help="also make one call the server refuses"
    )
    args = parser.parse_args()

    run = RunPaths(Path(args.run)).ensure()
    out_path = run.root / "answers.jsonl"
    done = {r["question_id"] for r in read_jsonl(out_path, missing_ok=True)}
    requests = [
        ChatRequest(
            model="gpt-5-mini-2025-08-07",
            messages=(("user", f"Question number {i}: reply in JSON."),),
            stage="read",
            prompt_version="worker@v1",
            reasoning_effort="low",
            tags={"dataset": "test", "question_id": f"q{i:03d}"},
        )
        for i in range(args.n)
        if f"q{i:03d}" not in done
    ]
    client = make_client(
        run,
        backend=args.backend,
        base_url=args.url,
        api_key_env=args.api_key_env,
        max_concurrency=args.concurrency,
        max_retries=2,
        env_file=Path(args.run) / "absent.env",
        progress=True,
    )
    with JsonlAppender(out_path) as out:

        def write(result):
            out.write(
                {
                    "question_id": result.request.tags["question_id"],
                    "answer": result.text,
                    "parsed": result.parsed,
                    **result.record_fields(),
                }
            )

        client.chat_many(requests, parse=_lenient, on_result=write, desc="worker")
    if args.fail_401:  # the test's server refuses this one with 401
        try:
            client.chat(ChatRequest("gpt-5-mini", (("user", "refused"),), "read", "worker@v1"))
        except FatalAPIError as exc:
            print(f"fatal: {exc}", file=sys.stderr)
    summary = Step(run, "worker", None, {}).record_llm(client.summary())
    print(json.dumps(summary, default=str))
    client.close()


def _lenient(text: str):
    try:
        return parse_json_object(text)
    except ValueError:
        return {"text": text}


if __name__ == "__main__":
    main()
