"""Repository-level pytest configuration: skip the doctests of modules whose extras are missing."""

import importlib.util

collect_ignore = ["src/gymloop/__main__.py"]
if importlib.util.find_spec("torch") is None:
    collect_ignore += [
        "src/gymloop/nn/torch_policy.py", "src/gymloop/train/ppo.py", "src/gymloop/train/bc.py",
        "src/gymloop/train/warmstart.py", "src/gymloop/train/optim.py", "src/gymloop/neural.py", "src/gymloop/agent_library.py", "src/gymloop/trace.py",
    ]
if importlib.util.find_spec("pygame") is None:
    collect_ignore += ["src/gymloop/render"]
if importlib.util.find_spec("gymnasium") is None:
    collect_ignore += ["src/gymloop/games/snake_envs.py", "src/gymloop/bench.py", "src/gymloop/adapters/gymnasium.py",
                       "src/gymloop/adapters/padded.py"]
if importlib.util.find_spec("gymnasium") is None or importlib.util.find_spec("pettingzoo") is None:
    collect_ignore += ["src/gymloop/adapters/pettingzoo.py"]
if importlib.util.find_spec("gymnasium") is None or importlib.util.find_spec("stable_baselines3") is None:
    collect_ignore += ["src/gymloop/adapters/sb3.py"]
if importlib.util.find_spec("entity_gym") is None:
    collect_ignore += ["src/gymloop/adapters/entity_gym.py", "src/gymloop/adapters/entity_gym_vec.py", "src/gymloop/adapters/_entity_gym_lib.py"]
if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None:
    collect_ignore += ["src/gymloop/export/onnx.py", "src/gymloop/export/runtime.py"]
if importlib.util.find_spec("openskill") is None:
    collect_ignore += ["src/gymloop/rating.py"]
