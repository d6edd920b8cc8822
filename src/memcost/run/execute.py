"""Execute one notebook with papermill, and the error that says where it failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

from memcost.io import atomic_path
from memcost.run.kernel_manager import kernel_manager_class


class NotebookFailed(RuntimeError):
    """A notebook raised; carries what the user needs to find and fix the failing cell."""

    def __init__(
        self,
        notebook: Path,
        output: Path,
        cell_index: int | None,
        error: str,
        cell_source: str = "",
        ename: str = "",
    ):
        self.notebook, self.output = notebook, output
        self.cell_index, self.error = cell_index, error
        self.ename = ename  # the exception's class name, e.g. BudgetExceeded: what to suggest
        self.run_dir: str = ""  # filled in by run_preset: what to pass to --run-name to resume
        where = f"cell {cell_index}" if cell_index is not None else "a cell"
        if cell_source:
            where += f" (`{cell_source.strip()[:80]}`)"
        super().__init__(
            f"{notebook.name} failed in {where}: {error}\n"
            f"The partially executed notebook is at {output}"
        )


def skip_iri_format_checker() -> None:
    """Leave jsonschema's optional IRI format checker out of this process.

    papermill, nbformat and nbconvert import jsonschema, which imports the optional package
    ``rfc3987_syntax`` when it is installed (the Jupyter stack installs it) to check the ``iri``
    format; that import compiles 38 grammars, a second of every process that runs notebooks.
    No schema here uses that format. Marking the package unavailable before jsonschema's first
    import makes jsonschema do what it does when the package is not installed: leave the two IRI
    formats unchecked. A process that has already imported jsonschema is left as it is.
    """
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


ENGINE_NAME = "memcost"  # the papermill engine below, registered on first use


def _register_engine() -> None:
    """Register a papermill engine whose saves during execution are cheap and atomic.

    Papermill writes the output notebook when each cell starts and when it ends, each time
    through ``nbformat.writes``: schema validation and an indented JSON encoder that runs in
    Python, about 13 ms for a notebook with its figures, a sixth of a whole run's CPU. Here the
    saves during execution write compact JSON with the C encoder into a temporary file that
    replaces the output (a killed run leaves the last whole save, never a torn file); papermill
    itself still writes the final notebook, and the one saved on an error, through nbformat.
    """
    from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines

    class CompactSaves(NotebookExecutionManager):
        def save(self, **kwargs: Any) -> None:
            if kwargs.get("nb") is not None:
                self.nb = kwargs["nb"]
            if self.output_path:
                with atomic_path(self.output_path) as tmp:
                    tmp.write_text(json.dumps(self.nb, ensure_ascii=False), encoding="utf-8")
            self.last_save_time = self.now()

    class Engine(NBClientEngine):
        @classmethod
        def execute_notebook(
            cls,
            nb,
            kernel_name,
            output_path=None,
            progress_bar=True,
            log_output=False,
            autosave_cell_every=30,
            **kwargs,
        ):
            # papermill's Engine.execute_notebook with the manager above
            nb_man = CompactSaves(
                nb,
                output_path=output_path,
                progress_bar=progress_bar,
                log_output=log_output,
                autosave_cell_every=autosave_cell_every,
            )
            nb_man.notebook_start()
            try:
                cls.execute_managed_notebook(nb_man, kernel_name, log_output=log_output, **kwargs)
            finally:
                nb_man.cleanup_pbar()
                nb_man.notebook_complete()
            return nb_man.nb

    papermill_engines.register(ENGINE_NAME, Engine)


def execute_notebook(
    notebook: Path,
    output: Path,
    parameters: dict[str, Any],
    stream: bool,
    sink: IO[str] | None = None,
) -> None:
    """Execute ``notebook`` into ``output`` with ``parameters``; with ``stream``, its cell
    output goes to ``sink`` (standard output when none is given)."""
    skip_iri_format_checker()
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    _register_engine()

    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters=parameters,
            cwd=str(notebook.parent),
            kernel_name="python3",
            engine_name=ENGINE_NAME,
            progress_bar=False,
            request_save_on_cell_execute=True,  # the partial notebook is on disk after every cell
            log_output=False,
            stdout_file=(sink or sys.stdout) if stream else None,
            stderr_file=(sink or sys.stderr) if stream else None,
            kernel_manager_class=kernel_manager_class(),
        )
    except PapermillExecutionError as exc:
        first_line = next((ln for ln in str(exc.source).splitlines() if ln.strip()), "")
        raise NotebookFailed(
            notebook, output, exc.cell_index, f"{exc.ename}: {exc.evalue}", first_line, exc.ename
        ) from exc
    except DeadKernelError:
        index, source = last_started_cell(output)
        raise NotebookFailed(
            notebook,
            output,
            index,
            "the notebook's kernel died (killed: most often out of memory, or by a signal); "
            "what finished before it is kept",
            source,
            ename="DeadKernelError",
        ) from None


def last_started_cell(output: Path) -> tuple[int | None, str]:
    """The cell a killed kernel was running: the last code cell of the saved notebook that
    papermill started (its index there, and its first line); ``(None, "")`` when unknown."""
    try:
        cells = json.loads(output.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return None, ""
    started = [
        i
        for i, c in enumerate(cells)
        if c.get("cell_type") == "code"
        and (c.get("metadata", {}).get("papermill") or {}).get("start_time")
    ]
    if not started:
        return None, ""
    source = cells[started[-1]].get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    return started[-1], next((ln for ln in source.splitlines() if ln.strip()), "")
