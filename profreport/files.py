"""Writing output files safely: used by the CLI and by `RunResult.save` in the library API."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


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
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
