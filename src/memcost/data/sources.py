"""Where a dataset's raw files come from (the bundled sample, a local copy, a pinned download) and
which bytes were read."""

from __future__ import annotations

import hashlib
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcost.io import atomic_path, write_text
from memcost.paths import DISPLAY_NAMES, RAW_DIR, REPO_ROOT, SAMPLE_DIR, DataError, check_dataset

# --- Each benchmark's files ---------------------------------------------------------------------

LOCOMO_FILE = "locomo10.json"
LONGMEMEVAL_FILES: dict[str, str] = {
    "s": "longmemeval_s_cleaned.json",
    "m": "longmemeval_m_cleaned.json",
    "oracle": "longmemeval_oracle.json",
}

# PersonaMem's 32k split (the paper's "PersonaMem v2" rows): two files side by side.
PERSONAMEM_QUESTIONS = "questions_32k.csv"
PERSONAMEM_CONTEXTS = "shared_contexts_32k.jsonl"
# The PersonaMem-v2 release (an extension): a CSV and one chat-history JSON per user.
PERSONAMEM_V2_CSV = "benchmark/text/benchmark.csv"
PERSONAMEM_V2_HISTORY_DIR = "data/chat_history_32k"

# Public homes. The revisions are the ones other public evaluations pin for these files; the
# sha256 of what was actually read is recorded in the manifest either way, and `revision`
# overrides them.
GITHUB_RAW = "https://raw.githubusercontent.com"
LOCOMO_REPO = "snap-research/locomo"
LOCOMO_REPO_FILE = "data/locomo10.json"
LOCOMO_REVISION = "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
LONGMEMEVAL_REPO = "xiaowu0162/longmemeval-cleaned"
LONGMEMEVAL_REVISION = "98d7416c24c778c2fee6e6f3006e7a073259d48f"
PERSONAMEM_REPO = "bowen-upenn/PersonaMem"
# No commit of that repository could be checked from here: the download takes "main". The
# published questions file (CRLF line endings as published) has this sha256, and its counts
# give the paper's Table 2 exactly; public copies differ byte for byte, so another loads with a
# one-line note naming both hashes (memcost.data.personamem). Every file's sha256 is recorded.
PERSONAMEM_REVISION = "main"
PERSONAMEM_QUESTIONS_SHA256 = "cccd34cf53e0bc4d9536c04cff5ca045156d9a4e227e83327112482840bbc93c"
PERSONAMEM_V2_REPO = "bowen-upenn/PersonaMem-v2"
PERSONAMEM_V2_REVISION = "b7b42b78917157afed063527a1c959e98f6109f2"
# the revision a download fetches unless a run names another
PINNED_REVISIONS = {
    "locomo": LOCOMO_REVISION,
    "longmemeval": LONGMEMEVAL_REVISION,
    "personamem": PERSONAMEM_REVISION,
    "personamem_v2": PERSONAMEM_V2_REVISION,
}

_HEX40 = re.compile(r"^[0-9a-f]{40}$")


# --- Sources: the bundled sample, a local path, or a download ------------------------------------


@dataclass(frozen=True)
class DataSource:
    """Where a dataset's raw files are and came from; ``path``: the file the loader opens, ``root``:
    the folder PersonaMem's links are relative to."""

    dataset: str
    path: Path
    root: Path
    origin: str  # "sample" | "local" | "download"
    url: str | None = None
    repo: str | None = None
    revision: str | None = None  # as requested
    resolved_revision: str | None = None  # the commit the request resolved to, when known

    def describe(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "origin": self.origin,
            "path": display_path(self.path),
            "url": self.url,
            "repo": self.repo,
            "revision": self.revision,
            "resolved_revision": self.resolved_revision,
        }


