"""Fetch the TinyPhysics assets (the simulator model and the segment CSVs) into the project.

The assets are data, not code, so they live in ignored paths of the checkout and are fetched on
demand::

    python -m ppo_training.assets fetch                       # from the upstream hosts
    python -m ppo_training.assets fetch --from DIR_OR_ZIP     # from a local copy
    TINYPHYSICS_ASSETS=DIR python -m ppo_training.assets fetch
    python -m ppo_training.assets status                      # what is there, md5 OK/bad

Layout written under ``dest`` (the checkout root by default)::

    models/tinyphysics.onnx     md5 f508deb4c3e1a169da7b3610b6f287d4, checked on every install
    data/00000.csv ...          flat, as the official harness expects (``--data_path ./data``)

A local source may be (1) a folder with ``models/`` and ``data/`` (like the shared assets folder),
(2) a checkout of ``commaai/controls_challenge``, (3) an unzipped data set (a folder of CSVs, or a
folder holding ``SYNTHETIC_V0/``), (4) the data zip itself, or (5) a ``.onnx`` model file.

Every file is written under a hidden temporary name in its final folder and then renamed with
``os.replace``, so an interrupted fetch never leaves a partial file at a final name.

When the CSV folder of a local source holds a ``SHA256SUMS`` file (``sha256sum`` format, like the
shared assets folder), every CSV copied is verified against it before its rename: a mismatch is
refused and named (the file of that name already in ``data/`` stays as it was), a CSV the list
does not cover is not copied, and listed files missing from the source are reported.  CSVs already
in ``data/`` are checked too, and one whose content does not match is copied again.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import os
import re
import ssl
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator

from . import PROJECT_ROOT

MODEL_NAME = "tinyphysics.onnx"
MODEL_MD5 = "f508deb4c3e1a169da7b3610b6f287d4"
MODEL_SIZE = 4_005_711
MODEL_URL = "https://raw.githubusercontent.com/commaai/controls_challenge/master/models/tinyphysics.onnx"
DATA_URL = "https://huggingface.co/datasets/commaai/commaSteeringControl/resolve/main/data/SYNTHETIC_V0.zip"
#: Folder inside the upstream zip that holds ``00000.csv`` ... ``19999.csv``.
DATA_ZIP_FOLDER = "SYNTHETIC_V0"
#: Environment variable naming a local source, used when ``--from`` is not given.
ENV_VAR = "TINYPHYSICS_ASSETS"
#: Marker of a folder of generated segments; must equal ``ppo_training.data.segments.SYNTHETIC_MANIFEST``
#: (repeated here so this module does not import pandas).
SYNTHETIC_MANIFEST = "synthetic_manifest.json"
#: Checksum file that may sit beside the CSVs of a local source (``sha256sum`` format).
CHECKSUM_FILE = "SHA256SUMS"

_CHUNK = 1 << 20
_TIMEOUT_S = 30
# Final files get the usual mode (0o666 minus umask); mkstemp alone would leave them 0o600.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK

_SOURCE_KINDS_HELP = (
    "a folder with models/ and data/ (like a shared assets folder), a checkout of "
    "commaai/controls_challenge, an unzipped data set (a folder of CSVs, or a folder containing "
    f"{DATA_ZIP_FOLDER}/), or the {DATA_ZIP_FOLDER}.zip file itself"
)


class AssetError(RuntimeError):
    """A user-facing problem (bad source, wrong checksum, host unreachable).

    The CLI prints ``error: <message>`` and exits 1, without a traceback.  ``report`` holds the
    :class:`FetchReport` of what was done before the problem, when there is one.
    """

    def __init__(self, message: str, report: "FetchReport | None" = None):
        super().__init__(message)
        self.report = report


# ----------------------------------------------------------------------------------------------
# Paths and checks


def model_path(dest: str | Path = PROJECT_ROOT) -> Path:
    """Path of the model under a project folder: ``<dest>/models/tinyphysics.onnx``."""
    return Path(dest).expanduser() / "models" / MODEL_NAME


def data_dir(dest: str | Path = PROJECT_ROOT) -> Path:
    """Folder of the segment CSVs under a project folder: ``<dest>/data``."""
    return Path(dest).expanduser() / "data"


def md5_of(path: str | Path) -> str:
    """Hex md5 of a file's content, read in chunks (the model is 4 MB, data files are small)."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_segment_name(name: str) -> bool:
    """True for a data file name worth copying: ``*.csv``, not hidden.

    Hidden names are skipped because macOS archives carry ``._00000.csv`` resource forks, and
    our own temporary files start with a dot.
    """
    return name.lower().endswith(".csv") and not name.startswith(".")


