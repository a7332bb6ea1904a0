"""What keeps tenants' commands away from serve's files (docs/live.md, "Trust model").

With ``run_as`` (``auth.AuthConfig.run_as``) tenants' commands run as other users than
serve, so file modes are what keeps them out of serve's state: serve creates its database
and lock ``0600`` (SQLite gives the database's ``-wal`` and ``-shm`` files the database's
mode), refuses to start when a file with secrets (the config, which holds token hashes or
tokens; the database; the TLS key) can be read by other users, and keeps the per-job
working directories under a root only it may write (``prepare_workdir``). Without
``run_as`` every command runs as serve's own user, which can read those files whatever
their mode: serve then only warns.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

#: the mode of the working-directory root: its owner writes, the users of ``run_as``
#: may pass through to their job's directory (0700, theirs) but not list the others
WORKDIR_ROOT_MODE = 0o711


def open_to_others(paths: Iterable[str | None]) -> list[tuple[str, int]]:
    """``(path, mode)`` of the existing files among ``paths`` that users other than the
    owner and its group may read or write."""
    found = []
    for path in paths:
        if path is None:
            continue
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            continue
        if mode & stat.S_IRWXO:
            found.append((path, mode))
    return found


def create_private(path: str) -> None:
    """Create ``path`` empty with mode 0600 when it does not exist (an existing file is
    left as it is: ``open_to_others`` reports it)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def prepare_workdir(root: str) -> None:
    """Create the root of the per-job working directories (mode ``WORKDIR_ROOT_MODE``)
    or check the existing one: a directory owned by serve's user that nobody else may
    write (else a tenant could put a link where another tenant's job directory is to
    be). Raises ``ValueError`` with the reason."""
    try:
        os.makedirs(root, mode=WORKDIR_ROOT_MODE, exist_ok=True)
        st = os.lstat(root)
    except OSError as exc:
        raise ValueError(f"cannot create {root}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{root} is not a directory")
    if st.st_uid != os.geteuid():
        raise ValueError(f"{root} is owned by uid {st.st_uid}, not by serve's user (uid {os.geteuid()})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ValueError(f"{root} may be written by other users (mode {stat.S_IMODE(st.st_mode):04o}; "
                         f"chmod {WORKDIR_ROOT_MODE:o} {root})")
    os.chmod(root, WORKDIR_ROOT_MODE)  # (makedirs's mode is cut by the umask; 0711 lets the users in)
