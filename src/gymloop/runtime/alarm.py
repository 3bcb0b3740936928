"""The step deadline inside an executor: a ``SIGALRM`` that interrupts the game running past it.

An executor arms one real-time timer (``setitimer(ITIMER_REAL)``) per call that resumes games
(``start``, ``step``, ``close_games``) and disarms it when the call ends: two system calls per batch,
nothing per game copy. When the timer fires, the handler asks the executor whether game code is
running (:meth:`AlarmOwner.alarm_may_raise`: a game's own frames, never the executor's or the
agent's ``act``); if so it raises :class:`StepTimeout` right there, inside the game, and the
executor turns it into a :class:`~gymloop.errors.GameTimeoutError` naming that copy and its seed.
A game that loops (``while True: pass``) or waits (``time.sleep``, a blocking read: the signal
interrupts the system call) is caught this way; a game stuck inside C code that never returns to
Python is not (in a worker process the main process then kills the worker, see
:mod:`gymloop.runtime.workers`). When executor code is running at that moment, the handler tries
again a few milliseconds later. After raising it re-arms a full ``step_timeout``, so the rest of the
step gets a fresh budget and a game that swallows the exception is interrupted again.

Limits: signals are delivered to the main thread only, so the alarm works only when the executor runs
in its process's main thread (``VecEnv`` stepped from another thread has no in-process deadline; its
worker processes still have theirs, and the main process still kills a worker that does not answer).
The handler is installed at the first armed call (and checked at every reset) and the previous
``SIGALRM`` handler is restored when the last executor using it closes; while installed it forwards
alarms that are not a step's to the previous handler, and a timer the caller had pending is put back
(with its remaining time) when a step disarms. Cost per step: about 1.5 microseconds.

Code that must not be cut in half by the alarm (moving process-wide state in and out around a game's
call, as the entity-gym adapter's random streams do) runs inside :func:`deferred`: a deadline that
passes there raises nothing until the section has ended (the handler looks again every 5 ms).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any, Protocol

__all__ = ["StepTimeout", "AlarmOwner", "StepAlarm", "deferred"]

_RETRY_S = 0.005  # the timer fired while executor code ran: look again this much later


class StepTimeout(BaseException):
    """Raised inside a game that ran past the step deadline (a ``BaseException`` so that a game's
    ``except Exception`` does not swallow it); executors turn it into ``GameTimeoutError``."""


class AlarmOwner(Protocol):
    """An executor that arms a :class:`StepAlarm`."""

    def alarm_may_raise(self, frame: Any) -> bool:
        """Whether ``frame`` (the innermost Python frame when the timer fired) is game code."""


# the main thread's id (alarms work there only); None where the platform has no setitimer
_MAIN = threading.main_thread().ident if hasattr(signal, "setitimer") else None
_active: StepAlarm | None = None  # the alarm of the call running now
_previous: Any = None  # the SIGALRM handler before ours
_installed = False
_users = 0  # alarms that armed at least once and are not released
_stale = False  # our timer expired right before a disarm: its signal may still be delivered
_deferring = 0  # deferred() sections running now (nested ones counted)


def _handler(signum: int, frame: Any) -> None:
    global _stale
    a = _active
    if a is None:
        if _stale:  # our own expiry, handled after the step ended
            _stale = False
            return
        prev = _previous
        if callable(prev):
            prev(signum, frame)
        return
    if not _deferring and frame.f_code not in _DEFERRAL_CODE and a.owner.alarm_may_raise(frame):
        signal.setitimer(signal.ITIMER_REAL, a.timeout or _RETRY_S)  # the rest of the call gets a fresh budget
        raise StepTimeout
    signal.setitimer(signal.ITIMER_REAL, _RETRY_S)


class _Deferred:
    """The section :func:`deferred` returns (one object, reentrant: it counts how deep it is entered)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _deferring
        _deferring += 1

    def __exit__(self, *exc: object) -> None:
        global _deferring
        _deferring -= 1


