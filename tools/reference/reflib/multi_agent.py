"""Record multi-agent trajectories: ``multi_agent/<KEY>.json``.

Each episode really runs the reference implementation through its Parallel API:

* ``simple_spread_v3``: ``mpe2.simple_spread_v3.parallel_env(**make_kwargs)`` (mpe2 1.1.1 on
  pettingzoo 1.27.0), ``reset(seed=seed)``;
* ``rps_v2``: ``pettingzoo.classic.rps_v2.parallel_env(**make_kwargs)``, ``reset(seed=seed)``;
* ``TwoStepGame``: RLlib's ``TwoStepGame`` class, executed from the source file of the ray wheel
  named in ``source`` (its two imports from ``ray.rllib`` are given as stand-ins: the class only
  subclasses ``MultiAgentEnv`` and reads the ``ENV_STATE`` key name), every one of its 2 x 2 x 2
  action sequences.

Actions: ``rng = numpy.random.default_rng(1000 + seed)``; per step, for every live agent in
``possible_agents`` order, ``Discrete(n) -> rng.integers(n)``, ``Box -> rng.uniform(low, high)
.astype(float32)``. The env's own generator cannot be reproduced outside numpy, so the initial
world state after ``reset`` is recorded and injected by the test (``initial_state``).

Per step: the actions, each live agent's observation (float32 values widened to float64),
reward, termination and truncation, the agents still live afterwards, and the global ``state()``
where the env has one.
"""

from __future__ import annotations

import os
import platform
import sys
import types
import zipfile
from importlib import metadata
from typing import Any

import numpy as np

from .common import SCHEMA_VERSION, write_json

SEEDS = (0, 1)
ACTION_RNG_OFFSET = 1000
GENERATOR = "pettingzoo/mpe2/rllib multi-agent reference recorder"

#: Where RLlib's two-step game lives in the ray wheel.
RAY_VERSION = "2.60.0"
TWO_STEP_PATH = "ray/rllib/examples/envs/classes/multi_agent/two_step_game.py"


def versions() -> dict:
    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.machine()}
    for dist in ("numpy", "gymnasium", "pettingzoo", "mpe2"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    out["ray"] = RAY_VERSION
    return out


def _sample(space, rng: np.random.Generator):
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return int(space.start + rng.integers(space.n))
    if isinstance(space, spaces.Box):
        return rng.uniform(space.low.astype(np.float64), space.high.astype(np.float64)).astype(space.dtype)
    raise TypeError(f"no action rule for {space}")


def _obs(o) -> list:
    return np.asarray(o, dtype=np.float64).reshape(-1).tolist()


def _episode(env, seed: int, initial_state, state_fn=None, max_steps: int = 1000) -> dict:
    obs, _ = env.reset(seed=seed)
    ep: dict[str, Any] = {"seed": seed, "initial_state": initial_state(env)}
    ep["reset_observations"] = {a: _obs(o) for a, o in obs.items()}
    if state_fn is not None:
        ep["reset_state"] = _obs(state_fn(env))
    rng = np.random.default_rng(ACTION_RNG_OFFSET + seed)
    steps = []
    while env.agents and len(steps) < max_steps:
        actions = {a: _sample(env.action_space(a), rng) for a in env.possible_agents if a in env.agents}
        obs, rew, term, trunc, _ = env.step(actions)
        step = {
            "actions": {a: _obs(v) for a, v in actions.items()},
            "observations": {a: _obs(o) for a, o in obs.items()},
            "rewards": {a: float(r) for a, r in rew.items()},
            "terminations": {a: bool(t) for a, t in term.items()},
            "truncations": {a: bool(t) for a, t in trunc.items()},
            "agents": list(env.agents),
        }
        if state_fn is not None:
            step["state"] = _obs(state_fn(env))
        steps.append(step)
    ep["steps"] = steps
    return ep


def _spread_state(env) -> dict:
    w = env.unwrapped.world
    return {
        "agents_pos": [a.state.p_pos.tolist() for a in w.agents],
        "agents_vel": [a.state.p_vel.tolist() for a in w.agents],
        "landmarks_pos": [lm.state.p_pos.tolist() for lm in w.landmarks],
    }


def record_spread(key: str, kwargs: dict) -> dict:
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(**kwargs)
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "versions": versions(),
        "key": key,
        "env_id": "simple_spread_v3",
        "make_kwargs": kwargs,
        "possible_agents": list(env.possible_agents),
        "notes": (
            "float64 world (positions, velocities); observations and state() are float32. "
            "initial_state holds the positions reset drew (velocities are zero); the test sets "
            "them after its own reset."
        ),
        "episodes": [_episode(env, s, _spread_state, lambda e: e.state()) for s in SEEDS],
    }


