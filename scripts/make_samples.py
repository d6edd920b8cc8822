"""Bundled samples: small synthetic benchmark files in each dataset's exact native layout.

``python scripts/make_samples.py`` (re)writes ``data/sample/``; the output depends only on the seed,
so running it again reproduces the committed files byte for byte (a test checks this).

The conversations are written to exercise what the study measures, at a size the whole
pipeline runs through in seconds:

- facts planted with dates (relative ones too: "last Sunday", "this Saturday"), so temporal
  questions need the session timestamps;
- a preference that changes later ("yoga twice a week" → "three times a week"), so some
  questions need the newer value and a stale memory answers them wrong;
- facts spread over two or three sessions that must be combined;
- small talk and unrelated assistant chats as distractors;
- questions of every category and type, with gold answers: LoCoMo 1-5 (adversarial ones
  with the trap in ``adversarial_answer``), all six LongMemEval types and abstention (``_abs``)
  with ``has_answer`` evidence turns, PersonaMem v2 queries with one correct and three
  incorrect options (one of them the user's *previous* preference where there is one).

Answers are specific (names, amounts, dates), so a system that finds the right turn beats one
that does not, and a no-context baseline can answer almost nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # imported from its file path (the tests), not run as a script
    sys.path.insert(0, str(HERE))

from samplegen.common import SEED, json_bytes  # noqa: E402
from samplegen.locomo import build_locomo  # noqa: E402
from samplegen.longmemeval import build_longmemeval  # noqa: E402
from samplegen.personamem import PERSONAMEM_COLUMNS, build_personamem, csv_bytes  # noqa: E402
from samplegen.personamem32k import (  # noqa: E402
    build_personamem32k,
    contexts_jsonl_bytes,
    questions_csv_bytes,
)

from memcost.io import write_text  # noqa: E402
from memcost.paths import SAMPLE_DIR  # noqa: E402

__all__ = ["PERSONAMEM_COLUMNS", "SEED", "render_files", "write_samples"]

_README = """\
# data/sample/

Small synthetic samples of the benchmarks, in each one's native file layout and field
names, written by `python scripts/make_samples.py` (seeded: running it again reproduces these files
byte for byte; a test checks it). The conversations, people and questions are invented for this
repository; none is taken from the benchmarks.

| folder | native layout | content |
|---|---|---|
| `locomo/locomo10.json` | LoCoMo (snap-research/locomo `data/locomo10.json`) | 2 conversations x 6 sessions, 33 questions in categories 1-5 |
| `longmemeval/longmemeval_s_cleaned.json` | LongMemEval S (cleaned) | 11 questions, 4-6 sessions each, all six types + 2 abstention |
| `longmemeval/longmemeval_oracle.json` | LongMemEval oracle | the same questions, evidence sessions only (unsorted) |
| `personamem/questions_32k.csv` + `shared_contexts_32k.jsonl` | PersonaMem, 32k split (the paper's "PersonaMem v2" rows) | 2 shared contexts, 8 questions at different end indexes, 4 options each |
| `personamem_v2/benchmark/text/benchmark.csv` + `data/chat_history_{32k,128k}/` | PersonaMem-v2 release (an extension) | 3 users, 12 queries, 4 options each |

Planted on purpose: dated facts (also relative: "last Sunday"), a preference that changes later
("yoga twice a week" then "three times a week"), facts to combine across sessions, small talk
and unrelated chats as distractors, adversarial/abstention questions whose premise is false.
"""


def render_files(seed: int = SEED) -> dict[str, bytes]:
    """Every sample file, relative path → bytes; nothing is written."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {"README.md": _README.encode("utf-8")}
    files["locomo/locomo10.json"] = json_bytes(build_locomo(rng))
    s_file, oracle = build_longmemeval(rng)
    files["longmemeval/longmemeval_s_cleaned.json"] = json_bytes(s_file)
    files["longmemeval/longmemeval_oracle.json"] = json_bytes(oracle)
    rows, histories = build_personamem(rng)
    files["personamem_v2/benchmark/text/benchmark.csv"] = csv_bytes(rows)
    for link, history in sorted(histories.items()):
        files[f"personamem_v2/{link}"] = json_bytes(history)
    questions, contexts = build_personamem32k(rng)  # last: the other samples stay as they were
    files["personamem/questions_32k.csv"] = questions_csv_bytes(questions)
    files["personamem/shared_contexts_32k.jsonl"] = contexts_jsonl_bytes(contexts)
    return files


def write_samples(root: Path = SAMPLE_DIR, seed: int = SEED) -> list[Path]:
    """(Re)write the samples under ``root``; each file atomically."""
    written = []
    for relative, payload in render_files(seed).items():
        target = root / relative
        write_text(target, payload.decode("utf-8"))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/make_samples.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=SAMPLE_DIR, help="output folder")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed")
    args = parser.parse_args(argv)
    for path in write_samples(args.out, args.seed):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
