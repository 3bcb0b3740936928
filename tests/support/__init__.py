"""What the tests share: test games, entity types and helpers, each written once.

``pyproject.toml`` puts ``tests/`` on the path (pytest's ``pythonpath``), so test modules import
``from support.<module> import ...`` and process-backend and CLI tests name games as
``"support.<module>:<function>"`` (a worker process imports the module by that name).

- :mod:`support.entities`: entity and action types several test modules use alike (``Unit``,
  ``Move``, ``Enemy``, ``Ally``, ``Pos``, ``Fire``, ``Target``).
- :mod:`support.generic_game`: :func:`~support.generic_game.make_game`, a game loop whose
  observations, steps and episode ends a test injects, and the log it keeps.
- :mod:`support.train_games`: trivial games with an obvious optimal policy for learning tests, and
  ``tiny()``, a small training config.
- :mod:`support.workers_games`: module-level games for the process-worker tests, and the
  shared-memory segments in use.
- :mod:`support.fault_games`: games and an ``Environment`` that fault on purpose (raise, hang,
  exit, kill their worker) for the reliability tests.
- :mod:`support.farm`: a user's own two-player game (not a bundled one) for the render tests.
- :mod:`support.policies`: random torch policies of a realistic scale written as checkpoints,
  synthetic batches, and a counter of a method's calls.
- :mod:`support.adapters`: helpers of the Gymnasium, SB3 and PettingZoo adapter tests.
- :mod:`support.stepping`: a VecEnv driven with random legal actions (``trajectory``, ``steps``).
- :mod:`support.optioned`: a game with options (``--game-arg``) and a display (``line``).
- :mod:`support.pixel_game`: a game in pixel coordinates (``shooter``, 640 x 480) for the render tests.
- :mod:`support.typecheck_only_game`: a game whose module imports a name for type checkers only
  (``--game-arg`` must still type its options).

Fixtures live in ``conftest.py`` files: ``tests/conftest.py`` (every test), ``tests/render/conftest.py``
(the pygame display).
"""