def record_rps(key: str, kwargs: dict) -> dict:
    from pettingzoo.classic import rps_v2

    env = rps_v2.parallel_env(**kwargs)
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "versions": versions(),
        "key": key,
        "env_id": "rps_v2",
        "make_kwargs": kwargs,
        "possible_agents": list(env.possible_agents),
        "notes": "rps draws no random numbers; initial_state is empty.",
        "episodes": [_episode(env, s, lambda e: {}) for s in SEEDS],
    }


def _two_step_class(wheel: str):
    """RLlib's TwoStepGame, compiled from the wheel's source with stand-ins for its imports."""
    with zipfile.ZipFile(wheel) as z:
        src = z.read(TWO_STEP_PATH).decode()
    stub = types.ModuleType("ray.rllib.env.multi_agent_env")

    class MultiAgentEnv:  # the base class's constructor sets nothing the game reads
        def __init__(self, *a, **k):
            pass

    stub.MultiAgentEnv = MultiAgentEnv
    stub.ENV_STATE = "state"
    saved = {k: sys.modules.get(k) for k in ("ray", "ray.rllib", "ray.rllib.env", stub.__name__)}
    for name in ("ray", "ray.rllib", "ray.rllib.env"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules[stub.__name__] = stub
    try:
        ns: dict[str, Any] = {"__name__": "two_step_game"}
        exec(compile(src, TWO_STEP_PATH, "exec"), ns)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return ns["TwoStepGame"]


def record_two_step(key: str, kwargs: dict, wheel: str) -> dict:
    cls = _two_step_class(wheel)
    episodes = []
    for a0 in (0, 1):
        for b0 in (0, 1):
            for a1 in (0, 1):
                for b1 in (0, 1):
                    env = cls(dict(kwargs))
                    obs, _ = env.reset(seed=0)
                    ep: dict[str, Any] = {"reset_observations": {str(a): _obs(o) for a, o in obs.items()}}
                    steps = []
                    for acts in ({0: a0, 1: b0}, {0: a1, 1: b1}):
                        obs, rew, term, trunc, _ = env.step(acts)
                        steps.append({
                            "actions": {str(a): [float(v)] for a, v in acts.items()},
                            "observations": {str(a): _obs(o) for a, o in obs.items()},
                            "rewards": {str(a): float(r) for a, r in rew.items()},
                            "terminated_all": bool(term["__all__"]),
                            "truncated_all": bool(trunc["__all__"]),
                            "state": env.state.tolist(),
                        })
                        if term["__all__"]:
                            break
                    ep["steps"] = steps
                    episodes.append(ep)
    # Sequences that end after one step repeat; keep each distinct one once.
    unique = []
    for ep in episodes:
        if ep not in unique:
            unique.append(ep)
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "versions": versions(),
        "key": key,
        "env_id": "TwoStepGame",
        "make_kwargs": kwargs,
        "source": f"ray {RAY_VERSION} wheel, {TWO_STEP_PATH}",
        "notes": "agents 0 and 1 (RLlib's int ids, as strings); no random draws.",
        "episodes": unique,
    }


def _ray_wheel() -> str:
    """The ray wheel: ``RAY_WHEEL`` or a download of the pinned version into a temp dir."""
    path = os.environ.get("RAY_WHEEL")
    if path:
        return path
    import subprocess
    import tempfile

    d = tempfile.mkdtemp()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", d, f"ray=={RAY_VERSION}"],
        check=True,
    )
    return os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".whl")))


def write_all(out_dir: str) -> list[str]:
    """Write ``<out_dir>/multi_agent/<KEY>.json``; returns the paths."""
    files = [
        ("simple_spread_v3", lambda k: record_spread(k, {})),
        ("simple_spread_v3_continuous", lambda k: record_spread(k, {"continuous_actions": True})),
        ("simple_spread_v3_N2_local0.25", lambda k: record_spread(k, {"N": 2, "local_ratio": 0.25, "max_cycles": 30})),
        ("rps_v2", lambda k: record_rps(k, {})),
        ("rps_v2_5actions", lambda k: record_rps(k, {"num_actions": 5, "max_cycles": 40})),
    ]
    wheel = _ray_wheel()
    files.append(("TwoStepGame", lambda k: record_two_step(k, {}, wheel)))
    files.append(("TwoStepGame_one_hot", lambda k: record_two_step(k, {"one_hot_state_encoding": True}, wheel)))
    paths = []
    for key, rec in files:
        path = os.path.join(out_dir, "multi_agent", f"{key}.json")
        write_json(path, rec(key))
        paths.append(path)
    return paths
