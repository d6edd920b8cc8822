"""The local OpenAI-compatible server answering the study's stages, for runs by hand.

``cd tests && python -m fake_api --port 8000`` serves :func:`fake_api.stages.stage_server`;
point a run at it with ``-p backend=custom -p base_url=http://127.0.0.1:8000/v1``. (The plain
server, answering every prompt the same way, is ``python -m fake_api.openai_server``.) It lives
with the tests, outside the installed package.
"""

from __future__ import annotations

import argparse

from fake_api.openai_server import serve
from fake_api.stages import stage_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fake_api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument(
        "--rate-limit",
        action="append",
        default=[],
        metavar="MODEL=RPM,TPM",
        help="limit a model as an account would (e.g. gpt-5-mini=500,500000; "
        "0 leaves that one unlimited); replies carry the x-ratelimit-* headers",
    )
    args = parser.parse_args(argv)
    server = stage_server(latency_s=args.latency)
    server.host, server.port = args.host, args.port
    for spec in args.rate_limit:
        model, _, numbers = spec.partition("=")
        try:
            rpm, tpm = (float(n) for n in numbers.split(","))
        except ValueError:
            parser.error(
                f"--rate-limit {spec!r}: expected MODEL=RPM,TPM, e.g. gpt-5-mini=500,500000"
            )
        server.limits.set(model, rpm=rpm or None, tpm=tpm or None)
    serve(server)


if __name__ == "__main__":
    main()
