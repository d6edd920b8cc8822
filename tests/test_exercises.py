"""Every notebook asks the reader to try something, with its solution hidden but runnable."""

from __future__ import annotations

import nbformat
import pytest

from memcost.run.runner import discover_notebooks

NOTEBOOKS = {step: path for step, path in discover_notebooks().items() if step != "06"}


@pytest.mark.parametrize("step", sorted(NOTEBOOKS))
def test_each_notebook_has_an_exercise_with_a_hidden_solution(step):
    nb = nbformat.read(NOTEBOOKS[step], as_version=4)
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert solutions, f"{NOTEBOOKS[step].name} has no solution cell"
    for cell in solutions:
        assert cell.cell_type == "code"
        assert cell.metadata.get("jupyter", {}).get("source_hidden") is True
        assert cell.metadata.get("jupyter", {}).get("outputs_hidden") is True  # no spoiler
        assert cell.source.lstrip().startswith("# Solution")
        assert not cell.outputs
    prompts = [c for c in nb.cells if c.cell_type == "markdown" and "**Exercise" in c.source]
    assert prompts, f"{NOTEBOOKS[step].name} has no exercise"
    # a solution follows its exercise, never comes before it
    first_prompt = nb.cells.index(prompts[0])
    assert all(nb.cells.index(c) > first_prompt for c in solutions)
