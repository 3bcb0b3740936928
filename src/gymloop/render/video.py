"""Writing frames (RGB numpy arrays) to a video file: GIF with Pillow, MP4 with imageio-ffmpeg.

Both writers take frames one at a time (``add``), so a recording never holds raw frames in
memory: MP4 frames stream to ffmpeg (H.264, ``yuv420p``; imageio-ffmpeg ships the binary), GIF
frames are palettized and kept until they fill :data:`GIF_CHUNK_BYTES`, then Pillow encodes them
as one chunk of the file (a temporary file until :meth:`GifWriter.close`), so a long recording
holds at most one chunk. In a GIF, Pillow merges a frame identical to the previous one into it (a
longer frame), within a chunk.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from gymloop.render import write_video
    >>> frames = [np.full((32, 48, 3), v, np.uint8) for v in (0, 128, 255)]
    >>> path = os.path.join(tempfile.mkdtemp(), "fade.gif")
    >>> write_video(path, frames, fps=10)
    3
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import numpy as np

from ..errors import ConfigError, OutputPathError
from ..files import AtomicOutput, check_output
from ._deps import imageio_ffmpeg_module, pil_image

__all__ = ["GIF_CHUNK_BYTES", "VIDEO_FORMATS", "GifWriter", "Mp4Writer", "open_video", "write_video"]

log = logging.getLogger(__name__)

VIDEO_FORMATS = (".gif", ".mp4")
GIF_CHUNK_BYTES = 64 << 20
"""Palettized GIF frames (one byte per pixel) a :class:`GifWriter` holds before it encodes them."""


def _check_fps(fps: Any) -> float:
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise ConfigError(f"a video needs a frame rate above 0, got fps={fps!r}; e.g. --fps 10")
    return float(fps)


class _Writer:
    def __init__(self, path: str | os.PathLike, fps: float) -> None:
        self.path = os.fspath(path)
        self.fps = _check_fps(fps)
        self.frames = 0
        self.size: tuple[int, int] | None = None  # (width, height)
        self._check_path()

    def _check_path(self) -> None:
        """Fail before the game runs when the file cannot be made: ``path`` or a parent is not a folder."""
        if os.path.isdir(self.path):
            raise ConfigError(f"cannot write video {self.path!r}: it is a folder; expected a file name such as "
                              f"{os.path.join(self.path, 'run' + os.path.splitext(self.path)[1])}")
        d = os.path.dirname(os.path.abspath(self.path))
        while not os.path.exists(d):
            d = os.path.dirname(d)
        if not os.path.isdir(d):
            raise ConfigError(f"cannot write video {self.path!r}: {d!r} is a file, not a folder; choose another --out")
        check_output(self.path)  # (a FIFO, a device, a socket: refused before the game runs)

    def _check(self, frame: Any) -> np.ndarray:
        a = np.asarray(frame)
        if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
            raise ConfigError(f"a video frame must be a (height, width, 3) uint8 RGB array, got shape {a.shape} "
                              f"dtype {a.dtype}; gymloop.render.surface_to_array converts a pygame surface")
        size = (a.shape[1], a.shape[0])
        if self.size is None:
            self.size = size
        elif size != self.size:
            raise ConfigError(f"every frame of {self.path} must be {self.size[0]}x{self.size[1]} pixels like the "
                              f"first, got {size[0]}x{size[1]} for frame {self.frames}")
        self.frames += 1
        return a

    def _makedirs(self) -> None:
        d = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise self._cannot_write(e) from None

    def _cannot_write(self, err: object) -> ConfigError:
        return ConfigError(f"cannot write video {self.path!r}: {err}; choose a writable file (--out)")

    def _no_frames(self) -> ConfigError:
        return ConfigError(f"no frames to write to {self.path}: none was added (in `gymloop record`: the game made "
                           f"no decision; check --max-steps)")

    def close(self) -> None:
        """Finish the file (each writer defines it)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Drop a partly written file (each writer defines it)."""
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class GifWriter(_Writer):
    """Writes an animated GIF (looping) of frames added one by one; the file appears at :meth:`close`.

    Frames are palettized as they come (exactly when a frame has at most 256 colours, else by
    Pillow's fast octree) and encoded in chunks of :data:`GIF_CHUNK_BYTES` into a temporary file,
    so memory stays bounded however long the recording.

    Args:
        path: the ``.gif`` file to write (parent folders are created).
        fps: frames per second (GIF stores delays in 1/100 s; above 50, viewers slow it down).
        chunk_bytes: palettized frame bytes held before a chunk is encoded.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from gymloop.render import GifWriter
        >>> with GifWriter(os.path.join(tempfile.mkdtemp(), "a.gif"), fps=5) as w:
        ...     w.add(np.zeros((16, 16, 3), np.uint8))
        >>> w.frames, w.size
        (1, (16, 16))
    """

    def __init__(self, path: str | os.PathLike, fps: float, chunk_bytes: int = GIF_CHUNK_BYTES) -> None:
        super().__init__(path, fps)
        self._image = pil_image()
        self._frames: list[Any] = []
        self._held = 0
        self._chunk_bytes = chunk_bytes
        self._out: AtomicOutput | None = None  # the temporary file, from the first chunk on
        self._file: Any = None
        if self.fps > 50:
            log.warning("%s: a GIF at %g fps has frame delays under 20 ms, which most viewers and browsers show "
                        "at 10 fps; use an fps of at most 50, or write an .mp4", self.path, self.fps)

    def add(self, frame: np.ndarray) -> None:
        """Add one ``(height, width, 3)`` uint8 RGB frame."""
        a = self._check(frame)
        Image = self._image
        im = Image.fromarray(a)
        if im.getcolors(256) is not None:  # (a drawn board: its few colours, exactly)
            p = im.convert("P", palette=Image.Palette.ADAPTIVE)
        else:
            p = im.quantize(256, method=Image.Quantize.FASTOCTREE)
        self._frames.append(p)
        self._held += a.shape[0] * a.shape[1]
        if self._held >= self._chunk_bytes:
            self._flush(last=False)

    def _flush(self, last: bool) -> None:
        """Encode the held frames as the next chunk of the file (the whole file when it is the only one)."""
        frames, self._frames, self._held = self._frames, [], 0
        if not frames:
            return
        buf = io.BytesIO()
        frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:],
                       duration=max(10, round(1000 / self.fps)), loop=0)
        data = buf.getvalue()
        del frames, buf
        try:
            if self._file is None:
                self._makedirs()
                self._out = AtomicOutput(self.path)
                self._file = open(self._out.tmp, "wb")
                self._file.write(data if last else data[:-1])  # (the trailer comes at the end)
            else:
                self._file.write(gif_frames(data))
                if last:
                    self._file.write(b"\x3b")
        except OutputPathError:
            self.abort()
            raise
        except OSError as e:
            self.abort()
            raise self._cannot_write(e) from None

    def close(self) -> None:
        """Write the last chunk and finish the file."""
        if self.frames == 0:
            raise self._no_frames()
        self._flush(last=True)
        f, self._file = self._file, None
        out, self._out = self._out, None
        assert f is not None and out is not None  # (made by the first chunk)
        try:
            f.close()
        except OSError as e:
            out.discard()
            raise self._cannot_write(e) from None
        out.commit()
        log.info("wrote %s: %d frames", self.path, self.frames)

    def abort(self) -> None:
        """Drop the frames and any partial file; nothing is written."""
        self._frames, self._held = [], 0
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
        if self._out is not None:
            self._out.discard()
            self._out = None


def gif_frames(data: bytes) -> bytes:
    """The frames of a GIF file's bytes, to append to another GIF of the same size: its graphic
    control extensions and images, each image with its own colour table (the file's global one
    where it had none); the header, application extensions, comments and trailer are left out.

    Raises:
        ConfigError: ``data`` is not a GIF file.

    Example:
        >>> import io
        >>> from PIL import Image
        >>> buf = io.BytesIO()
        >>> Image.new("P", (4, 4)).save(buf, format="GIF")
        >>> gif_frames(buf.getvalue())[:1]      # an image descriptor
        b','
    """
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 13:
        raise ConfigError(f"not a GIF file: starts with {data[:6]!r}")
    flags = data[10]
    pos = 13
    gct = b""
    if flags & 0x80:
        gct = data[pos:pos + (3 << ((flags & 7) + 1))]
        pos += len(gct)
    out = bytearray()

    def skip_blocks(p: int) -> int:
        while data[p]:
            p += data[p] + 1
        return p + 1

    while data[pos] != 0x3B:
        start = pos
        if data[pos] == 0x21:  # an extension: keep the graphic control ones (delay, disposal, transparency)
            pos = skip_blocks(pos + 2)
            if data[start + 1] == 0xF9:
                out += data[start:pos]
        elif data[pos] == 0x2C:  # an image descriptor, its colour table, its LZW data
            desc = bytearray(data[pos:pos + 10])
            pos += 10
            if desc[9] & 0x80:
                n = 3 << ((desc[9] & 7) + 1)
                table = data[pos:pos + n]
                pos += n
            else:
                desc[9] = (desc[9] & 0x40) | 0x80 | (flags & 7)
                table = gct
            body_start = pos
            pos = skip_blocks(pos + 1)
            out += desc + table + data[body_start:pos]
        else:
            raise ConfigError(f"not a GIF file: unknown block 0x{data[pos]:02x} at byte {pos}")
    return bytes(out)


class Mp4Writer(_Writer):
    """Writes an H.264 MP4 by streaming frames to ffmpeg (from imageio-ffmpeg).

    Args:
        path: the ``.mp4`` file to write (parent folders are created).
        fps: frames per second.

    Raises:
        ConfigError: ffmpeg stopped or wrote no file (the path cannot be written, ...).

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from gymloop.render import Mp4Writer
        >>> path = os.path.join(tempfile.mkdtemp(), "a.mp4")
        >>> with Mp4Writer(path, fps=5) as w:
        ...     for v in (0, 255):
        ...         w.add(np.full((16, 16, 3), v, np.uint8))
        >>> w.frames, os.path.getsize(path) > 0
        (2, True)
    """

    def __init__(self, path: str | os.PathLike, fps: float) -> None:
        super().__init__(path, fps)
        self._iio = imageio_ffmpeg_module()
        self._gen: Any = None
        self._out: AtomicOutput | None = None  # ffmpeg writes a temporary file, renamed at close

    def add(self, frame: np.ndarray) -> None:
        """Add one ``(height, width, 3)`` uint8 RGB frame (odd sizes are padded to even)."""
        a = self._check(frame)
        h, w = a.shape[0], a.shape[1]
        if h % 2 or w % 2:  # yuv420p needs even sizes
            a = np.pad(a, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        if self._gen is None:
            self._makedirs()
            self._out = AtomicOutput(self.path)
            gen = self._iio.write_frames(
                self._out.tmp, (a.shape[1], a.shape[0]), fps=self.fps, codec="libx264", pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p", macro_block_size=2, ffmpeg_log_level="error",
            )
            gen.send(None)  # starts ffmpeg
            self._gen = gen
        try:
            self._gen.send(np.ascontiguousarray(a).tobytes())
        except OSError as e:  # ffmpeg exited (it cannot write the file, ...); its own message went to stderr
            self.abort()
            raise self._cannot_write(str(e).splitlines()[0] if str(e) else e) from None

    def close(self) -> None:
        """Finish the file (ffmpeg writes the index)."""
        if self._gen is None:
            raise self._no_frames()
        gen, self._gen = self._gen, None
        out, self._out = self._out, None
        assert out is not None  # (made with the generator)
        try:
            gen.close()  # waits for ffmpeg to finish the file (imageio-ffmpeg does not check its exit code)
            if not os.path.isfile(out.tmp) or os.path.getsize(out.tmp) == 0:
                raise ConfigError(f"ffmpeg wrote no video to {self.path!r} (its messages are on stderr); check the "
                                  f"path and free disk space, or write a .gif")
        except BaseException:
            out.discard()
            raise
        out.commit()
        log.info("wrote %s: %d frames", self.path, self.frames)

    def abort(self) -> None:
        """Stop ffmpeg and remove the partial file (errors doing so are logged, not raised)."""
        if self._gen is None:
            return
        gen, self._gen = self._gen, None
        try:
            gen.close()
        except Exception:
            log.warning("stopping ffmpeg for %s failed", self.path, exc_info=True)
        if self._out is not None:
            self._out.discard()  # (the file at the path itself was never touched)
            self._out = None


def open_video(path: str | os.PathLike, fps: float) -> GifWriter | Mp4Writer:
    """A writer for ``path`` by its extension: ``.gif`` → :class:`GifWriter`, ``.mp4`` → :class:`Mp4Writer`.

    Raises:
        ConfigError: another extension, a frame rate not above 0, a ``path`` that is a folder
            (or under a file), or the writer's package (Pillow, imageio-ffmpeg) is missing.

    Example:
        >>> from gymloop.render import open_video
        >>> type(open_video("run.mp4", fps=10)).__name__       # nothing is written before a frame
        'Mp4Writer'
    """
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext not in VIDEO_FORMATS:
        raise ConfigError(f"cannot write video {p!r}: the file name must end in .gif or .mp4, got "
                          f"{ext or 'no extension'!r}; e.g. --out run.gif or --out run.mp4")
    return GifWriter(p, fps) if ext == ".gif" else Mp4Writer(p, fps)


def write_video(path: str | os.PathLike, frames: Iterable[np.ndarray], fps: float = 10.0) -> int:
    """Write RGB frames to a ``.gif`` or ``.mp4`` file; returns the number of frames written.

    On an error the file is not left half-written (see :meth:`GifWriter.abort`, :meth:`Mp4Writer.abort`).

    Raises:
        ConfigError: as :func:`open_video`; no frames; frames of another shape than the first.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from gymloop.render import write_video
        >>> write_video(os.path.join(tempfile.mkdtemp(), "b.gif"), [np.zeros((8, 8, 3), np.uint8)] * 2)
        2
    """
    with open_video(path, fps) as w:
        for f in frames:
            w.add(f)
    return w.frames
