"""The report's HTML exports of the executed notebooks: nbconvert's own page, written whole, and
kept while it is newer than its notebook."""

from __future__ import annotations

import os

import nbformat
from nbconvert import HTMLExporter

from memcost.run.report import page as executed

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
    "RU5ErkJggg=="
)  # one pixel


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A lesson\nwith *markdown* and `code`"),
        nbformat.v4.new_code_cell(
            'rows = [{"a": 1, "b": "<b>x</b>"}]  # a comment with <angle> & "quotes"\nprint(rows)',
            outputs=[
                nbformat.v4.new_output(
                    "stream", name="stdout", text="[{'a': 1, 'b': '<b>x</b>'}]\n"
                )
            ],
        ),
        nbformat.v4.new_code_cell(
            "f'{1 + 2:>4}'",
            outputs=[
                nbformat.v4.new_output(
                    "execute_result",
                    data={
                        "text/plain": "'   3'",
                        "text/html": "<table><tr><td>3</td></tr></table>",
                    },
                    execution_count=2,
                )
            ],
        ),
        nbformat.v4.new_code_cell(
            "plt.plot([1, 2])",
            outputs=[
                nbformat.v4.new_output(
                    "display_data", data={"image/png": PNG, "text/plain": "<Figure size 640x480>"}
                )
            ],
        ),
        nbformat.v4.new_markdown_cell('an image with its text: <img src="x.png" alt="a plot">'),
    ]
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return nb


def test_an_export_is_what_nbconvert_writes_and_is_made_once(tmp_path):
    nb = _notebook(tmp_path / "lesson.ipynb")
    expected, _ = HTMLExporter().from_notebook_node(nb)
    target = executed.export_html(tmp_path / "lesson.ipynb")
    assert target == tmp_path / "lesson.html"
    assert target.read_text(encoding="utf-8") == expected
    assert 'alt="a plot"' in expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lesson.html", "lesson.ipynb"]
    target.write_text("kept", encoding="utf-8")  # newer than its notebook: not made again
    assert executed.export_html(tmp_path / "lesson.ipynb").read_text(encoding="utf-8") == "kept"
    os.utime(tmp_path / "lesson.ipynb", (target.stat().st_mtime + 5,) * 2)
    assert executed.export_html(tmp_path / "lesson.ipynb").read_text(encoding="utf-8") == expected


def test_exercise_solutions_stay_hidden_in_the_export(tmp_path):
    """Hidden in JupyterLab (collapsed, tagged ``solution``), so left out of the HTML export
    too; the exercise itself stays."""
    nb = _notebook(tmp_path / "lesson.ipynb")
    nb.cells += [
        nbformat.v4.new_markdown_cell("**Exercise 1.** Add one and two."),
        nbformat.v4.new_code_cell(
            "# Solution: one plus two\n1 + 2",
            metadata={"tags": ["solution"], "jupyter": {"source_hidden": True}},
        ),
    ]
    (tmp_path / "lesson.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
    html = executed.export_html(tmp_path / "lesson.ipynb").read_text(encoding="utf-8")
    assert "Add one and two" in html and "Solution: one plus two" not in html