_DEFERRED = _Deferred()


def deferred() -> _Deferred:
    """An alarm-deferred section: the step alarm raises no :class:`StepTimeout` inside ``with deferred():``.

    A deadline that passes inside is acted on once the section has ended (the handler looks again
    every 5 ms). For code that moves process-wide state in and out around a game's call, which an
    exception half-way through would leave half moved; the game's own call must run outside it (a game
    that loops inside would never be interrupted). Sections nest; entering and leaving one costs
    about 0.2 µs, nothing is done per step for code that does not use them.

    Example:
        >>> import random
        >>> from gymloop.runtime.alarm import deferred
        >>> with deferred():  # a step deadline passing here waits until both lines have run
        ...     saved = random.getstate()
        ...     random.seed(1)
    """
    return _DEFERRED




def _install() -> None:
    global _previous, _installed
    _previous = signal.signal(signal.SIGALRM, _handler)
    _installed = True


class StepAlarm:
    """One executor's deadline: :meth:`arm` before resuming games, :meth:`disarm` after.

    Args:
        owner: the executor (decides whether game code is running).
        timeout: seconds; ``None`` arms nothing.
    """

    __slots__ = ("owner", "timeout", "_registered")

    def __init__(self, owner: AlarmOwner, timeout: float | None) -> None:
        self.owner = owner
        self.timeout = timeout
        self._registered = False

    def arm(self, timeout: float | None = None, check: bool = False) -> Any:
        """Start the deadline (``timeout`` or the alarm's own); returns a token for :meth:`disarm`.

        Returns ``None`` (and arms nothing) without a timeout or outside the main thread.
        ``check``: make sure the handler is still ours (``signal.getsignal`` costs microseconds, so
        executors check at ``start`` only: a ``SIGALRM`` handler installed by someone else between
        two steps takes the step alarm's signals until the next reset).
        """
        global _active, _users
        t = self.timeout if timeout is None else timeout
        if t is None or threading.get_ident() != _MAIN:
            return None
        if not _installed or (check and signal.getsignal(signal.SIGALRM) is not _handler):
            _install()
        if not self._registered:
            self._registered = True
            _users += 1
        prev = _active
        _active = self
        old = signal.setitimer(signal.ITIMER_REAL, t)
        return (prev, old[0], old[1], time.monotonic() if old[0] else 0.0)

    def disarm(self, token: Any) -> None:
        """End the deadline started by :meth:`arm` (put back a timer the caller had pending)."""
        global _active, _stale
        if token is None:
            return
        prev, delay, interval, t0 = token
        _active = prev
        # an expiry whose signal is handled after this point is ours, not the previous handler's
        _stale = prev is None
        if delay:
            left = signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - t0), 1e-6), interval)
        else:
            left = signal.setitimer(signal.ITIMER_REAL, 0)
        if left[0] != 0.0:  # it had not expired: no signal of ours is pending
            _stale = False

    def release(self) -> None:
        """This executor is closed: restore the previous handler once no executor uses ours."""
        global _users, _installed
        if not self._registered:
            return
        self._registered = False
        _users -= 1
        if _users == 0 and _installed and threading.get_ident() == _MAIN:
            _installed = False
            if signal.getsignal(signal.SIGALRM) is _handler:
                signal.signal(signal.SIGALRM, _previous if _previous is not None else signal.SIG_DFL)


#: frames where the handler never raises (it looks again later): the deferred section's own code (the handler may
#: run there before ``__enter__`` has counted, or after ``__exit__`` has: the first check of a Python call), and the
#: alarm's own methods (a StepTimeout raised inside ``disarm`` would leave the timer armed past ``release``, when a
#: SIGALRM ends the process)
_DEFERRAL_CODE = frozenset({
    deferred.__code__, _Deferred.__enter__.__code__, _Deferred.__exit__.__code__,
    StepAlarm.arm.__code__, StepAlarm.disarm.__code__, StepAlarm.release.__code__,
})
