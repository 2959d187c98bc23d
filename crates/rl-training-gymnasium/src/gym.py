# The Python side of rl-training-gymnasium's bridge: one call per reset or step, observations returned
# as one contiguous float32 array (read by Rust through numpy, without a copy of its own).
import pickle

import numpy as np


def _import_gymnasium():
    try:
        import gymnasium
    except ImportError as e:
        raise ImportError(
            "gymnasium:* env ids need the gymnasium package in the Python that rl embeds "
            "(pip install gymnasium)"
        ) from e
    return gymnasium


def _wrapper_class(gym, name):
    """`AtariPreprocessing` (gymnasium.wrappers' own), a dotted `module.Class` or an entry
    point `module:Class` (as Gymnasium's specs write them)."""
    import importlib

    if ":" in name:
        name = name.replace(":", ".")
    if "." not in name:
        cls = getattr(gym.wrappers, name, None)
        if cls is None:
            raise ValueError(f"env_kwargs.wrappers: gymnasium.wrappers has no {name!r}")
        return cls
    module, _, attr = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"env_kwargs.wrappers: cannot import {name!r}: {e}") from e


def make(env_id, kwargs_json):
    """`gymnasium.make(env_id, **kwargs)`, then the wrappers listed under the key `wrappers`
    (rl-zoo's `env_wrapper`): each a class name (in gymnasium.wrappers, or dotted) or a
    one-entry mapping of a name to its keyword arguments, applied in order."""
    import json

    gym = _import_gymnasium()
    kwargs = json.loads(kwargs_json)
    wrappers = kwargs.pop("wrappers", [])
    if env_id.startswith("ALE/"):
        # ale-py registers its ids with Gymnasium when imported.
        try:
            import ale_py
        except ImportError as e:
            raise ImportError(f"{env_id} needs the ale-py package (pip install ale-py)") from e
        gym.register_envs(ale_py)
    env = gym.make(env_id, **kwargs)
    if not isinstance(wrappers, list):
        raise ValueError("env_kwargs.wrappers: expected a list of wrapper names or {name: kwargs}")
    for w in wrappers:
        if isinstance(w, str):
            name, wkw = w, {}
        elif isinstance(w, dict) and len(w) == 1:
            ((name, wkw),) = w.items()
            wkw = wkw or {}
        else:
            raise ValueError(f"env_kwargs.wrappers: {w!r} is neither a name nor {{name: kwargs}}")
        env = _wrapper_class(gym, name)(env, **wkw)
    return env


def describe(space):
    """A space as ("box", low, high, shape) / ("discrete", n, start) /
    ("multidiscrete", nvec) / ("multibinary", n), or ("unsupported", its repr)."""
    gym = _import_gymnasium()
    s = gym.spaces
    if isinstance(space, s.Box):
        low = np.asarray(space.low, dtype=np.float32).ravel().tolist()
        high = np.asarray(space.high, dtype=np.float32).ravel().tolist()
        return ("box", low, high, list(space.shape))
    if isinstance(space, s.Discrete):
        return ("discrete", int(space.n), int(space.start))
    if isinstance(space, s.MultiDiscrete):
        if np.any(np.asarray(space.start) != 0):
            return ("unsupported", repr(space) + " (a start other than 0)")
        return ("multidiscrete", np.asarray(space.nvec).ravel().tolist())
    if isinstance(space, s.MultiBinary):
        return ("multibinary", int(np.prod(space.shape)))
    return ("unsupported", repr(space))


def action_converter(space):
    """Turns rl's raw float32 action row into what env.step takes."""
    gym = _import_gymnasium()
    s = gym.spaces
    if isinstance(space, s.Discrete):
        return lambda a: int(a[0])
    if isinstance(space, s.Box):
        return lambda a: a.astype(space.dtype).reshape(space.shape)
    if isinstance(space, s.MultiDiscrete):
        return lambda a: a.astype(space.dtype).reshape(space.shape)
    if isinstance(space, s.MultiBinary):
        return lambda a: a.astype(space.dtype).reshape(space.shape)
    raise TypeError(f"action space {space!r} is not supported")


def _flat(obs):
    return np.ascontiguousarray(obs, dtype=np.float32).ravel()


def _numbers(info):
    out = {}
    for k, v in info.items():
        if isinstance(v, (bool, int, float, np.number, np.bool_)):
            out[str(k)] = float(v)
    return out


def reset(env, seed, options):
    obs, info = env.reset(seed=seed, options=options)
    return _flat(obs), _numbers(info)


def step(env, convert, action):
    obs, reward, terminated, truncated, info = env.step(convert(action))
    return _flat(obs), float(reward), bool(terminated), bool(truncated), _numbers(info)


def step_many(envs, converts, actions):
    """One vector step: `step` for each env in order, stopping at the first exception.
    Returns the results so far and None, or them and (index, exception)."""
    out = []
    for i, (env, convert, action) in enumerate(zip(envs, converts, actions)):
        try:
            out.append(step(env, convert, action))
        except Exception as e:  # reported by that env's own step in Rust
            return out, (i, e)
    return out, None


def snapshot(env):
    return pickle.dumps(env).hex()


def restore(hex_bytes):
    return pickle.loads(bytes.fromhex(hex_bytes))
