"""A run's folder and the files profreport writes.

`RunFolder` owns a run's folder: its name, its staging (hidden until it is published whole), the
evidence so far (run.json, rewritten as the run goes on, so a process that dies leaves it), its
publishing, moving its traces elsewhere, and finding the record in a file or a folder. Around it:
the one atomic write, a document's JSON text, and the check that a file a library wrote for
profreport is whole: a disk that takes no more bytes is bad input, never a bug (`disk_error`,
`library_writes`).
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from profreport.exits import DISK_ERRNOS, UsageError, disk_error


class Document(Protocol):
    """What a run folder's record is written from (a `Run`: record.section.Section)."""

    def to_json(self) -> Mapping[str, Any]: ...


# What a run folder holds: its record, the libraries' output while it ran, each mode's trace
# under tensorboard/<mode>/, the light pass's trace (light_pass.py: every mode interleaved with
# the profiler's calibration steps, read for the time breakdown), and one timeline of every mode
# (render/timeline.py).
RECORD = "run.json"
RUN_LOG = "run.log"
TENSORBOARD = "tensorboard"
LIGHT_TRACES = "time"
LIGHT_TRACE_NAME = "light.pt.trace.json.gz"
TIMELINE_NAME = "all_modes.timeline.json"
TENSORBOARD_EVENTS = "events.out.tfevents.*"
# With the device, the time, a `-N` suffix and the staging folder's `.<name>.partial-XXXXXXXX`,
# a run folder's slug this long stays far below the 255-byte limit on a file name.
SLUG_MAX = 96
PROBE_BYTES = 64 * 1024  # what a folder must still take for a short write not to be the disk's


def slug(name: str, limit: int | None = None, fill: str = "-", strip: str = "-.") -> str:
    """`name` as a file name: every run of characters other than ASCII letters, digits, `_`,
    `.` and `-` one `fill`, `strip` taken off both ends, cut to `limit` characters (ASCII:
    characters are bytes); empty when nothing is left."""
    return re.sub(r"[^A-Za-z0-9_.-]+", fill, name).strip(strip)[:limit]


def run_folder_name(model: str, device: str, now: datetime) -> str:
    """A run folder's name: the model's slug (a long one recognisable by its start and told
    apart by a hash of the whole name), the device and the time."""
    name = slug(model) or "model"
    if len(name) > SLUG_MAX:
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        name = f"{slug(model, SLUG_MAX - len(digest) - 1).rstrip('-.')}-{digest}"
    return f"{name}-{device}-{now.strftime('%Y%m%dT%H%M%SZ')}"


def record_file(path: Path) -> Path:
    """The run record a path names: run.json in a run folder, or the file itself (run.json,
    run.json.gz, or a record by any other name)."""
    return path / RECORD if path.is_dir() else path


