"""The learning suite: games written to test what the trainer learns, each with a scripted reference policy.

* :mod:`gymloop.games.suite.fires`: fire fighters on a grid (``fires``: one; ``fires3``: three sharing the score),
  a dense reward dominated by what the agents do not control.
"""
