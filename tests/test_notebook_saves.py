"""What the runner leaves on disk while a notebook executes: after every cell a whole, readable
notebook (compact while it runs, papermill's indented nbformat at the end)."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat

from memcost.run.execute import execute_notebook

# Cell 2 reads the output notebook as it stands when cell 2 starts: cell 1's output must be in it.
READ_BACK = """
import subprocess
import sys

import nbformat
seen = nbformat.read(output_path, as_version=4)
nbformat.validate(seen)
assert seen.cells[2].outputs[0]["text"] == "first cell ran\\n", seen.cells[2].outputs
assert seen.cells[3].metadata.papermill["status"] == "running"
print("read back")
"""


def test_the_output_notebook_is_whole_after_every_cell(tmp_path):
    source, output = tmp_path / "in.ipynb", tmp_path / "out" / "out.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell('output_path = ""', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell('print("first cell ran")'),
        nbformat.v4.new_code_cell(READ_BACK),
    ]
    nbformat.write(nb, source)

    execute_notebook(source, output, {"output_path": str(output)}, stream=False)

    final = nbformat.read(output, as_version=4)
    # cells: parameters, injected parameters, the two cells above
    assert final.cells[3].outputs[0]["text"] == "read back\n"
    assert output.read_text(encoding="utf-8").startswith('{\n "cells": [')  # nbformat's layout
    assert [p.name for p in output.parent.iterdir()] == ["out.ipynb"]  # no temporary file left


def _format_checkers(skip: bool) -> tuple[list[str], bool]:
    """The formats jsonschema checks in a fresh process, and whether the IRI checker's package
    is marked unavailable there, with or without the runner's skip before the first import."""
    code = (
        "import json, sys\nfrom memcost.run.execute import skip_iri_format_checker\n"
        + ("skip_iri_format_checker()\n" if skip else "")
        + "import jsonschema, nbformat, papermill\n"
        "nbformat.validate(nbformat.v4.new_notebook())\n"
        "print(json.dumps([sorted(jsonschema.FormatChecker.checkers),"
        " sys.modules.get('rfc3987_syntax', 'absent') is None]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    checkers, skipped = json.loads(out.stdout)
    return checkers, skipped


def test_a_process_that_runs_notebooks_leaves_out_the_iri_format_checker_only():
    with_skip, skipped = _format_checkers(skip=True)
    without, _ = _format_checkers(skip=False)
    assert skipped
    assert set(without) - set(with_skip) <= {"iri", "iri-reference"}
    assert "date-time" in with_skip and "email" in with_skip


def test_a_process_that_has_imported_jsonschema_is_left_as_it_is():
    code = (
        "import sys, jsonschema\nfrom memcost.run.execute import skip_iri_format_checker\n"
        "skip_iri_format_checker()\nprint(sys.modules.get('rfc3987_syntax', 'absent') is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_runner_starts_without_scipy_stats():
    # memcost.stats reaches the runner through the cost analysis; scipy.stats (0.6 s) is
    # imported by the two functions that compute with it, not by every run's process
    code = (
        "import sys, memcost.cli.main, memcost.run, memcost.stats\n"
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
