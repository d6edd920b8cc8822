"""The report's HTML exports of the executed notebooks: the same document as nbconvert's default
exporter writes (its bleach pass over highlighted code skipped, its BeautifulSoup pass done on
the tags themselves), written whole."""

from __future__ import annotations

import nbformat
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from memcost.run.report import executed

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


def test_an_export_is_what_nbconvert_writes(tmp_path):
    nb = _notebook(tmp_path / "lesson.ipynb")
    expected, _ = HTMLExporter().from_notebook_node(nb)
    executed.export_in_background(tmp_path / "lesson.ipynb")
    executed.wait_for_exports()
    written = (tmp_path / "lesson.html").read_text(encoding="utf-8")
    # the same document: read by BeautifulSoup, as nbconvert reads its own page, it is
    # nbconvert's page to the byte
    assert str(BeautifulSoup(written, features="html.parser")) == expected
    assert written.count('tabindex="0"') == expected.count('tabindex="0"') >= 6
    assert written.count(f'alt="{executed.NO_ALT}"') == 1 and 'alt="a plot"' in written
    assert not [p.name for p in tmp_path.iterdir() if p.name not in ("lesson.ipynb", "lesson.html")]
