"""The bundled-sample run computes exactly what it computed before: every table, answer,
judgment and hand-over file of the smoke run matches the golden record byte for byte (latencies
and timestamps aside). A change that speeds the code up must not change what it computes."""

from __future__ import annotations

import json
import os

from golden_digest import GOLDEN, run_digest


def test_the_bundled_sample_run_computes_what_it_did_before(smoke_run):
    got = run_digest(smoke_run.root)
    if os.environ.get("MEMCOST_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    changed = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    assert len(got) > 90  # tables, answers, judgments and data of the three datasets
    assert not changed, (
        f"{len(changed)} output(s) of the bundled-sample run changed: {changed[:12]}. If the "
        "change is intended, record it: MEMCOST_UPDATE_GOLDEN=1 .venv/bin/python -m pytest "
        "tests/test_byte_identity.py"
    )
