"""Bridges to other RL libraries' environment APIs.

Each adapter lives in its own module and imports its library only when used, so ``import gymloop``
never needs them:

- :mod:`gymloop.adapters.entity_gym`: any ``entity_gym.env.Environment`` as a gymloop environment
  (:class:`~gymloop.adapters.entity_gym.EntityGymEnv`), and any gymloop game as an
  ``entity_gym.env.VecEnv`` for enn-trainer.
"""