def _csv_files(folder: Path) -> list[Path]:
    """Sorted segment CSVs directly inside ``folder`` (empty when the folder is absent)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _is_segment_name(p.name) and p.is_file())


@dataclass
class AssetStatus:
    """What is present under a project folder.

    Attributes:
        dest: the project folder.
        model_path: where the model belongs.
        model_md5: md5 of the file there, or None when it is absent.
        data_dir: where the CSVs belong.
        n_csv: number of segment CSVs in ``data_dir``.
        synthetic: True when ``data_dir`` holds generated segments (it has a synthetic manifest).
    """

    dest: Path
    model_path: Path
    model_md5: str | None
    data_dir: Path
    n_csv: int
    synthetic: bool

    @property
    def model_ok(self) -> bool:
        return self.model_md5 == MODEL_MD5

    @property
    def data_ok(self) -> bool:
        return self.n_csv > 0

    @property
    def ok(self) -> bool:
        return self.model_ok and self.data_ok

    def lines(self) -> list[str]:
        """Human-readable description, one line per asset."""
        if self.model_md5 is None:
            model = f"model: MISSING  {self.model_path}"
        elif self.model_ok:
            model = f"model: md5 OK   {self.model_path}"
        else:
            model = f"model: md5 BAD  {self.model_path} (md5 {self.model_md5}, expected {MODEL_MD5})"
        if self.n_csv:
            kind = " (synthetic, generated)" if self.synthetic else ""
            data = f"data:  {self.n_csv} CSV files{kind}  {self.data_dir}"
        else:
            data = f"data:  MISSING (no CSV files)  {self.data_dir}"
        return [f"assets under {self.dest}", "  " + model, "  " + data]


def status(dest: str | Path = PROJECT_ROOT) -> AssetStatus:
    """Inspect the assets under ``dest`` (hashes the model, counts CSVs); never modifies anything."""
    dest = Path(dest).expanduser()
    mp, dd = model_path(dest), data_dir(dest)
    return AssetStatus(
        dest=dest,
        model_path=mp,
        model_md5=md5_of(mp) if mp.is_file() else None,
        data_dir=dd,
        n_csv=len(_csv_files(dd)),
        synthetic=(dd / SYNTHETIC_MANIFEST).is_file(),
    )


# ----------------------------------------------------------------------------------------------
# Atomic writing


@contextlib.contextmanager
def _atomic_file(final: Path) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``final``; rename it to ``final`` only if the block succeeds.

    The temporary name is hidden and ends in ``.part`` so that nothing listing ``*.csv`` or looking
    for the model ever sees it; any exception (a checksum error, Ctrl-C) deletes it.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".part")
    try:
        os.chmod(tmp, _FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class _HashingWriter:
    """File-like wrapper that md5-hashes every byte written through it."""

    def __init__(self, out: BinaryIO):
        self._out = out
        self.md5 = hashlib.md5()

    def write(self, data: bytes) -> int:
        self.md5.update(data)
        return self._out.write(data)


class _NoBar(contextlib.nullcontext):
    """Stands in for a disabled progress bar: fetching needs nothing beyond the standard library."""

    def update(self, n: int = 1) -> None:
        pass


def _progress_bar(progress: bool, **kwargs):
    """A progress reporter (``utils.progress``: a bar in a terminal, plain lines in a log)."""
    from .utils.progress import progress as make_progress

    return make_progress(disable=not progress, **kwargs)


# ----------------------------------------------------------------------------------------------
# Sources


@dataclass
class _Source:
    """A resolved source: ``kind`` is ``upstream``, ``dir``, ``zip`` or ``model-file``."""

    kind: str
    path: Path | None = None
    origin: str = "upstream"  # "--from", "$TINYPHYSICS_ASSETS" or "upstream"

    def describe(self) -> str:
        if self.kind == "upstream":
            return "upstream (raw.githubusercontent.com, huggingface.co)"
        return f"{self.path} ({self.origin})"


def _resolve_source(source: str | Path | None) -> _Source:
    """Decide where to fetch from: ``source``, else ``$TINYPHYSICS_ASSETS``, else upstream."""
    origin = "--from"
    if source is None or str(source) == "":
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            return _Source("upstream")
        source, origin = env, f"${ENV_VAR}"
    path = Path(source).expanduser()
    if not path.exists():
        raise AssetError(
            f"source {path} (given by {origin}) does not exist; expected {_SOURCE_KINDS_HELP}"
        )
    if path.is_dir():
        return _Source("dir", path, origin)
    if zipfile.is_zipfile(path):
        return _Source("zip", path, origin)
    if path.suffix.lower() == ".onnx":
        return _Source("model-file", path, origin)
    raise AssetError(
        f"source {path} (given by {origin}) is a file but neither a zip nor a .onnx model; "
        f"expected {_SOURCE_KINDS_HELP}"
    )


def _data_candidates(root: Path) -> list[Path]:
    """Folders of a local source that may hold the CSVs, in order of preference."""
    return [root / "data", root / "data" / DATA_ZIP_FOLDER, root, root / DATA_ZIP_FOLDER]


@dataclass
class _Entry:
    """One data file of a source: its flat name, size, how to open it, expected sha256 if known."""

    name: str
    size: int
    open: Callable[[], BinaryIO]
    sha256: str | None = None


# sha256sum writes "HASH  name" (text mode) or "HASH *name" (binary mode).
_CHECKSUM_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


@dataclass
class _Checksums:
    """A source's ``SHA256SUMS``: where it is, and ``file name -> sha256`` of its segment CSVs."""

    path: Path
    sums: dict[str, str]


