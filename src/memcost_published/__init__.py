"""Published per-question runs of real memory systems (notebook 08): answers and judgments others
made public, pinned and re-analysed without a key (docs/published.md)."""

from pathlib import Path

from memcost.plugins import Plugin, Section
from memcost_published.report import published_brief, section_published

HERE = Path(__file__).parent

PLUGIN = Plugin(
    name="published",
    notebooks=(HERE / "notebooks" / "08_published_runs.ipynb",),
    presets=tuple(sorted((HERE / "presets").glob("*.yaml"))),
    path_parameters=("published_dir", "registry"),
    report_sections=(
        Section("published", lines=section_published, after="headline", brief=published_brief),
    ),
    hints={
        "download": "No network? Notebook 08 reads the published runs' own files, which no "
        "bundled sample stands in for: put copies of them in a folder and set published_dir, "
        "and the real datasets' files with data_path (docs/published.md)."
    },
)
