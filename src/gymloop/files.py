"""Files gymloop writes and reads: one output helper, one input helper.

Every file the library writes (agent checkpoints, optimizer state, agent libraries, traces, ONNX
models, GIFs, a training run's metrics, curve and random level) goes through :func:`write_atomic`
(bytes in hand) or :func:`atomic_output` (a writer that wants a file name: Pillow, matplotlib).
Both refuse, before writing anything, an output path that exists and is not a regular file (a
folder, a FIFO, a device, a socket: replacing it would destroy it or hang) and an output that is one
of the command's own inputs; then they write a temporary file beside the target, ``fsync`` it,
rename it over the target and ``fsync`` the folder, so a crash or a kill leaves the old file or the
new one, never half a file. A temporary file left by a writer killed outright (SIGKILL, power loss)
is removed by the next write of the same path once its process is gone.

:func:`open_input` opens a file to read without ever blocking: a FIFO, device or folder is refused
with an :class:`~gymloop.errors.InputPathError` instead of waiting for a writer that never comes.

Example:
    >>> import os, tempfile
    >>> from gymloop.files import open_input, write_atomic
    >>> d = tempfile.mkdtemp()
    >>> write_atomic(os.path.join(d, "a.bin"), [b"12", b"34"])
    >>> with open_input(os.path.join(d, "a.bin")) as f:
    ...     f.read()
    b'1234'
    >>> write_atomic(d, [b"x"])
    Traceback (most recent call last):
    ...
    gymloop.errors.OutputPathError: cannot write ...: it is a folder, not a file; give the path of a file to write (a new one, or a regular file to replace)
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from typing import IO, Any

from .errors import InputPathError, OutputPathError

__all__ = ["AtomicOutput", "atomic_output", "check_output", "make_folder", "open_input", "write_atomic"]

_log = logging.getLogger(__name__)

PathLike = str | os.PathLike
_TMP = ".tmp"
# what follows "<name>.tmp": the writer's process id, a random tag, and the target's extension
# (kept so that writers choosing the format from the name, as Pillow does, see the right one)
_TMP_SUFFIX = re.compile(r"(\d+)(?:-[0-9a-f]+)?(?:\.[A-Za-z0-9]+)?")


def _kind(mode: int) -> str | None:
    """What a file of ``st_mode`` is when it is not a regular file (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output(path: PathLike, inputs: Iterable[PathLike] = ()) -> str:
    """``path`` as a string, after checking that writing it destroys nothing it should not.

    Args:
        path: the file to write (it may not exist yet).
        inputs: the files (or folders) the command reads; the output may be none of them.

    Raises:
        OutputPathError: ``path`` is empty, exists and is not a regular file (a folder, FIFO,
            device or socket), or is one of ``inputs`` (or a file inside an input folder that
            the command reads).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise OutputPathError(f"an output path must be a str or os.PathLike, got {path!r} of type {type(path).__name__}")
    p = os.fspath(path)
    if not isinstance(p, str) or not p:
        raise OutputPathError(f"an output path must be a non-empty file name, got {p!r}")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputPathError(f"cannot write {p}: {e.strerror or e}; give the path of a file you may write") from None
    if st is not None:
        kind = _kind(st.st_mode)
        if kind is not None:
            raise OutputPathError(
                f"cannot write {p}: it is {kind}, not a file; give the path of a file to write (a new one, or a regular "
                "file to replace)"
            )
    for inp in inputs:
        q = os.fspath(inp)
        if st is not None and _same(p, q):
            raise OutputPathError(
                f"cannot write {p}: it is one of this command's inputs ({q}), which writing it would destroy; write "
                "to another path"
            )
    return p


def make_folder(path: PathLike, what: str = "folder") -> str:
    """Create the folder ``path`` (and its parents) unless it exists; returns it as a string.

    Args:
        path: the folder.
        what: what it is for, for the message (``"the run folder"``).

    Raises:
        OutputPathError: ``path`` (or a parent) exists and is not a folder, or cannot be created.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        return p
    if os.path.lexists(p):
        raise OutputPathError(f"cannot use {p} as {what}: it exists and is not a folder; give a folder (a new one or an existing one)")
    try:
        os.makedirs(p, exist_ok=True)
    except OSError as e:
        raise OutputPathError(f"cannot create {what} {p}: {e.strerror or e}") from None
    return p


def _same(p: str, q: str) -> bool:
    try:
        return os.path.samefile(p, q)
    except (OSError, ValueError):
        return os.path.abspath(p) == os.path.abspath(q)


def write_atomic(path: PathLike, chunks: Iterable[bytes | bytearray | memoryview | Any], inputs: Iterable[PathLike] = ()) -> None:
    """Write ``chunks`` (bytes-like objects, numpy arrays included) to ``path`` atomically and durably.

    See the module docstring: the path is checked first (:func:`check_output`), the data go to a
    temporary file beside it that is ``fsync``-ed and renamed over it; the temporary file never
    outlives the call, whatever ends it (``KeyboardInterrupt`` included).

    Raises:
        OutputPathError: the path is refused (see :func:`check_output`), or the file cannot be
            written (no such folder, no permission, disk full: the system's reason is named).
    """
    with atomic_output(path, inputs) as tmp:
        try:
            with open(tmp, "xb") as f:
                for c in chunks:
                    f.write(c)
        except OSError as e:
            raise OutputPathError(f"cannot write {os.fspath(path)}: {e.strerror or e}") from None


class AtomicOutput:
    """A temporary file beside ``path`` that becomes ``path`` on :meth:`commit` (or vanishes on :meth:`discard`).

    For writers that stream over time (a video encoder): write :attr:`tmp`, then :meth:`commit`.
    :func:`atomic_output` wraps it in a ``with`` block. The temporary name keeps ``path``'s extension
    (``run/curve.png`` → ``run/curve.png.tmp<pid>-<tag>.png``) for writers that choose the format by it.

    Raises:
        OutputPathError: the path is refused (:func:`check_output`).
    """

    def __init__(self, path: PathLike, inputs: Iterable[PathLike] = ()) -> None:
        self.path = check_output(path, inputs)
        remove_stale_temporaries(self.path)
        ext = os.path.splitext(self.path)[1]
        if not re.fullmatch(r"\.[A-Za-z0-9]+", ext):
            ext = ""
        #: the temporary file to write
        self.tmp = f"{self.path}{_TMP}{os.getpid()}-{secrets.token_hex(4)}{ext}"

    def commit(self) -> None:
        """``fsync`` the temporary file, rename it over :attr:`path`, ``fsync`` the folder.

        Raises:
            OutputPathError: the temporary file is missing or cannot be made durable or renamed
                (it is removed).
        """
        try:
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self.tmp, self.path)
        except OSError as e:
            self.discard()
            raise OutputPathError(f"cannot write {self.path}: {e.strerror or e}") from None
        except BaseException:
            self.discard()
            raise
        _fsync_folder(os.path.dirname(self.path) or ".")

    def discard(self) -> None:
        """Remove the temporary file (if any); :attr:`path` stays as it was."""
        with contextlib.suppress(OSError):
            os.remove(self.tmp)


