"""Reading input documents with one-line errors, and writing output files safely: used by the
CLI and by `RunResult.save` in the library API."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from profreport.exits import UsageError

# The run folder's light-pass trace (light_pass.py): every mode interleaved with the profiler's
# calibration steps, read for the time breakdown; TensorBoard's traces are under tensorboard/.
LIGHT_TRACES = "time"
LIGHT_TRACE_NAME = "light.pt.trace.json.gz"
# The run folder's one timeline of every mode (render/timeline.py)
TIMELINE_NAME = "all_modes.timeline.json"


def read_text(path: Path, error: type[Exception]) -> str:
    """The UTF-8 text of `path`; `error` with one line ("no such file: ...", "cannot read ...:
    reason") when it cannot be read. Invalid UTF-8 is the caller's parse error to report."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"no such file: {path}") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None


def not_a_file(out: Path) -> None:
    """An --out folder (made if missing) cannot be an existing file (UsageError)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")


TENSORBOARD_EVENTS = "events.out.tfevents.*"


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
    writer = SummaryWriter(log_dir=str(folder))
    try:
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, global_step=0, walltime=walltime)
        writer.add_text(text_tag, text, global_step=0, walltime=walltime)
    finally:
        writer.close()
    (event_file,) = folder.glob(TENSORBOARD_EVENTS)
    return event_file


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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class StagedFolder:
    """A run folder that appears complete or not at all.

    Everything is written into a hidden sibling (`.<name>.partial-XXXX`); `publish()` renames it
    to `<name>`, or to `<name>-2`, `<name>-3`, ... when that name is taken, so an earlier run is
    never overwritten, even by a run started in the same second. Leaving the `with` block without
    publishing (an error, Ctrl-C) deletes the staging folder.
    """

    def __init__(self, parent: Path, name: str) -> None:
        self.parent, self.name = parent, name
        self.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent))
        os.chmod(self.path, 0o777 & ~_umask())  # mkdtemp's 0700 would hide reports from CI
        self.published: Path | None = None

    def publish(self) -> Path:
        candidate, n = self.parent / self.name, 1
        while True:
            try:
                # rename(2) replaces only an empty folder, so nothing written is ever lost; a
                # folder that holds anything (another run) makes it fail and we take the next name.
                os.rename(self.path, candidate)
                self.published = self.path = candidate
                return candidate
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
                n += 1
                candidate = self.parent / f"{self.name}-{n}"

    def __enter__(self) -> StagedFolder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.published is None:
            shutil.rmtree(self.path, ignore_errors=True)
