"""The learning suite: games written to test training, not to suit it (``benchmarks/learning_suite.py``, docs/learning_suite.md).

Each module is one game with a scripted reference agent, registered by name:

* :mod:`~gymloop.games.suite.invaders` (``invaders``): a real-time arcade game, dodging and shooting;
* :mod:`~gymloop.games.suite.keydoor` (``keydoor``): a long-horizon sparse reward (key, door, exit);
* :mod:`~gymloop.games.suite.dispatch` (``dispatch``): select-entity among 20-60 waiting orders;
* :mod:`~gymloop.games.suite.junction` (``junction``): a global decision (a traffic light's phase);
* :mod:`~gymloop.games.suite.cycles` (``cycles``): two agents in self-play (light cycles);
* :mod:`~gymloop.games.suite.fires` (``fires``: one fighter; ``fires3``: three sharing the score): a dense
  reward dominated by what the agents do not control (fires spawn and spread).
"""
