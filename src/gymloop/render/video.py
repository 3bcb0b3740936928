"""Writing frames (RGB numpy arrays) to a video file: GIF with Pillow, MP4 with imageio-ffmpeg.

Both writers take frames one at a time (``add``), so a recording never holds raw frames in
memory: MP4 frames stream to ffmpeg (H.264, ``yuv420p``; imageio-ffmpeg ships the binary), GIF
frames are kept palettized until :meth:`GifWriter.close` writes the file. In a GIF, Pillow merges
a frame identical to the previous one into it (a longer frame).

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

import logging
import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import numpy as np

from ..errors import ConfigError
from ._deps import imageio_ffmpeg_module, pil_image

__all__ = ["VIDEO_FORMATS", "GifWriter", "Mp4Writer", "open_video", "write_video"]

log = logging.getLogger(__name__)

VIDEO_FORMATS = (".gif", ".mp4")


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
        os.makedirs(d, exist_ok=True)

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

    Args:
        path: the ``.gif`` file to write (parent folders are created).
        fps: frames per second (GIF stores delays in 1/100 s).
    """

    def __init__(self, path: str | os.PathLike, fps: float) -> None:
        super().__init__(path, fps)
        self._image = pil_image()
        self._frames: list[Any] = []

    def add(self, frame: np.ndarray) -> None:
        """Add one ``(height, width, 3)`` uint8 RGB frame."""
        a = self._check(frame)
        self._frames.append(self._image.fromarray(a).convert("P", palette=self._image.Palette.ADAPTIVE))

    def close(self) -> None:
        """Write the file."""
        if not self._frames:
            raise ConfigError(f"no frames to write to {self.path}; the game made no decision (check --max-steps)")
        self._makedirs()
        first, rest = self._frames[0], self._frames[1:]
        first.save(self.path, save_all=True, append_images=rest, duration=max(10, round(1000 / self.fps)), loop=0)
        self._frames = []
        log.info("wrote %s: %d frames", self.path, self.frames)

    def abort(self) -> None:
        """Drop the frames; nothing is written."""
        self._frames = []


class Mp4Writer(_Writer):
    """Writes an H.264 MP4 by streaming frames to ffmpeg (from imageio-ffmpeg).

    Args:
        path: the ``.mp4`` file to write (parent folders are created).
        fps: frames per second.
    """

    def __init__(self, path: str | os.PathLike, fps: float) -> None:
        super().__init__(path, fps)
        self._iio = imageio_ffmpeg_module()
        self._gen: Any = None

    def add(self, frame: np.ndarray) -> None:
        """Add one ``(height, width, 3)`` uint8 RGB frame (odd sizes are padded to even)."""
        a = self._check(frame)
        h, w = a.shape[0], a.shape[1]
        if h % 2 or w % 2:  # yuv420p needs even sizes
            a = np.pad(a, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        if self._gen is None:
            self._makedirs()
            self._gen = self._iio.write_frames(
                self.path, (a.shape[1], a.shape[0]), fps=self.fps, codec="libx264", pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p", macro_block_size=2, ffmpeg_log_level="error",
            )
            self._gen.send(None)
        self._gen.send(np.ascontiguousarray(a).tobytes())

    def close(self) -> None:
        """Finish the file (ffmpeg writes the index)."""
        if self._gen is None:
            raise ConfigError(f"no frames to write to {self.path}; the game made no decision (check --max-steps)")
        self._gen.close()
        self._gen = None
        log.info("wrote %s: %d frames", self.path, self.frames)

    def abort(self) -> None:
        """Stop ffmpeg and remove the partial file."""
        if self._gen is not None:
            try:
                self._gen.close()
            finally:
                self._gen = None
                if os.path.exists(self.path):
                    os.remove(self.path)


def open_video(path: str | os.PathLike, fps: float) -> GifWriter | Mp4Writer:
    """A writer for ``path`` by its extension: ``.gif`` → :class:`GifWriter`, ``.mp4`` → :class:`Mp4Writer`.

    Raises:
        ConfigError: another extension, a frame rate not above 0, or the writer's package
            (Pillow, imageio-ffmpeg) is missing.
    """
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext not in VIDEO_FORMATS:
        raise ConfigError(f"cannot write video {p!r}: the file name must end in .gif or .mp4, got "
                          f"{ext or 'no extension'!r}; e.g. --out run.gif or --out run.mp4")
    return GifWriter(p, fps) if ext == ".gif" else Mp4Writer(p, fps)


def write_video(path: str | os.PathLike, frames: Iterable[np.ndarray], fps: float = 10.0) -> int:
    """Write RGB frames to a ``.gif`` or ``.mp4`` file; returns the number of frames written."""
    with open_video(path, fps) as w:
        for f in frames:
            w.add(f)
    return w.frames
