# The Python side of rl-gymnasium's bridge: one call per reset or step, observations returned
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


def make(env_id, kwargs_json):
    import json

    gym = _import_gymnasium()
    return gym.make(env_id, **json.loads(kwargs_json))


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


def snapshot(env):
    return pickle.dumps(env).hex()


def restore(hex_bytes):
    return pickle.loads(bytes.fromhex(hex_bytes))
