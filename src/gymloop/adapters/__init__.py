"""Bridges to other RL libraries' environment APIs.

Each adapter lives in its own module and imports its library only when used, so ``import gymloop``
never needs them:

- :mod:`gymloop.adapters.entity_gym`: any ``entity_gym.env.Environment`` as a gymloop environment
  (:class:`~gymloop.adapters.entity_gym.EntityGymEnv`, :func:`~gymloop.adapters.entity_gym.from_entity_gym`;
  ``gymloop train entity_gym.examples:Xor`` uses it).
- :mod:`gymloop.adapters.entity_gym_vec`: any gymloop game as an ``entity_gym.env.VecEnv``
  (:class:`~gymloop.adapters.entity_gym_vec.GymloopVecEnv`), so enn-trainer can train it
  (:func:`~gymloop.adapters.entity_gym_vec.env_factory`).
- :mod:`gymloop.adapters.gymnasium`: a single-agent game as a ``gymnasium.Env``
  (:class:`~gymloop.adapters.gymnasium.GymloopEnv`) or a ``gymnasium.vector.VectorEnv``
  (:class:`~gymloop.adapters.gymnasium.GymloopVectorEnv`): padded ``Dict`` observations, flat action masks.
- :mod:`gymloop.adapters.sb3`: a single-agent game as a Stable-Baselines3 ``VecEnv``
  (:class:`~gymloop.adapters.sb3.GymloopSB3VecEnv`) over the Gymnasium adapter's vector env, for SB3's
  ``PPO`` and sb3-contrib's ``MaskablePPO`` at gymloop's batched speed.
- :mod:`gymloop.adapters.pettingzoo`: a multi-agent game as a ``pettingzoo.ParallelEnv``
  (:class:`~gymloop.adapters.pettingzoo.GymloopParallelEnv`, and its AEC view).
"""