def display_path(path: Path) -> str:
    """Inside the repository, relative to it (manifests travel)."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def sample_path(
    dataset: str, *, longmemeval_file: str = "s", sample_dir: Path = SAMPLE_DIR
) -> Path:
    check_dataset(dataset)
    if dataset == "locomo":
        return sample_dir / "locomo" / LOCOMO_FILE
    if dataset == "longmemeval":
        return sample_dir / "longmemeval" / _longmemeval_filename(longmemeval_file)
    if dataset == "personamem":
        return sample_dir / "personamem" / PERSONAMEM_QUESTIONS
    return sample_dir / "personamem_v2" / PERSONAMEM_V2_CSV


def _longmemeval_filename(variant: str) -> str:
    if variant not in LONGMEMEVAL_FILES:
        raise DataError(
            f"unknown LongMemEval file {variant!r}; valid: "
            f"{', '.join(LONGMEMEVAL_FILES)} ({', '.join(LONGMEMEVAL_FILES.values())})"
        )
    return LONGMEMEVAL_FILES[variant]


def personamem_root(csv_path: Path) -> Path:
    csv_path = csv_path.resolve()
    if csv_path.parent.name == "text" and csv_path.parent.parent.name == "benchmark":
        return csv_path.parent.parent.parent
    return csv_path.parent


def resolve_source(
    dataset: str,
    data_path: str | Path = "",
    *,
    download: bool = False,
    longmemeval_file: str = "s",
    revision: str = "",
    raw_dir: Path = RAW_DIR,
    endpoint: str | None = None,
) -> DataSource:
    """``data_path`` if given (a folder where the file name is fixed), else a download, else the
    bundled sample."""
    check_dataset(dataset)
    if download and not data_path:
        return download_dataset(
            dataset,
            revision=revision,
            longmemeval_file=longmemeval_file,
            raw_dir=raw_dir,
            endpoint=endpoint,
        )
    if not data_path:
        path = sample_path(dataset, longmemeval_file=longmemeval_file)
        if not path.is_file():
            raise DataError(
                f"{path}: bundled sample not found; rebuild it with "
                "`python scripts/make_samples.py`, or pass data_path to a local copy of the dataset"
            )
        return DataSource(dataset, path, _root(dataset, path), "sample")

    path = Path(data_path).expanduser()
    if path.is_dir():
        if dataset == "locomo":
            candidates = [path / LOCOMO_FILE, path / "data" / LOCOMO_FILE]
        elif dataset == "longmemeval":
            name = _longmemeval_filename(longmemeval_file)
            candidates = [path / name, path / name.replace("_cleaned", "")]
        elif dataset == "personamem":
            candidates = [path / PERSONAMEM_QUESTIONS, path / "data" / PERSONAMEM_QUESTIONS]
        else:
            candidates = [path / PERSONAMEM_V2_CSV]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise DataError(
                f"{path}: folder has no {DISPLAY_NAMES[dataset]} file; looked for "
                + ", ".join(str(c.relative_to(path)) for c in candidates)
            )
        path = found
    elif not path.exists():
        raise DataError(f"{path}: file not found (data_path for {DISPLAY_NAMES[dataset]})")
    return DataSource(dataset, path.resolve(), _root(dataset, path), "local")


def _root(dataset: str, path: Path) -> Path:
    return personamem_root(path) if dataset == "personamem_v2" else path.resolve().parent


def _offline_hint(dataset: str, what: str) -> str:
    return (
        f"With no network, fetch {what} another way and pass data_path='/path/to/it' instead "
        f"(or leave data_path empty and download=False to use the bundled {DISPLAY_NAMES[dataset]} "
        "sample)."
    )


def download_dataset(
    dataset: str,
    *,
    revision: str = "",
    longmemeval_file: str = "s",
    raw_dir: Path = RAW_DIR,
    endpoint: str | None = None,
    timeout: float = 60.0,
) -> DataSource:
    """Fetch into ``raw_dir/<dataset>/<revision>/`` once (``endpoint``: a mirror's host)."""
    check_dataset(dataset)
    revision = revision or PINNED_REVISIONS[dataset]
    if dataset == "locomo":
        return _download_locomo(revision, raw_dir, endpoint or GITHUB_RAW, timeout)
    if dataset == "longmemeval":
        filename = _longmemeval_filename(longmemeval_file)
        return _download_longmemeval(revision, filename, raw_dir, endpoint)
    if dataset == "personamem":
        return _download_personamem(revision, raw_dir, endpoint)
    return _download_personamem_v2(revision, raw_dir, endpoint)


def downloaded(
    dataset: str, *, revision: str = "", longmemeval_file: str = "s", raw_dir: Path | None = None
) -> Path | None:
    """The file :func:`download_dataset` would return when all of it is in ``raw_dir``, else
    ``None``."""
    check_dataset(dataset)
    folder = (raw_dir or RAW_DIR) / dataset / (revision or PINNED_REVISIONS[dataset])
    names = {
        "locomo": [LOCOMO_FILE],
        "longmemeval": [_longmemeval_filename(longmemeval_file)],
        "personamem": [PERSONAMEM_QUESTIONS, PERSONAMEM_CONTEXTS],
        "personamem_v2": [PERSONAMEM_V2_CSV, _DOWNLOAD_MARKER],  # the marker: a whole snapshot
    }[dataset]
    return folder / names[0] if all((folder / n).is_file() for n in names) else None


def download_bytes(url: str, *, what: str, timeout: float, hint: str) -> bytes:
    """The body at ``url``; a failure is one ``DataError`` naming ``what``, the address and
    ``hint``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            return response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DataError(f"could not download {what} from {url}: {exc}. {hint}") from exc


def _download_locomo(revision: str, raw_dir: Path, base: str, timeout: float) -> DataSource:
    url = f"{base.rstrip('/')}/{LOCOMO_REPO}/{revision}/{LOCOMO_REPO_FILE}"
    target = raw_dir / "locomo" / revision / LOCOMO_FILE
    resolved = revision if _HEX40.match(revision) else None
    if not target.is_file():
        payload = download_bytes(
            url, what="LoCoMo", timeout=timeout, hint=_offline_hint("locomo", LOCOMO_FILE)
        )
        with atomic_path(target) as tmp:
            tmp.write_bytes(payload)
    return DataSource(
        "locomo",
        target,
        target.parent,
        "download",
        url=url,
        repo=LOCOMO_REPO,
        revision=revision,
        resolved_revision=resolved,
    )


def _hf_resolved_revision(repo: str, revision: str, endpoint: str | None) -> str | None:
    if _HEX40.match(revision):
        return revision
    try:
        from huggingface_hub import HfApi

        return HfApi(endpoint=endpoint).dataset_info(repo, revision=revision).sha
    except Exception:  # noqa: BLE001 - the revision is provenance only; the sha256 is recorded
        return None


def _hub_file(
    repo: str, filename: str, revision: str, folder: Path, endpoint: str | None, hint: str
) -> str:
    """One file of a Hub dataset into ``folder`` unless there; a failure says how to go on without
    network."""
    url = f"{endpoint or 'https://huggingface.co'}/datasets/{repo}/resolve/{revision}/{filename}"
    if not (folder / filename).is_file():
        try:
            from huggingface_hub import hf_hub_download

            hf_hub_download(
                repo,
                filename,
                repo_type="dataset",
                revision=revision,
                local_dir=folder,
                endpoint=endpoint,
            )
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"could not download {filename} from {url}: {exc}. {hint}") from exc
    return url


def _download_longmemeval(
    revision: str, filename: str, raw_dir: Path, endpoint: str | None
) -> DataSource:
    folder = raw_dir / "longmemeval" / revision
    hint = _offline_hint("longmemeval", filename)
    url = _hub_file(LONGMEMEVAL_REPO, filename, revision, folder, endpoint, hint)
    return DataSource(
        "longmemeval",
        folder / filename,
        folder,
        "download",
        url=url,
        repo=LONGMEMEVAL_REPO,
        revision=revision,
        resolved_revision=_hf_resolved_revision(LONGMEMEVAL_REPO, revision, endpoint),
    )


_DOWNLOAD_MARKER = ".memcost-download-complete"


def _download_personamem(revision: str, raw_dir: Path, endpoint: str | None) -> DataSource:
    """The 32k split's two files; the questions file must be the published one."""
    folder = raw_dir / "personamem" / revision
    hint = _offline_hint("personamem", f"{PERSONAMEM_QUESTIONS} and {PERSONAMEM_CONTEXTS}")
    url = _hub_file(PERSONAMEM_REPO, PERSONAMEM_QUESTIONS, revision, folder, endpoint, hint)
    _hub_file(PERSONAMEM_REPO, PERSONAMEM_CONTEXTS, revision, folder, endpoint, hint)
    return DataSource(
        "personamem",
        folder / PERSONAMEM_QUESTIONS,
        folder,
        "download",
        url=url,
        repo=PERSONAMEM_REPO,
        revision=revision,
        resolved_revision=_hf_resolved_revision(PERSONAMEM_REPO, revision, endpoint),
    )


def _download_personamem_v2(revision: str, raw_dir: Path, endpoint: str | None) -> DataSource:
    root = raw_dir / "personamem_v2" / revision
    url = f"{endpoint or 'https://huggingface.co'}/datasets/{PERSONAMEM_V2_REPO}/tree/{revision}"
    marker = root / _DOWNLOAD_MARKER  # a snapshot can be interrupted half-way; only a complete
    if not marker.is_file():  # one is reused without asking the network
        try:
            from huggingface_hub import snapshot_download

            snapshot_download(
                PERSONAMEM_V2_REPO,
                repo_type="dataset",
                revision=revision,
                local_dir=root,
                endpoint=endpoint,
                allow_patterns=[PERSONAMEM_V2_CSV, f"{PERSONAMEM_V2_HISTORY_DIR}/*"],
            )
        except Exception as exc:  # noqa: BLE001
            folder = (
                f"the dataset folder (with {PERSONAMEM_V2_CSV} and {PERSONAMEM_V2_HISTORY_DIR}/)"
            )
            raise DataError(
                f"could not download the PersonaMem-v2 release from {url}: {exc}. "
                + _offline_hint("personamem_v2", folder)
            ) from exc
        write_text(marker, revision + "\n")
    return DataSource(
        "personamem_v2",
        root / PERSONAMEM_V2_CSV,
        root,
        "download",
        url=url,
        repo=PERSONAMEM_V2_REPO,
        revision=revision,
        resolved_revision=_hf_resolved_revision(PERSONAMEM_V2_REPO, revision, endpoint),
    )


# --- Which bytes were read ------------------------------------------------------------------------


@dataclass
class RawFile:
    path: str
    sha256: str
    bytes: int


def read_raw(path: Path, files: list[RawFile]) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    data = path.read_bytes()
    files.append(RawFile(display_path(path), hashlib.sha256(data).hexdigest(), len(data)))
    return data
