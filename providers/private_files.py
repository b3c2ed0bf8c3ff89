"""Files that only their owner may read (credentials.json, the service's token): one that group
or others can read is made 0600 as Grove reads it, with a one-line warning. Stdlib only.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

log = logging.getLogger("grove.files")
OWNER_ONLY = 0o600


def exposed_mode(path: Path) -> int | None:
    """The permission bits of `path` when group or others have any, else None (also for a
    file that is not there)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    return mode if mode & (stat.S_IRWXG | stat.S_IRWXO) else None


def keep_private(path: Path) -> None:
    """Make `path` 0600 when others could read it, saying so in one warning (logger
    `grove.files`, a line on stderr on the command line); one it cannot change (another
    user's) is left as it is, and the warning says how to fix it."""
    mode = exposed_mode(path)
    if mode is None:
        return
    try:
        path.chmod(OWNER_ONLY)
    except OSError as exc:
        log.warning(
            "Warning: %s can be read by other users (mode %o) and Grove cannot change that "
            "(%s); run: chmod 600 %s",
            path, mode, exc.strerror or exc, path,
        )  # fmt: skip
        return
    log.warning("Warning: %s could be read by other users (mode %o); it is now 0600", path, mode)