def read_text(path: Path, error: type[Exception]) -> str:
    """The UTF-8 text of `path` (gunzipped when its name ends in .gz); `error` with one line
    ("no such file: ...", "cannot read ...: reason") when it cannot be read. Invalid UTF-8 is
    the caller's parse error to report."""
    try:
        if path.suffix == ".gz":
            return gzip.decompress(path.read_bytes()).decode("utf-8")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"no such file: {path}") from None
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError; EOFError: cut short
        raise error(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def not_a_file(folder: Path) -> None:
    """A folder to write into (made if missing) cannot be an existing file (UsageError)."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} exists and is not a folder")


def _clean(value: Any) -> Any:
    # JSON has no NaN/Infinity; a number we could not compute is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(document: Mapping[str, Any]) -> str:
    """A document's JSON text as profreport writes it (a number it could not compute as null)."""
    return json.dumps(_clean(document), indent=1, sort_keys=False) + "\n"


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write via a temporary file and rename, so a failure never leaves half a file.

    The file gets the permissions a plain `open(path, "w")` would give (mkstemp's are 0600),
    so reports stay readable by CI artifact uploaders and web servers.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a write's error names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


# ---------------------------------------------------------------- a disk that takes no more


def _refusal(folder: Path) -> OSError | None:
    """Why `folder` takes no PROBE_BYTES more (its disk's OSError), or None when it does."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".profreport-room-")
    except OSError as exc:
        return exc if exc.errno in DISK_ERRNOS else None
    try:
        left = PROBE_BYTES
        while left > 0:
            wrote = os.write(fd, bytes(min(left, PROBE_BYTES)))
            if wrote <= 0:  # a write that takes nothing is a full disk that did not say so
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            left -= wrote
        os.fsync(fd)
    except OSError as exc:
        return exc if exc.errno in DISK_ERRNOS else None
    finally:
        os.close(fd)
        os.unlink(name)
    return None


def raise_if_full(folder: Path) -> None:
    """The disk's OSError (no space left, over quota, read-only), naming `folder`, when `folder`
    takes no PROBE_BYTES more; nothing otherwise."""
    refused = _refusal(folder)
    if refused is not None:
        raise OSError(refused.errno, refused.strerror, str(folder))


@contextmanager
def library_writes(folder: Path) -> Iterator[None]:
    """A block in which a library writes files into `folder` for profreport, which reads them
    back. A library may write short on a full disk without raising (torch.profiler's trace
    exporter does), and the read then fails on a file missing or cut short: whatever the block
    raises is then the disk's OSError naming `folder` (what it holds may be cut short) when the
    disk refused a write or `folder` takes no more bytes; anything else goes on up as it was."""
    try:
        yield
    except Exception as exc:
        refused = disk_error(exc) or _refusal(folder)
        if refused is None:
            raise
        raise OSError(refused.errno, refused.strerror, str(folder)) from exc


def _tfrecords_whole(path: Path) -> bool:
    """Whether a TensorBoard event file holds whole records (length, its check, the data, its
    check: 8 + 4 + n + 4 bytes each) to its last byte."""
    data, at = path.read_bytes(), 0
    while at + 12 <= len(data):
        at += 16 + int.from_bytes(data[at : at + 8], "little")
    return at == len(data) > 0


def write_tensorboard_summary(
    folder: Path,
    scalars: Mapping[str, float],
    text_tag: str,
    text: str,
    walltime: float | None,
) -> Path:
    """Write `scalars` and `text` at step 0 to one TensorBoard event file in `folder`; return it.

    Event files an earlier write left there are replaced, so the folder always holds one summary.
    """
    from torch.utils.tensorboard import SummaryWriter

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(TENSORBOARD_EVENTS):
        old.unlink()
    with library_writes(folder):
        writer = SummaryWriter(log_dir=str(folder))
        try:
            for tag, value in scalars.items():
                writer.add_scalar(tag, value, global_step=0, walltime=walltime)
            writer.add_text(text_tag, text, global_step=0, walltime=walltime)
        finally:
            writer.close()
        (event_file,) = folder.glob(TENSORBOARD_EVENTS)
        if not _tfrecords_whole(event_file):
            raise ValueError(f"{event_file}: TensorBoard's writer left a record cut short")
    return event_file


# ---------------------------------------------------------------- the run folder


class RunFolder:
    """One run's folder, from its name to its publishing.

    A staged folder (`staged`) is written as a hidden sibling (`.<name>.partial-XXXX`);
    `publish()` renames it to `<name>`, or `<name>-2`, `<name>-3`, ... when that name is taken,
    so an earlier run is never overwritten, even by a run started in the same second. Leaving
    its `with` block unpublished (an error, Ctrl-C) deletes it, unless `keep_partial` kept the
    evidence so far. `side(name)` is a run folder inside another (each side of `profreport ab`),
    published with it; `RunFolder(path)` a folder as it is (the library's `run_dir`).
    """

    def __init__(self, path: Path) -> None:
        self.path = self._staging = self._name = path
        self._staged: tuple[Path, str] | None = None  # (parent, name) until published
        self._made: tuple[Path, ...] = ()  # the parent folders staging made, innermost first
        self.published: Path | None = None

    @classmethod
    def staged(cls, parent: Path, name: str) -> RunFolder:
        """A new staged folder under `parent` (made if missing; UsageError if it cannot be)."""
        not_a_file(parent)
        made = tuple(p for p in (parent, *parent.parents) if not p.exists())  # innermost first
        try:
            parent.mkdir(parents=True, exist_ok=True)
            path = Path(tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent))
            os.chmod(path, 0o777 & ~_umask())  # mkdtemp's 0700 would hide reports from CI
        except OSError as exc:
            raise UsageError(f"cannot write to {parent}: {exc.strerror or exc}") from None
        folder = cls(path)
        folder._staged, folder._name = (parent, name), parent / name
        folder._made = made
        return folder

    @classmethod
    def temporary(cls) -> RunFolder:
        """A new folder in the machine's temporary folder (the library's, until it is saved)."""
        return cls(Path(tempfile.mkdtemp(prefix="profreport-")))

    def side(self, name: str) -> RunFolder:
        """A run folder `name` inside this one while it is staged (each side of `profreport
        ab`), published with it."""
        return RunFolder(self.path / name)

    @property
    def record(self) -> Path:
        return self.path / RECORD

    def records(self) -> list[Path]:
        """The run records in it so far: its own, and its sides'."""
        return [p for p in (self.record, *sorted(self.path.glob(f"*/{RECORD}"))) if p.is_file()]

    def checkpoint(self, run: Document) -> Path:
        """Write `run` as the folder's run.json (atomically): the evidence so far, what a
        process that dies leaves behind (`profreport render` reads it)."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(self.record, dumps(run.to_json()))
        return self.record

    def write(self, name: str, content: str | bytes) -> Path:
        """Write one file of the run (a report, a table) into the folder, atomically."""
        path = self.path / name
        write_atomic(path, content)
        return path

    def publish(self, name: str | None = None) -> Path:
        """Rename the staged folder to its name (or `name`), numbered when that is taken."""
        if self._staged is None:
            raise RuntimeError(f"{self.path} is not a staged run folder")
        parent, name = self._staged[0], name or self._staged[1]
        candidate, n = parent / name, 1
        while True:
            try:
                # rename(2) replaces only an empty folder, so nothing written is ever lost; a
                # folder that holds anything (another run) makes it fail and we take the next name.
                os.rename(self.path, candidate)
                self.published = self.path = candidate
                self._staged = None
                return candidate
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
                n += 1
                candidate = parent / f"{name}-{n}"

    def keep_partial(self, refused: OSError) -> Path | None:
        """After a disk refused a file: the staged folder published as `<name>-partial` when it
        holds a record of the evidence so far, else left to be removed; returns the partial
        folder (None: nothing is kept). What is kept is whole: a file profreport writes is
        written atomically (the disk refusing it leaves the one before), every file a record
        names was read back whole, and a library's output folder the disk refused (a mode's
        traces, the light pass's: in no record yet) is removed."""
        if self._staged is None or not self.records():
            return None
        cut = Path(refused.filename) if isinstance(refused.filename, str) else None
        if cut is not None and cut.is_dir() and self.path in cut.parents:
            shutil.rmtree(cut, ignore_errors=True)
        try:
            return self.publish(f"{self._staged[1]}-partial")
        except OSError:
            return None

    def shown(self, path: str | Path) -> Path:
        """`path` as a message names it: a file in the staging folder by the run folder's name
        (where it was kept, or would have been published)."""
        path = Path(path)
        if path != self._staging and self._staging not in path.parents:
            return path
        return (self.published or self._name) / path.relative_to(self._staging)

    def move_traces(self, target: Path, copy: bool = False) -> None:
        """This run's traces (each mode's under tensorboard/, the light pass's) moved, or
        copied, into `target`, a folder that holds no run record; checked before anything
        moves, so a refusal (FileExistsError) leaves both folders as they were."""
        if (target / RECORD).exists():
            raise FileExistsError(f"{target} already holds a run record: save into a new folder")
        moves = [
            (p, target / TENSORBOARD / p.name)
            for p in sorted((self.path / TENSORBOARD).glob("*"))
            if p.is_dir() and p.name != "summary"
        ]
        if (self.path / LIGHT_TRACES).is_dir():
            moves.append((self.path / LIGHT_TRACES, target / LIGHT_TRACES))
        clashes = [str(to) for _, to in moves if to.exists()]
        if clashes:
            raise FileExistsError(f"{clashes[0]} exists: save into a new folder")
        (target / TENSORBOARD).mkdir(parents=True, exist_ok=True)
        for p, to in moves:
            if copy:
                shutil.copytree(p, to)
            else:
                shutil.move(str(p), str(to))

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def unstage(self) -> None:
        """The staged folder removed, and the parent folders staging made while they are empty:
        bad input found once the folder was staged (a model the capture cannot build) leaves
        nothing written, as bad input found before does."""
        if self._staged is None:
            return
        self.remove()
        for made in self._made:
            try:
                made.rmdir()
            except OSError:  # not empty: another run's, or something else's
                return

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._staged is not None:
            self.remove()