def _read_checksums(folder: Path) -> _Checksums | None:
    """The ``SHA256SUMS`` beside the CSVs of ``folder``, or None when there is none.

    Raises:
        AssetError: a line that is not in ``sha256sum`` format (named by its number).
    """
    f = folder / CHECKSUM_FILE
    if not f.is_file():
        return None
    sums: dict[str, str] = {}
    for number, line in enumerate(f.read_text().splitlines(), 1):
        if not line.strip():
            continue
        m = _CHECKSUM_LINE.fullmatch(line.rstrip("\r"))
        if m is None:
            raise AssetError(
                f"{f}: line {number} is not in sha256sum format ('<64 hex digits>  <file name>'): "
                f"{line[:100]!r}; fix or remove the file"
            )
        sums[PurePosixPath(m.group(2)).name] = m.group(1).lower()
    return _Checksums(f, sums)


def _dir_entries(folder: Path) -> tuple[list[_Entry], _Checksums | None]:
    """The segment CSVs of ``folder`` with their expected sha256, and its ``SHA256SUMS`` if any."""
    checksums = _read_checksums(folder)
    sums = checksums.sums if checksums else {}
    entries = [
        _Entry(p.name, p.stat().st_size, (lambda p=p: open(p, "rb")), sums.get(p.name))
        for p in _csv_files(folder)
    ]
    return entries, checksums