@contextlib.contextmanager
def atomic_output(path: PathLike, inputs: Iterable[PathLike] = ()) -> Iterator[str]:
    """A temporary file name beside ``path`` to write; renamed over ``path`` when the block ends normally.

    On an exception the temporary file is removed and ``path`` is left as it was (see :class:`AtomicOutput`).

    Raises:
        OutputPathError: the path is refused (:func:`check_output`), or the temporary file cannot be
            made durable or renamed.

    Example:
        >>> import os, tempfile
        >>> out = os.path.join(tempfile.mkdtemp(), "note.txt")
        >>> with atomic_output(out) as tmp:
        ...     with open(tmp, "w") as f:
        ...         _ = f.write("hello")
        >>> with open(out) as f:
        ...     f.read(), os.listdir(os.path.dirname(out))
        ('hello', ['note.txt'])
    """
    out = AtomicOutput(path, inputs)
    try:
        yield out.tmp
    except BaseException:
        out.discard()
        raise
    out.commit()


def _fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (best effort: not every system can open a folder)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` may still be running (``True`` when it cannot be told)."""
    if pid == os.getpid():
        return True
    if os.name != "posix" or pid <= 0:
        return os.name != "posix"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, owned by someone else
        return True
    return True


def remove_stale_temporaries(path: str) -> None:
    """Remove ``<path>.tmp<pid>[-<tag>][.<ext>]`` files whose writer process no longer exists."""
    folder = os.path.dirname(path) or "."
    prefix = os.path.basename(path) + _TMP
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it if e.name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        m = _TMP_SUFFIX.fullmatch(name[len(prefix):])
        if m is None or _pid_alive(int(m[1])):
            continue
        with contextlib.suppress(OSError):
            os.remove(os.path.join(folder, name))
            _log.info("removed %s, left by a writer (process %s) that was killed while writing %s", name, m[1], path)


def open_input(path: PathLike, what: str = "file") -> IO[bytes]:
    """Open ``path`` to read (binary), refusing at once what is not a regular file.

    The file is opened without blocking and checked on the open descriptor, so a FIFO (which would
    wait for a writer), a device or a folder is refused instead of read, and a file swapped for one
    between a check and the open is caught too.

    Args:
        path: the file.
        what: what the file is, for the message (``"checkpoint"``, ``"trace"``).

    Raises:
        InputPathError: ``path`` is not a regular file.
        OSError: the system's own errors (no such file, no permission), unchanged.
    """
    p = os.fspath(path)
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputPathError(f"cannot read {what} {p}: it is {kind}, not a file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
