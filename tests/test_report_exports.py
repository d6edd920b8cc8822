"""The report's HTML exports of the executed notebooks: the same HTML as nbconvert's default
exporter (whose bleach pass over highlighted code is skipped), written whole."""

from __future__ import annotations

import nbformat
from nbconvert import HTMLExporter

from memcost.run.report import executed


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A lesson\nwith *markdown* and `code`"),
        nbformat.v4.new_code_cell(
            'rows = [{"a": 1, "b": "<b>x</b>"}]  # a comment with <angle> & "quotes"\n'
            "print(rows)", outputs=[nbformat.v4.new_output(
                "stream", name="stdout", text="[{'a': 1, 'b': '<b>x</b>'}]\n")]),
        nbformat.v4.new_code_cell("f'{1 + 2:>4}'", outputs=[nbformat.v4.new_output(
            "execute_result", data={"text/plain": "'   3'", "text/html": "<table><tr><td>3"
                                    "</td></tr></table>"}, execution_count=2)]),
    ]
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return nb


def test_an_export_is_what_nbconvert_writes(tmp_path):
    nb = _notebook(tmp_path / "lesson.ipynb")
    expected, _ = HTMLExporter().from_notebook_node(nb)
    executed.export_in_background(tmp_path / "lesson.ipynb")
    executed.wait_for_exports()
    written = (tmp_path / "lesson.html").read_text(encoding="utf-8")
    assert written == expected
    assert not [p.name for p in tmp_path.iterdir() if p.name not in ("lesson.ipynb",
                                                                      "lesson.html")]
