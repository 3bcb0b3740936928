"""The Ray backend (issue 12): bit-identical batches, shipping the game, import hygiene, faults, close.

The Ray tests share one local Ray instance (``ray_session``, module-scoped: starting Ray costs seconds on
two cores) and are in the slow tier; the ones that need no running Ray (the import checks, the
unreachable address, the option checks) are fast and run without it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from support.fault_games import Move as FMove
from support.fault_games import Unit as FUnit
from support.fault_games import faulty, first_seed, misbehave
from support.stepping import trajectory

import gymloop as gl
from gymloop.checker import _same
from gymloop.games.duel import duel
from gymloop.games.snake import snake
from gymloop.games.tactics import tactics

# one pytest-xdist worker runs this module (its module-scoped fixture is set up once)
pytestmark = pytest.mark.xdist_group("ray")

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.dirname(os.path.dirname(os.path.abspath(gl.__file__)))


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray instance for the module; its workers import gymloop and the tests' game modules from here."""
    ray = pytest.importorskip("ray", reason="the Ray backend tests need Ray: pip install 'gymloop[ray]'")
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join([SRC, TESTS, here, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield ray
    finally:
        ray.shutdown()


#: 6 steps, a second reset (a new generation of seeds) and 1 step more
_trajectory = functools.partial(trajectory, steps=6, again=1)


class _DyingActors:
    """``ray.wait``/``ray.get`` over fake refs: an actor answers ``where_is`` ``answers`` times, then is dead."""

    class Dead(Exception):
        pass

    def __init__(self, answers):
        self.answers = dict(answers)
        self.calls = {name: 0 for name in answers}

    def handle(self, name):
        fake = self

        class Method:
            def remote(self):
                fake.calls[name] += 1
                return (name, fake.calls[name])

        return type("Handle", (), {"where_is": Method()})()

    def wait(self, refs, num_returns, timeout):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        name, call = ref
        if call > self.answers[name]:
            raise self.Dead(name)
        return ("host", 1)


def test_close_waits_until_the_killed_actors_are_dead_and_names_any_still_alive(caplog):
    from gymloop.runtime.ray_backend import _Actor, _await_deaths

    fake = _DyingActors({"a": 0, "b": 3, "c": 10**9})
    actors = [_Actor(i, 0, 1, 1, fake.handle(n), n) for i, n in enumerate("abc")]
    t = time.monotonic()
    with caplog.at_level("WARNING", logger="gymloop.ray"):
        _await_deaths(fake, actors[:2], timeout=5.0)  # a: dead at once; b: answers three calls first
    assert fake.calls["a"] == 1 and fake.calls["b"] == 4 and not caplog.records
    with caplog.at_level("WARNING", logger="gymloop.ray"):
        _await_deaths(fake, actors[2:], timeout=0.2)  # c never dies: a warning names it when the time is up
    assert 0.2 <= time.monotonic() - t < 5
    assert "1 Ray actor(s) ['c'] were still alive" in caplog.text


# ---------------------------------------------------------------------- the same batches as the process backend
@pytest.mark.slow
@pytest.mark.parametrize("game, apg", [(tactics, 1), (duel, 2)], ids=["tactics-several-action-types", "duel-multi-agent"])
def test_batches_are_bit_identical_to_the_process_backend(ray_session, game, apg):
    ray_b = _trajectory(game, workers=2, backend="ray", agents_per_game=apg)
    proc_b = _trajectory(game, workers=2, backend="process", agents_per_game=apg)
    assert len(ray_b) == len(proc_b)
    for i, (x, y) in enumerate(zip(ray_b, proc_b)):
        assert _same(x, y), f"batch {i} differs between backend='ray' and backend='process'"
    if game is tactics:  # the comparison covered several action types, one of them select-entity
        assert len(ray_b[0].masks) >= 2 and ray_b[0].num_candidates
    for b in ray_b:  # the caller owns writable arrays, not views of Ray's object store
        assert b.reward.flags.writeable and all(a.flags.writeable for a in b.entities.values())


# ---------------------------------------------------------------------- shipping the game
def _closure_game(bonus):
    def game(agent, seed):  # a local function: pickle cannot name it, cloudpickle ships it by value
        while True:
            agent.act(gl.Obs(score=bonus + seed % 3).actor(FUnit(seed % 5)), FMove)
            agent.game_over(gl.Obs(score=bonus))

    return game


def test_the_game_ships_by_reference_or_by_value():
    pytest.importorskip("ray")
    from gymloop.runtime.ray_backend import ship_game

    assert ship_game(snake, None)[0] == "reference"
    assert ship_game(_closure_game(2.0), None)[0] == "value"
    assert ship_game(lambda agent, seed: None, None)[0] == "value"


def test_a_game_that_cannot_be_pickled_names_the_game_and_the_fix():
    pytest.importorskip("ray")
    lock = threading.Lock()

    def locked_game(agent, seed):
        with lock:
            snake(agent, seed)

    with pytest.raises(gl.ConfigError, match=r"(?s)ships the game <function .*locked_game.* neither by reference .*by value .*lock.*module level"):
        gl.VecEnv(locked_game, 2, workers=1, backend="ray")


@pytest.mark.slow
def test_a_game_shipped_by_value_runs_in_the_actors_and_close_releases_them(ray_session):
    game = _closure_game(2.0)
    assert _all_same(_trajectory(game, steps=2, n=4), _trajectory(game, steps=2, n=4, workers=1, backend="ray"))
    env = gl.VecEnv(game, num_envs=4, workers=1, backend="ray")
    env.reset()
    actors = list(env._state.backend.actors)
    names = {a.name for a in actors}
    assert names <= set(ray_session.util.list_named_actors())
    env.close()
    for a in actors:  # close() killed every actor
        with pytest.raises(ray_session.exceptions.RayActorError):
            ray_session.get(a.handle.where_is.remote(), timeout=10)
    deadline = time.monotonic() + 5
    while names & set(ray_session.util.list_named_actors()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not names & set(ray_session.util.list_named_actors())
    env.close()  # twice is fine


@pytest.mark.slow
def test_a_game_the_actors_cannot_import_names_the_game_and_the_fix(ray_session, tmp_path, monkeypatch):
    (tmp_path / "only_here_game.py").write_text("from gymloop.games.snake import snake\n\ndef only_here(agent, seed):\n    snake(agent, seed)\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # importable here, not in the actors
    from only_here_game import only_here

    env = gl.VecEnv(only_here, 2, workers=1, backend="ray")
    with pytest.raises(gl.ConfigError, match=r"(?s)could not load the game only_here_game:only_here \(shipped by reference\).*No module named 'only_here_game'.*runtime_env"):
        env.reset()
    env.close()


def _loop_or(other, loop_seeds, agent, seed):
    """Loops forever on its second decision when its seed is one of ``loop_seeds``, else plays ``other``."""
    if seed not in loop_seeds:
        return other(agent, seed)
    agent.act(gl.Obs().actor(FUnit(1)), FMove)
    misbehave("loop")


def _all_same(xs, ys):
    return len(xs) == len(ys) and all(_same(x, y) for x, y in zip(xs, ys))


# ---------------------------------------------------------------------- Ray only when asked for
def test_gymloop_and_the_process_backend_never_import_ray():
    code = (
        "import sys, gymloop as gl\n"
        "from gymloop.games.snake import snake\n"
        "env = gl.VecEnv(snake, 2, workers=2, backend='process')\n"
        "env.close()\n"
        "gl.VecEnv(snake, 2).reset()\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_ray_missing_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(gl.ConfigError, match=r"backend='ray' needs Ray.*pip install 'gymloop\[ray\]'"):
        gl.VecEnv(snake, 2, workers=1, backend="ray")


def test_backend_options_are_checked():
    with pytest.raises(gl.ConfigError, match=r"backend 'process' takes no option 'address'; it takes no backend_options"):
        gl.VecEnv(snake, 2, workers=2, backend="process", backend_options={"address": "auto"})
    pytest.importorskip("ray")
    with pytest.raises(gl.ConfigError, match=r"backend 'ray' takes no option 'adress'; it takes 'address', 'num_cpus'"):
        gl.VecEnv(snake, 2, workers=1, backend="ray", backend_options={"adress": "auto"})
    with pytest.raises(gl.ConfigError, match=r"num_cpus must be a positive number, got 0"):
        gl.VecEnv(snake, 2, workers=1, backend="ray", backend_options={"num_cpus": 0})
    with pytest.raises(gl.ConfigError, match=r"backend='ray' runs the games in `workers` Ray actors, but workers=0"):
        gl.VecEnv(snake, 2, backend="ray")


def test_train_config_carries_backend_and_address():
    from gymloop.train import TrainConfig

    TrainConfig(steps=64, num_envs=2, workers=2, backend="ray", address="auto").check()
    with pytest.raises(gl.ConfigError, match=r"address='auto' is the Ray cluster .* but backend=None; set backend='ray'"):
        TrainConfig(steps=64, num_envs=2, workers=2, address="auto").check()
    with pytest.raises(gl.ConfigError, match=r"backend='rey' is not one of the choices: expected \"local\", \"process\", \"ray\""):
        TrainConfig(steps=64, num_envs=2, workers=2, backend="rey").check()



def test_train_config_and_the_cli_carry_backend_options():
    from gymloop.cli import _backend_options
    from gymloop.train import TrainConfig

    opts = _backend_options(["num_cpus=0.5", "startup_timeout=30", 'runtime_env={"working_dir": "."}', "connect_timeout=5"])
    assert opts == {"num_cpus": 0.5, "startup_timeout": 30, "runtime_env": {"working_dir": "."}, "connect_timeout": 5}
    TrainConfig(steps=64, num_envs=2, workers=2, backend="ray", backend_options=opts).check()
    with pytest.raises(gl.ConfigError, match=r"--backend-option 'num_cpus' is not KEY=VALUE"):
        _backend_options(["num_cpus"])
    bad = [
        ({"num_cpus": 0}, "ray", r"num_cpus must be a positive number, got 0"),
        ({"startup_timeout": float("nan")}, "ray", r"startup_timeout must be a positive number, got nan"),
        ({"runtime_env": "x"}, "ray", r"runtime_env must be a dict"),
        ({"num_gpus": 1}, "ray", r"backend_options 'num_gpus': the Ray backend takes 'num_cpus'"),
        ({"address": "auto"}, "ray", r"backend_options 'address'.*the address field"),
        ({"num_cpus": 1}, "process", r"are the Ray backend's options, but backend='process'"),
        ([("num_cpus", 1)], "ray", r"backend_options must be a dict"),
    ]
    if importlib.util.find_spec("ray") is not None:  # (Ray's own check of a runtime_env needs Ray)
        bad += [
            ({"runtime_env": {"pip": 5}}, "ray", r"runtime_env is not a valid Ray runtime_env: TypeError: runtime_env\['pip'\] must be"),
            ({"runtime_env": {"env_vars": {"A": 1}}}, "ray", r"not a valid Ray runtime_env: TypeError: .*env_vars"),
        ]
    for options, backend, match in bad:
        with pytest.raises(gl.ConfigError, match=match):
            TrainConfig(steps=64, num_envs=2, workers=2, backend=backend, backend_options=options).check()


# ---------------------------------------------------------------------- connecting
class _FakeRay:
    """Records what the backend asks of Ray when it connects and releases."""

    def __init__(self, initialized):
        self.initialized = initialized
        self.calls = []

    def is_initialized(self):
        return self.initialized

    def init(self, **kw):
        self.calls.append(("init", kw))
        self.initialized = True

    def shutdown(self):
        self.calls.append(("shutdown",))
        self.initialized = False


def test_an_unreachable_address_fails_within_the_connect_timeout():
    pytest.importorskip("ray")
    from gymloop.runtime import ray_backend as rb

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address in (f"127.0.0.1:{port}", "192.0.2.1:6379"):  # refused; TEST-NET-1, never routed
        fake = _FakeRay(initialized=False)
        t = time.monotonic()
        with pytest.raises(gl.ConfigError, match=rf"the Ray cluster at address='{address}' is unreachable .*ray start --head"):
            rb._connect(fake, address, 1.0)
        assert time.monotonic() - t < 5.0
        assert fake.calls == []  # Ray itself (which retries forever) was never asked
    with pytest.raises(gl.ConfigError, match=r"address='nohost' is not 'auto', 'HOST:PORT'"):
        rb._connect(_FakeRay(initialized=False), "nohost", 1.0)


def test_ray_is_shut_down_only_when_started_here(monkeypatch):
    pytest.importorskip("ray")
    from gymloop.runtime import ray_backend as rb

    monkeypatch.setattr(rb, "_owned", False)
    monkeypatch.setattr(rb, "_users", 0)
    monkeypatch.setattr(rb, "_local", False)
    mine = _FakeRay(initialized=False)
    assert rb._connect(mine, None, 1.0) and rb._connect(mine, None, 1.0)  # two backends share the instance started here
    rb._release(mine)
    # address=None starts a new local instance: never RAY_ADDRESS nor a `ray start` cluster of this machine
    assert mine.calls == [("init", {"address": "local", "include_dashboard": False})]
    rb._release(mine)  # the last one shuts it down
    assert mine.calls[-1] == ("shutdown",)
    theirs = _FakeRay(initialized=True)  # initialised by the user: used, never shut down
    assert not rb._connect(theirs, None, 1.0)
    assert theirs.calls == []


def test_a_local_ray_that_cannot_start_is_a_config_error_with_the_fix(monkeypatch):
    pytest.importorskip("ray")
    from gymloop.runtime import ray_backend as rb

    class _NoStart(_FakeRay):
        def init(self, **kw):
            raise Exception("The current node timed out during startup. This could happen because ...")  # what Ray raises

    monkeypatch.setattr(rb, "_owned", False)
    monkeypatch.setattr(rb, "_users", 0)
    with pytest.raises(gl.ConfigError, match=r"could not connect to a local Ray instance: Exception: The current node timed out during startup.*ray stop"):
        rb._connect(_NoStart(initialized=False), None, 1.0)


def test_ray_address_and_ray_client_hosts_are_checked_before_ray_init(monkeypatch):
    pytest.importorskip("ray")
    from gymloop.runtime import ray_backend as rb

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    fake = _FakeRay(initialized=False)
    with pytest.raises(gl.ConfigError, match=rf"the Ray cluster at RAY_ADDRESS='127.0.0.1:{port}' is unreachable"):
        rb._connect(fake, "auto", 1.0)
    with pytest.raises(gl.ConfigError, match=rf"the Ray cluster at address='127.0.0.1:{port}' is unreachable"):
        rb._connect(fake, f"ray://127.0.0.1:{port}", 1.0)
    assert fake.calls == []
    rb._connect(fake, None, 1.0)  # address=None ignores RAY_ADDRESS: a local instance
    assert fake.calls == [("init", {"address": "local", "include_dashboard": False})]
    rb._release(fake)


_NOT_RAY_SERVER = """
import os, socket, sys, time
sys.path.insert(0, {src!r})
import ray
from gymloop.errors import ConfigError
from gymloop.runtime import ray_backend as rb
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(16)  # accepts TCP, never answers
port = srv.getsockname()[1]
for address in (f"127.0.0.1:{{port}}", f"ray://127.0.0.1:{{port}}"):
    t = time.monotonic()
    try:
        rb._connect(ray, address, 1.5)
        print("CONNECTED", address)
    except ConfigError as e:
        print("ERROR", round(time.monotonic() - t, 1), str(e).replace(chr(10), " "))
sys.stdout.flush()
os._exit(0)  # the connect thread may still wait inside ray.init
"""


@pytest.mark.slow
def test_a_server_that_is_not_ray_fails_within_the_connect_timeout_and_ray_client_names_its_extra():
    pytest.importorskip("ray")
    out = subprocess.run(
        [sys.executable, "-c", _NOT_RAY_SERVER.format(src=SRC)], capture_output=True, text=True, timeout=90,
        env={**os.environ, "RAY_ADDRESS": ""},
    ).stdout.splitlines()
    errors = [line for line in out if line.startswith(("ERROR", "CONNECTED"))]
    assert len(errors) == 2, out
    first, client = errors
    assert first.startswith("ERROR"), first
    assert float(first.split()[1]) < 5.0
    assert "address='127.0.0.1:" in first and "within connect_timeout=1.5 s" in first
    try:
        import grpc  # noqa: F401
        import ray.util.client.ray_client_helpers  # noqa: F401
        has_client = True
    except ImportError:
        has_client = False
    assert client.startswith("ERROR"), client
    assert float(client.split()[1]) < 5.0
    if not has_client:  # the fix is read from Ray's own error, naming the extra
        assert "ray[client]" in client and "pip install 'gymloop[ray]'" in client, client


def test_a_cluster_short_of_cpus_warns_a_local_instance_started_here_refuses(monkeypatch, caplog):
    pytest.importorskip("ray")
    from gymloop.runtime import ray_backend as rb

    class Short(_FakeRay):
        def cluster_resources(self):
            return {"CPU": 1.0}

    started: list[int] = []
    monkeypatch.setattr(rb.RayBackend, "_new_actor", lambda self, i, lo, n, **kw: started.append(i) or object())
    monkeypatch.setattr(rb.RayBackend, "close", lambda self: None)
    cfg = gl.runtime.backend.BackendConfig(game=snake, num_envs=4, agents_per_game=1, seed=0, declared=None, is_env=False, workers=2)
    for owned, local in ((False, False), (True, False)):  # the user's Ray; a cluster connected to here
        monkeypatch.setattr(rb, "import_ray", lambda: Short(initialized=True))
        monkeypatch.setattr(rb, "_owned", owned)
        monkeypatch.setattr(rb, "_local", local)
        monkeypatch.setattr(rb, "_users", 1)
        started.clear()
        with caplog.at_level("WARNING", logger="gymloop.ray"):
            rb.RayBackend(cfg)
        assert started == [0, 1] and "the actors wait until the cluster grows" in caplog.text
    monkeypatch.setattr(rb, "_owned", True)
    monkeypatch.setattr(rb, "_local", True)
    with pytest.raises(gl.ConfigError, match=r"workers=2 actors reserve 2 CPUs .* has 1; lower workers"):
        rb.RayBackend(cfg)


def test_an_actor_whose_games_cannot_be_set_up_reports_why():
    pytest.importorskip("ray")
    import pickle

    from gymloop.runtime.ray_backend import ShardActor

    # a replacement actor given spaces it cannot use (as with another gymloop version on its node)
    actor = ShardActor("reference", pickle.dumps((snake, None)), "snake", 2, 2, 1, 0, False, None, "raise",
                       "not the fixed spaces", 1, 0, "gymloop:beat:x")
    tag, err, faults, _ = actor.reset()
    assert tag == "error" and faults == []
    assert isinstance(err, gl.ConfigError)
    assert re.search(r"could not set up game copies 2..3 of snake: \w+Error: .*same gymloop", str(err)), str(err)
    assert "died while starting" not in str(err)


# ---------------------------------------------------------------------- faults
def _kill(ray_session, handle, within: float = 20.0) -> None:
    """Kill an actor and wait until it is dead: ``ray.kill`` only asks, and an actor that still
    answers the next step would make a test of what follows its death pass or fail by chance."""
    ray_session.kill(handle, no_restart=True)
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            ray_session.get(handle.where_is.remote(), timeout=2)
        except Exception:
            return
        time.sleep(0.05)
    raise AssertionError(f"the actor still answers {within} s after ray.kill")


@pytest.mark.slow
def test_restarted_actors_get_the_seeds_of_restarted_workers(ray_session):
    """A dead actor replaced at a reset, then one replaced mid-run: the same seeds as the process backend."""
    def run(backend):
        env = gl.VecEnv(snake, 4, workers=2, backend=backend, restart_workers=True, step_timeout=5, seed=1)
        rng = np.random.default_rng(0)
        try:
            out = [env.reset()]
            be = env._state.backend

            def kill():
                if backend == "ray":
                    _kill(ray_session, be.actors[1].handle)
                    be.actors[1].lost = be._lose(be.actors[1], None)
                else:
                    os.kill(be.workers[-1].pid, signal.SIGKILL)  # the child running copies 2..3
                    be.workers[-1].proc.join(2)

            kill()
            out.append(env.reset())  # replaced at the reset
            out.append(env.step(gl.vector.sample_legal(out[-1], env.spaces, rng)))
            kill()
            out.append(env.step(gl.vector.sample_legal(out[-1], env.spaces, rng)))  # replaced within the step
            out.append(env.step(gl.vector.sample_legal(out[-1], env.spaces, rng)))
            assert env.num_worker_restarts == 2, backend
            return out
        finally:
            env.close()

    ray_b, proc_b = run("ray"), run("process")
    assert ray_b[-2].truncated[2:].all()
    for i, (x, y) in enumerate(zip(ray_b, proc_b)):
        assert _same(x, y), f"batch {i} differs between backend='ray' and backend='process' after restarts"


@pytest.mark.slow
def test_beat_counts_are_dropped_on_replace_and_the_board_dies_on_close(ray_session):
    ray = ray_session
    env = gl.VecEnv(snake, 2, workers=2, backend="ray", restart_workers=True, step_timeout=5)
    try:
        env.reset()
        be = env._state.backend
        board = be._board
        names = [a.name for a in be.actors]
        for n in names:
            ray.get(board.beat.remote(n, 1))
        assert [be._beats(a) for a in be.actors] == [1, 1]
        _kill(ray, be.actors[0].handle)
        env.step(env.sample_actions())  # actor 0 replaced
        assert ray.get(board.count.remote(names[0])) == 0 and ray.get(board.count.remote(names[1])) == 1
    finally:
        env.close()
    assert be._board is None
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(board.count.remote(names[1]), timeout=20)


@pytest.mark.slow
def test_a_killed_actor_is_a_worker_error_then_reset_starts_it_again(ray_session):
    env = gl.VecEnv(snake, 4, workers=1, backend="ray", step_timeout=5)
    try:
        env.reset()
        actor = env._state.backend.actors[0]
        _kill(ray_session, actor.handle)
        with pytest.raises(gl.WorkerError, match=r"Ray actor 0 'gymloop-\w+-0' \(game copies 0..3, node [\d.]+, pid \d+\) died .*restart_workers=True") as e:
            env.step(env.sample_actions())
        assert e.value.worker == 0 and e.value.env_indices == range(0, 4)
        b = env.reset()  # a new actor in its place
        env.step(env.sample_actions())
        assert b.num_slots == 4 and env._state.backend.actors[0].name != actor.name
    finally:
        env.close()


@pytest.mark.slow
def test_a_killed_actor_is_replaced_with_restart_workers(ray_session):
    env = gl.VecEnv(snake, 4, workers=1, backend="ray", restart_workers=True, step_timeout=5)
    try:
        env.reset()
        _kill(ray_session, env._state.backend.actors[0].handle)
        b = env.step(env.sample_actions())
        assert b.truncated.all()  # its copies' open episodes ended
        assert env.num_worker_restarts == 1
        env.step(env.sample_actions())
    finally:
        env.close()


@pytest.mark.slow
def test_a_frozen_actor_is_killed_after_the_step_timeout(ray_session):
    env = gl.VecEnv(snake, 4, workers=1, backend="ray", step_timeout=0.5)
    try:
        env.reset()
        actor = env._state.backend.actors[0]
        _, pid = ray_session.get(actor.handle.where_is.remote())
        os.kill(pid, signal.SIGSTOP)
        t = time.monotonic()
        with pytest.raises(gl.WorkerError, match=r"Ray actor 0 .* did not answer within step_timeout=0.5 s .*it was killed"):
            env.step(env.sample_actions())
        assert time.monotonic() - t < 4.0
    finally:
        env.close()


@pytest.mark.slow
def test_game_timeouts_and_game_errors_inside_the_actors(ray_session, caplog):
    # copies 0, 1 and 3 loop forever (their actor's own step deadline interrupts each in turn, 1.5 s
    # in all: longer than this process waits for an answer, but the actor said it timed out games),
    # copy 2 raises; with on_game_error="restart" they restart with fresh seeds and stepping goes on
    bad = functools.partial(faulty, how="raise", bad_seeds={first_seed(2)}, at=1)
    looping = functools.partial(_loop_or, bad, {first_seed(0), first_seed(1), first_seed(3)})
    env = gl.VecEnv(looping, 4, workers=1, backend="ray", step_timeout=0.5, on_game_error="restart", game_error_limit=None)
    try:
        env.reset()
        for _ in range(3):
            env.step(env.sample_actions())
        assert env.num_game_errors == 4 and env.num_worker_restarts == 0
        text = caplog.text
        assert "game copy 1 failed and was restarted" in text and "step_timeout=0.5" in text
        assert "game copy 2 failed and was restarted" in text and "boom" in text
    finally:
        env.close()
    env = gl.VecEnv(looping, 4, workers=1, backend="ray", step_timeout=0.5)  # "raise": the step fails naming the copy
    try:
        env.reset()
        with pytest.raises(gl.GameTimeoutError, match=r"game copy 0 .*step_timeout=0.5") as e:
            env.step(env.sample_actions())
        assert e.value.env_index == 0
    finally:
        env.close()


# ---------------------------------------------------------------------- training
@pytest.mark.slow
def test_gymloop_train_with_the_ray_backend(ray_session, tmp_path):
    pytest.importorskip("torch")
    from gymloop.cli import main

    rc = main(["train", "support.train_games:bandit", "--backend", "ray", "--workers", "1", "--num-envs", "4", "--steps", "128",
               "--out", str(tmp_path / "run"), "--eval-episodes", "0", "--quiet"])
    assert rc == 0
    assert (tmp_path / "run" / "agent.safetensors").exists()
    assert ray_session.is_initialized()  # the run used the Ray instance it found and left it running


_OWN_RAY = """
import os, sys
sys.path.insert(0, {src!r})
import ray
import gymloop as gl
from gymloop.games.snake import snake
env = gl.VecEnv(snake, 2, workers=1, backend="ray", backend_options={{"num_cpus": 1}})
b = env.reset()
env.step(env.sample_actions())
print("STARTED", ray.is_initialized(), b.num_slots)
env.close()
print("AFTER", ray.is_initialized())
"""


@pytest.mark.slow
def test_a_backend_that_starts_its_own_ray_shuts_it_down_and_leaves_no_process():
    """No ray.init before: the backend starts a local instance (RAY_ADDRESS is not used) and close() ends it all."""
    pytest.importorskip("ray")
    import shutil
    import tempfile

    tmp_path = tempfile.mkdtemp(prefix="glray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes

    def ray_pids():
        out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        return {line.split()[0] for line in out.splitlines()[1:] if ("raylet" in line or "gcs_server" in line) and str(tmp_path) in line}

    with socket.socket() as s:  # RAY_ADDRESS pointing nowhere: address=None must not try it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([SRC, TESTS])}
    r = subprocess.run([sys.executable, "-c", _OWN_RAY.format(src=SRC)], capture_output=True, text=True, timeout=120, env=env)
    assert "STARTED True 2" in r.stdout, r.stdout + r.stderr[-3000:]
    assert "AFTER False" in r.stdout, r.stdout + r.stderr[-3000:]
    deadline = time.monotonic() + 10
    while ray_pids() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = ray_pids()
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert not left, "raylet/gcs_server left running after the backend that started Ray closed"