def _some_names(names: list[str], limit: int = 8) -> str:
    """``a.csv, b.csv`` or ``a.csv, ... and 12 more`` for a message."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _listing_problems(folder: Path, entries: list[_Entry], checksums: _Checksums) -> list[str]:
    """Files a ``SHA256SUMS`` cannot vouch for: present but unlisted, or listed but absent."""
    problems = []
    unlisted = [e.name for e in entries if e.sha256 is None]
    if unlisted:
        problems.append(
            f"{len(unlisted)} CSV file(s) in {folder} are not listed in {checksums.path}, so they cannot "
            f"be verified and were not copied: {_some_names(unlisted)}"
        )
    present = {e.name for e in entries}
    missing = sorted(n for n in checksums.sums if _is_segment_name(n) and n not in present)
    if missing:
        problems.append(
            f"{len(missing)} file(s) listed in {checksums.path} are missing from {folder} (an incomplete "
            f"copy of the source?): {_some_names(missing)}"
        )
    return problems


def _zip_member_ok(info: zipfile.ZipInfo) -> bool:
    parts = PurePosixPath(info.filename).parts
    # __MACOSX/ holds resource forks that also end in .csv; they are not segments.
    return not info.is_dir() and "__MACOSX" not in parts and _is_segment_name(parts[-1] if parts else "")


def _zip_entries(zf: zipfile.ZipFile, label: str | Path) -> list[_Entry]:
    """CSV members of a zip, flattened to their base names (``SYNTHETIC_V0/00000.csv`` -> ``00000.csv``).

    Taking only the base name also means no member can write outside ``data/``.
    """
    entries: dict[str, _Entry] = {}
    for info in zf.infolist():
        if not _zip_member_ok(info):
            continue
        name = PurePosixPath(info.filename).name
        if name in entries:
            raise AssetError(
                f"{label}: two members flatten to the same name {name!r}; refusing to guess which "
                f"one belongs in data/"
            )
        entries[name] = _Entry(name, info.file_size, (lambda info=info: zf.open(info)))
    return sorted(entries.values(), key=lambda e: e.name)


def _zip_model(zf: zipfile.ZipFile) -> zipfile.ZipInfo | None:
    """The ``tinyphysics.onnx`` member of a zip (e.g. an archive of the challenge repo), if any."""
    found = [
        i for i in zf.infolist()
        if not i.is_dir() and PurePosixPath(i.filename).name == MODEL_NAME
        and "__MACOSX" not in PurePosixPath(i.filename).parts
    ]
    # Prefer the one under models/, as in the challenge repository.
    found.sort(key=lambda i: ("models" not in PurePosixPath(i.filename).parts, i.filename))
    return found[0] if found else None


# ----------------------------------------------------------------------------------------------
# Downloads


def _offline_hint() -> str:
    return (
        f"To use a local copy instead, run `python -m ppo_training.assets fetch --from DIR` or set "
        f"{ENV_VAR}=DIR, where DIR is {_SOURCE_KINDS_HELP}."
    )


def _download(url: str, out: BinaryIO, progress: bool, desc: str) -> None:
    """Stream ``url`` into the open file ``out`` with a byte progress bar.

    Raises:
        AssetError: the host cannot be reached, answers with an HTTP error, or the transfer breaks
            off; the message says how to point at a local copy instead.
    """
    host = urllib.parse.urlsplit(url).hostname
    request = urllib.request.Request(url, headers={"User-Agent": "ppo_training-assets"})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as resp:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            got = 0
            with _progress_bar(progress, total=total, unit="B", unit_scale=True,
                               unit_divisor=1024, desc=desc) as bar:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    got += len(chunk)
                    bar.update(len(chunk))
            if total is not None and got != total:
                raise AssetError(
                    f"download of {url} stopped after {got} of {total} bytes; run fetch again. "
                    + _offline_hint()
                )
    except urllib.error.HTTPError as exc:
        raise AssetError(
            f"{host} answered HTTP {exc.code} ({exc.reason}) for {url}. " + _offline_hint()
        ) from None
    except urllib.error.URLError as exc:
        raise AssetError(
            f"could not reach {host} to download {url} ({exc.reason}); this machine seems to be "
            f"offline or the host is blocked. " + _offline_hint()
        ) from None
    except (TimeoutError, ConnectionError, http.client.HTTPException, ssl.SSLError) as exc:
        raise AssetError(
            f"the connection to {host} failed while downloading {url} ({exc!r}). " + _offline_hint()
        ) from None


# ----------------------------------------------------------------------------------------------
# Fetch


@dataclass
class FetchReport:
    """What :func:`fetch` did.

    Attributes:
        dest: the project folder written to.
        source: description of the source used.
        model: ``"present"`` (valid model already there), ``"copied"``, ``"downloaded"``, or None
            when the model was not requested or could not be installed.
        data_copied: names of the CSV files written by this call.
        data_kept: number of CSV files already present (same size, and the same sha256 when the
            source lists one) that were left alone.
        data_replaced: names among ``data_copied`` that replaced a file of the same size whose
            sha256 did not match the source's ``SHA256SUMS``.
        data_verified: number of CSV files (copied or kept) whose sha256 was checked.
        checksum_file: the source's ``SHA256SUMS`` that the data was checked against, if any.
        notes: further remarks (skipped downloads, source without data, ...).
    """

    dest: Path
    source: str
    model: str | None = None
    data_copied: list[str] = field(default_factory=list)
    data_kept: int = 0
    data_replaced: list[str] = field(default_factory=list)
    data_verified: int = 0
    checksum_file: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def nothing_copied(self) -> bool:
        """True when this call wrote no file (everything requested was already present)."""
        return self.model in (None, "present") and not self.data_copied

    def lines(self) -> list[str]:
        """Human-readable summary, one line per item."""
        out = [f"source: {self.source}", f"dest:   {self.dest}"]
        if self.model == "present":
            out.append(f"model:  already present, md5 OK ({model_path(self.dest)})")
        elif self.model is not None:
            out.append(f"model:  {self.model}, md5 OK -> {model_path(self.dest)}")
        if self.data_copied or self.data_kept:
            out.append(
                f"data:   {len(self.data_copied)} CSV files written, {self.data_kept} already present "
                f"({data_dir(self.dest)})"
            )
        if self.checksum_file is not None:
            out.append(f"sha256: {self.data_verified} CSV files match {self.checksum_file}")
        if self.data_replaced:
            out.append(f"note:   replaced {len(self.data_replaced)} file(s) whose content did not match: "
                       f"{_some_names(self.data_replaced)}")
        out += [f"note:   {n}" for n in self.notes]
        if self.nothing_copied and (self.model == "present" or self.data_kept):
            out.append("everything requested is present and valid; nothing copied")
        return out


def _install_model(src: _Source, dest: Path, force: bool, progress: bool, report: FetchReport) -> None:
    """Put a model with the right md5 at ``model_path(dest)``, or raise AssetError."""
    final = model_path(dest)
    if final.is_file():
        if not force and md5_of(final) == MODEL_MD5:
            report.model = "present"
            return
        if not force:
            report.notes.append(f"replacing {final}: its md5 was not {MODEL_MD5}")

    def write_checked(fill: Callable[[BinaryIO], None], what: str) -> None:
        # Hash what is written, and check before the rename: a wrong model is deleted with its
        # temporary file and never reaches the final path.
        with _atomic_file(final) as out:
            hashing = _HashingWriter(out)
            fill(hashing)
            got = hashing.md5.hexdigest()
            if got != MODEL_MD5:
                raise AssetError(
                    f"model from {what} has md5 {got}, expected {MODEL_MD5} (corrupt, truncated or "
                    f"not the challenge model); nothing was written to {final}"
                )

    def copy_from(opener: Callable[[], BinaryIO], size: int, what: str) -> Callable[[BinaryIO], None]:
        def fill(out: BinaryIO) -> None:
            with opener() as f, _progress_bar(progress, total=size, unit="B", unit_scale=True,
                                              unit_divisor=1024, desc=MODEL_NAME) as bar:
                for chunk in iter(lambda: f.read(_CHUNK), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
        return fill

    if src.kind == "upstream":
        write_checked(lambda out: _download(MODEL_URL, out, progress, MODEL_NAME), MODEL_URL)
        report.model = "downloaded"
        return
    if src.kind == "model-file":
        p = src.path
        write_checked(copy_from(lambda: open(p, "rb"), p.stat().st_size, str(p)), str(p))
    elif src.kind == "dir":
        looked = [src.path / "models" / MODEL_NAME, src.path / MODEL_NAME]
        found = next((p for p in looked if p.is_file()), None)
        if found is None:
            raise AssetError(
                f"model not found in {src.path} (looked for {', '.join(str(p) for p in looked)}); "
                f"point --from at a folder that has models/{MODEL_NAME}, or use --data-only"
            )
        write_checked(copy_from(lambda: open(found, "rb"), found.stat().st_size, str(found)), str(found))
    else:  # zip
        with zipfile.ZipFile(src.path) as zf:
            info = _zip_model(zf)
            if info is None:
                raise AssetError(
                    f"model not found in {src.path}: the zip holds no {MODEL_NAME} (the data set "
                    f"zip has only CSVs); fetch the model separately or use --data-only"
                )
            what = f"{src.path}:{info.filename}"
            write_checked(copy_from(lambda: zf.open(info), info.file_size, what), what)
    report.model = "copied"


class _ChecksumMismatch(Exception):
    """Raised inside an atomic write so that the temporary file is deleted; carries the hash."""


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _copy_entries(entries: list[_Entry], target: Path, force: bool, progress: bool,
                  report: FetchReport, desc: str) -> None:
    """Write the entries not already present into ``target``, atomically, verifying known sha256s.

    A file already in ``target`` with the same name and size is kept, unless the entry has a
    sha256 and the file does not match it (then it is copied again).  A copy whose sha256 does not
    match is never renamed to its final name, so the file of that name already in ``target`` (if
    any) stays as it was; the others are still copied, and the mismatches are raised together.

    Raises:
        AssetError: naming every file whose content did not match its sha256.
    """
    todo, stale = [], set()
    for e in entries:
        existing = target / e.name
        if not force and existing.is_file() and existing.stat().st_size == e.size:
            if e.sha256 is None or _sha256_of(existing) == e.sha256:
                report.data_kept += 1
                report.data_verified += e.sha256 is not None
                continue
            stale.add(e.name)
        todo.append(e)
    if not todo:
        return
    mismatches = []
    with _progress_bar(progress, total=len(todo), unit="file", desc=desc) as bar:
        for e in todo:
            try:
                with e.open() as src, _atomic_file(target / e.name) as out:
                    h = hashlib.sha256() if e.sha256 else None
                    for chunk in iter(lambda: src.read(_CHUNK), b""):
                        out.write(chunk)
                        if h is not None:
                            h.update(chunk)
                    if h is not None and h.hexdigest() != e.sha256:
                        raise _ChecksumMismatch(h.hexdigest())
            except _ChecksumMismatch as exc:
                mismatches.append(f"{e.name}: sha256 {exc} (expected {e.sha256})")
                continue
            report.data_copied.append(e.name)
            report.data_verified += e.sha256 is not None
            if e.name in stale:
                report.data_replaced.append(e.name)
            bar.update(1)
    if mismatches:
        raise AssetError(
            f"refused {len(mismatches)} file(s) whose content does not match the source's "
            f"{CHECKSUM_FILE} (the source copy is corrupt); none of them was written to {target}, and "
            f"files of those names already there were left as they were:\n  " + "\n  ".join(mismatches)
        )


def _install_data(src: _Source, dest: Path, force: bool, progress: bool, report: FetchReport) -> None:
    """Put segment CSVs under ``data_dir(dest)``, flat, or raise AssetError."""
    target = data_dir(dest)
    if (target / SYNTHETIC_MANIFEST).is_file():
        # Everything reading a folder with this manifest labels it synthetic: real segments
        # copied into it would be mislabelled (and generated ones mistaken for real).
        raise AssetError(
            f"{target} holds generated segments ({SYNTHETIC_MANIFEST}); real data would be mixed "
            f"into it. Move that folder away or use another --dest"
        )
    present = _csv_files(target)

    if src.kind == "upstream":
        if present and not force:
            report.data_kept = len(present)
            report.notes.append(
                f"data/ already has {len(present)} CSV files; the ~0.6 GB zip is not downloaded "
                f"again (use --force to re-download)"
            )
            return
        target.mkdir(parents=True, exist_ok=True)
        # The zip is only an intermediate: it is streamed to a hidden file in data/ (same disk as
        # the CSVs it will become) and deleted after extraction, whatever happens.
        fd, tmp = tempfile.mkstemp(dir=target, prefix=f".{DATA_ZIP_FOLDER}.", suffix=".zip.part")
        try:
            with os.fdopen(fd, "wb") as out:
                _download(DATA_URL, out, progress, f"{DATA_ZIP_FOLDER}.zip")
            if not zipfile.is_zipfile(tmp):
                raise AssetError(f"the file downloaded from {DATA_URL} is not a zip archive")
            with zipfile.ZipFile(tmp) as zf:
                _copy_entries(_zip_entries(zf, DATA_URL), target, force, progress, report,
                              "extracting")
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return

    if src.kind == "zip":
        with zipfile.ZipFile(src.path) as zf:
            entries = _zip_entries(zf, src.path)
            if entries:
                _copy_entries(entries, target, force, progress, report, "extracting")
                return
        where = f"the zip {src.path} has no .csv members"
    elif src.kind == "dir":
        for folder in _data_candidates(src.path):
            entries, checksums = _dir_entries(folder)
            if not entries:
                continue
            problems = []
            if checksums is not None:
                # Every file copied is verified: files the list does not cover are not copied.
                report.checksum_file = checksums.path
                problems = _listing_problems(folder, entries, checksums)
                entries = [e for e in entries if e.sha256 is not None]
            try:
                _copy_entries(entries, target, force, progress, report, "copying CSVs")
            except AssetError as exc:
                problems.insert(0, str(exc))
            if problems:
                raise AssetError("\n".join(problems))
            return
        where = (
            f"no segment CSVs in {src.path} (looked in "
            f"{', '.join(str(p) for p in _data_candidates(src.path))}); the data is absent there"
        )
        if (src.path / "models" / MODEL_NAME).is_file():
            where += (
                " (a challenge checkout's data/ stays empty until the data set is downloaded: "
                f"point --from at the unzipped data set or at {DATA_ZIP_FOLDER}.zip)"
            )
    else:  # model-file
        where = f"{src.path} is a model file and holds no data"

    if present and not force:
        # Nothing to take from this source, but the project already has data: not an error.
        report.data_kept = len(present)
        report.notes.append(f"{where}; keeping the {len(present)} CSV files already in {target}")
        return
    raise AssetError(f"{where}; use --model-only to fetch only the model")


def fetch(
    source: str | Path | None = None,
    dest: str | Path = PROJECT_ROOT,
    want_model: bool = True,
    want_data: bool = True,
    progress: bool = True,
    force: bool = False,
) -> FetchReport:
    """Install the model and/or the segment CSVs under ``dest``.

    Args:
        source: a local folder, zip or ``.onnx`` file (see the module docstring); None means
            ``$TINYPHYSICS_ASSETS`` when set, else the upstream URLs.
        dest: project folder receiving ``models/`` and ``data/`` (default: the checkout root).
        want_model: install ``models/tinyphysics.onnx`` (md5-checked).
        want_data: install the segment CSVs under ``data/``.
        progress: report progress on stderr (bars in a terminal, plain lines in a log).
        force: re-copy / re-download even what is already present.

    Returns:
        A :class:`FetchReport`.  What is already present and valid is left alone: a valid model is
        not re-copied, a CSV of the same name and size is not rewritten, and from upstream the data
        zip is not downloaded when ``data/`` already holds CSVs.

    Raises:
        AssetError: nonexistent or unusable source, unreachable host, wrong checksum, or a
            requested asset missing from the source.  With a local source both assets are tried
            before raising, so e.g. the data is still copied when the source lacks the model;
            ``exc.report`` says what was done.
    """
    if not (want_model or want_data):
        raise AssetError("nothing to fetch: both the model and the data were excluded")
    dest = Path(dest).expanduser()
    src = _resolve_source(source)
    report = FetchReport(dest=dest, source=src.describe())
    problems: list[str] = []
    steps = ([_install_model] if want_model else []) + ([_install_data] if want_data else [])
    for step in steps:
        try:
            step(src, dest, force, progress, report)
        except AssetError as exc:
            if src.kind == "upstream":
                # A network failure for the model will fail for the data too: stop at once.
                exc.report = report
                raise
            problems.append(str(exc))
    if problems:
        raise AssetError("\n".join(problems), report)
    return report


# ----------------------------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ppo_training.assets",
        description="Fetch the TinyPhysics model and segment CSVs into the project, or show status.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="install models/tinyphysics.onnx and data/*.csv")
    f.add_argument(
        "--from", dest="source", metavar="DIR_OR_ZIP",
        help=f"local source instead of the upstream URLs (default: ${ENV_VAR} if set): "
             f"{_SOURCE_KINDS_HELP}, or a .onnx model file",
    )
    f.add_argument("--dest", default=str(PROJECT_ROOT), metavar="PROJECT_DIR",
                   help="folder receiving models/ and data/ (default: %(default)s)")
    only = f.add_mutually_exclusive_group()
    only.add_argument("--data-only", action="store_true", help="fetch only the segment CSVs")
    only.add_argument("--model-only", action="store_true", help="fetch only the model")
    f.add_argument("--force", action="store_true", help="re-copy / re-download what is present")
    f.add_argument("--no-progress", action="store_true", help="no progress bars")
    s = sub.add_parser("status", help="show what is present (exit 1 if something is missing or bad)")
    s.add_argument("--dest", default=str(PROJECT_ROOT), metavar="PROJECT_DIR",
                   help="project folder to inspect (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "status":
            st = status(args.dest)
            print("\n".join(st.lines()))
            return 0 if st.ok else 1
        report = fetch(
            source=args.source,
            dest=args.dest,
            want_model=not args.data_only,
            want_data=not args.model_only,
            progress=not args.no_progress,
            force=args.force,
        )
        print("\n".join(report.lines()))
        return 0
    except AssetError as exc:
        if exc.report is not None:
            print("\n".join(exc.report.lines()))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # disk full, permission denied: environmental, not a bug
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; no partial file was left at a final path", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
