"""enn-trainer / rogue-net checkpoints as gymloop agents (numpy inference, no torch, no enn-trainer).

An enn-trainer checkpoint is a folder holding ``config.ron`` (the ``TrainConfig``), ``state.ron``
(training step, observation and action spaces) and ``state.agent.msgpack`` (the ``RogueNet``
weights), or a ``.roguenet`` tar archive of those three files. ``gl.load`` hands both to this module,
which converts them into the tensors and metadata of a
:class:`~gymloop.nn.numpy_policy.NumpyPolicy` and returns an ordinary
:class:`~gymloop.neural.NeuralAgent`::

    agent = gl.load("ckpt/latest-step000000016384")         # the checkpoint folder
    agent = gl.load("multisnake.roguenet", greedy=True)     # or its archive
    enn.convert("multisnake.roguenet", "multisnake.safetensors")  # a gymloop checkpoint of it

A game then names its entity types, features and labels as the checkpoint does
(``@gl.entity(name="SnakeHead")``, an Enum with members ``up``, ``down``, ... whose class is named as
the action); :func:`forward` runs observations given in entity-gym's batched layout instead.

**How rogue-net maps onto gymloop's network.** gymloop's entity transformer was modelled on
rogue-net, so a checkpoint converts weight by weight: ``readout=False`` (every block over every
entity, value from the mean of the final embeddings), ``mlp_ratio=4``, ``norm_clip=5``, the input
normalisers' frozen statistics (rogue-net in ``eval()`` mode), the shared relative-position tables,
categorical heads and select-entity query/key projections. Global features are appended to every
entity's features, as in rogue-net. With a global categorical action, rogue-net adds one
``__global__`` token (embedded from the global features) after all entities, and that token is the
action's actor; here it is an entity type named ``__global__`` with no features of its own (the
global features are appended to it like to every type). A game observes it with
:class:`GlobalToken`::

    obs = gl.Obs().globals(Flags(negate=1)).entities(inputs).actor(enn.GlobalToken())
    choice = agent.act(obs, Output)

Keep it in every observation of such a network (as an actor or with ``obs.entities``): rogue-net
always sees it.

**Select-entity actions.** An enn-trainer action space does not record which entity types an
action selects among (rogue-net scores whatever candidates the environment offers). By default the
game decides: the candidates are the entities of the types its ``gl.SelectEntity(..., among=...)``
names; ``load(..., game=g)`` fixes them from the game's declared actions, and ``among=`` sets them
explicitly.

**What is refused.** Only rogue-net's attention transformer with grid relative positions is
supported: ``pooling``, ``translation``, and the relative-position options ``scale != 1``,
``per_entity_values``, ``exclude_entities``, key/value relpos projections, ``radial``,
``distance``, rotations and ``interpolate`` raise :class:`~gymloop.errors.CheckpointError` naming the
option, as do unknown config versions, unknown fields of the network config or of the observation
and action spaces (the training settings of ``config.ron`` are not read), unknown action-space
kinds, a truncated or corrupt file, a file that is not an enn-trainer checkpoint, and weights whose
names or shapes disagree with the config. A checkpoint trained with a separate value network
(``vf_net``) loads with a logged warning: that network is not imported, so the agent acts as
trained but its value head is untrained.

**Nothing from the files is executed, and reading them is bounded.** The RON text is read by
:mod:`gymloop.ron`'s strict parser (at most 4 MiB, 64 levels of nesting); the weights by ``msgpack``
(``pip install 'gymloop[enn]'``) entry by entry, refusing extension types, non-string map keys,
duplicate keys and any nesting beyond a tensor's fields, into numpy arrays of a fixed set of numeric
dtypes. An archive is never extracted: its headers are read with each record bounded, and the three
members' bytes are read in memory; links, devices, sparse files, absolute or ``..`` member names,
more than 1024 members and over-large members are refused.

**Layout.** :mod:`gymloop.enn.reader` reads and checks the sources (folders, archives, msgpack
weights, RON config and state); :mod:`gymloop.enn.conversion` turns them into gymloop tensors, a
:class:`~gymloop.nn.numpy_policy.NumpyPolicy`, an agent or a ``.safetensors`` checkpoint, and
registers the format with ``gl.load`` (:mod:`gymloop.formats`); :mod:`gymloop.enn.inference` runs
entity-gym style observations (:func:`pack`, :func:`forward`).

Example:
    >>> from gymloop import enn
    >>> enn.parse_ron('Entity(features: ["x", "y"])')
    Entity(features: ['x', 'y'])
    >>> enn.parse_ron('{"up": Some(1), "down": None}')
    {'up': 1, 'down': None}
"""


from __future__ import annotations

from ..ron import RonStruct, RonTuple, parse_ron
from .conversion import GlobalToken, convert, load, load_policy, read_checkpoint
from .inference import EnnObservation, EnnOutput, forward, pack
from .reader import CONFIG_VERSIONS, GLOBAL_ENTITY, is_enn_checkpoint

__all__ = [
    "CONFIG_VERSIONS",
    "GLOBAL_ENTITY",
    "EnnObservation",
    "EnnOutput",
    "GlobalToken",
    "RonStruct",
    "RonTuple",
    "convert",
    "forward",
    "is_enn_checkpoint",
    "load",
    "load_policy",
    "pack",
    "parse_ron",
    "read_checkpoint",
]
