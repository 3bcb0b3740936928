"""Faults of game copies and of shards, as errors that name the copy, its seed and the fix.

Shared by the shard executors (:mod:`gymloop.runtime.shard`: a game's exception becomes a
:class:`~gymloop.errors.GameError`, a step that runs too long a
:class:`~gymloop.errors.GameTimeoutError`) and by the sharded backends
(:mod:`gymloop.runtime.sharded`: the first of several errors of one call, a lost shard started
again).
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from ..errors import GameError, GameTimeoutError, WorkerError
from .alarm import StepTimeout

__all__ = [
    "CLOSE_TIMEOUT_S",
    "MAX_START_FAILURES",
    "first_error",
    "game_error",
    "gave_up",
    "restarted_shard",
]

#: with on_game_error="restart": a copy that fails this many times in a row before its first
#: decision (fresh seeds each time) fails the call instead
MAX_START_FAILURES = 3
#: seconds the games' finally blocks (or environments' close()) may take in close_games (when a step_timeout is set)
CLOSE_TIMEOUT_S = 1.0


def game_error(
    e: BaseException, env: int, seed: int, what: str, timeout: float | None, late: str = "ask for its next decision",
) -> GameError:
    """The :class:`GameError` for exception ``e`` of copy ``env`` (a :class:`GameTimeoutError` for a step timeout).

    ``what`` names the copy's kind ("game copy", "environment copy"), ``late`` what it failed to do in
    time, ``timeout`` is the step timeout.
    """
    if isinstance(e, GameError):
        return e
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    # a game loop replays with gl.run; an environment copy is made again and reset with its seed
    replay = f"replay it with gl.run(game, agent, seed={seed})" if what == "game copy" else f"seed {seed}"
    if isinstance(e, StepTimeout):
        tb = tb.replace("gymloop.runtime.alarm.StepTimeout", "step timeout")
        err: GameError = GameTimeoutError(
            f"{what} {env} did not {late} within step_timeout={timeout:g} s: it loops or waits "
            f"(the traceback below shows where it was); {replay}, or raise "
            f"step_timeout if its steps are legitimately this slow\n--- where it was ---\n{tb}",
            env_index=env, seed=seed, original_traceback=tb,
        )
    else:
        err = GameError(
            f"{what} {env} raised {type(e).__name__}: {e} ({replay})"
            f"\n--- original traceback ---\n{tb}",
            env_index=env, seed=seed, original_traceback=tb,
        )
    err.__cause__ = e
    return err


def gave_up(err: GameError, failures: int, before_first_decision: bool) -> GameError:
    """``err`` told that ``on_game_error='restart'`` gave up on its copy after ``failures`` failures in a row."""
    when = " before its first decision" if before_first_decision else ""
    comma = "," if before_first_decision else ""
    err.args = (
        err.args[0] + f"\n(it failed{when} {failures} times in a row{comma} with fresh seeds, so "
        "on_game_error='restart' gave up on it)",
    )
    return err


def first_error(errors: Sequence[BaseException], others: str = "also failed in this call") -> BaseException:
    """The first of ``errors`` (in env order), its message telling the first line of each other one."""
    first = errors[0]
    if len(errors) > 1 and first.args and isinstance(first.args[0], str):
        rest = "; ".join(str(e).split("\n", 1)[0] for e in errors[1:])
        first.args = (first.args[0] + f"\n({others}: {rest})", *first.args[1:])
    return first


def restarted_shard(why: str, shard: int, envs: range, truncated: bool) -> WorkerError:
    """The fault of a worker (or actor) started again with its copies (``restart_workers=True``), lost because ``why``."""
    ends = "; their open episodes end as truncated" if truncated else ""
    return WorkerError(
        f"{why}\n-> started again with its game copies (restart_workers=True){ends}", worker=shard, env_indices=envs,
    )
