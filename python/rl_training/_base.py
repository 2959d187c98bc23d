"""The SB3-shaped base class every algorithm class shares, and ``evaluate_policy``."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import numpy as np

from rl_training import _rl

# SB3's device names, mapped onto rl's backends (``flex`` is rl's CPU backend).
_DEVICES = {"auto": "flex", "cpu": "flex"}


def _env_id(env: Any, env_kwargs: dict) -> tuple[str, dict]:
    """An rl env id (and kwargs) for what SB3 users pass as ``env``: an id, or a Gymnasium env."""
    if isinstance(env, str):
        if env.startswith("gymnasium:") or env in _rl.builtin_env_ids():
            return env, env_kwargs
        # Not one of rl's Rust envs: Gymnasium makes it (MuJoCo, Box2D, Atari, registered envs).
        return "gymnasium:" + env, env_kwargs
    import gymnasium

    if not isinstance(env, gymnasium.Env):
        raise ValueError(f"env: expected an env id or a gymnasium.Env, got {type(env).__name__}")
    spec = getattr(env, "spec", None)
    if spec is not None and spec.id in gymnasium.registry:
        kwargs = {k: v for k, v in (spec.kwargs or {}).items() if _jsonable(v)}
        # Wrappers applied after gymnasium.make (AtariPreprocessing, FrameStackObservation …)
        # are remade by the bridge from the spec's record of them.
        wrappers = [
            {w.entry_point: dict(w.kwargs or {})}
            for w in getattr(spec, "additional_wrappers", ()) or ()
            if isinstance(w.entry_point, str) and _jsonable(dict(w.kwargs or {}))
        ]
        if wrappers:
            kwargs["wrappers"] = wrappers
        kwargs.update(env_kwargs)
        return "gymnasium:" + spec.id, kwargs
    # An env object Gymnasium does not know: its class is registered, and rl makes its envs
    # (one per n_envs, one to evaluate) by calling the class with env_kwargs.
    cls = type(env.unwrapped)
    name = re.sub(r"[^\w.-]", "_", f"{cls.__module__}.{cls.__qualname__}")
    env_id = f"rl_py/{name}-v0"
    if env_id not in gymnasium.registry:
        limit = getattr(spec, "max_episode_steps", None) if spec is not None else None
        gymnasium.register(id=env_id, entry_point=cls, max_episode_steps=limit)
    return "gymnasium:" + env_id, env_kwargs


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _to_env_action(raw: np.ndarray, space: dict) -> Any:
    """rl's raw action encoding as the value Gymnasium's action space holds."""
    kind = space["kind"]
    if kind == "Discrete":
        return np.int64(round(float(raw[0])))
    if kind == "Box":
        # As SB3's predict: a Gaussian policy's action clipped to the bounds.
        low, high = np.asarray(space["low"], np.float32), np.asarray(space["high"], np.float32)
        return np.clip(raw.astype(np.float32), low, high).reshape(space["shape"])
    if kind == "MultiDiscrete":
        return np.rint(raw).astype(np.int64)
    if kind == "MultiBinary":
        return np.rint(raw).astype(np.int8)
    return raw


def _obs_rows(obs: Any, space: dict) -> tuple[np.ndarray, bool]:
    """Observations as rows of rl's raw encoding, and whether one was given or a batch."""
    a = np.asarray(obs, dtype=np.float32)
    if space["kind"] == "Discrete":
        return a.reshape(-1, 1), a.ndim == 0
    dim = int(np.prod(space.get("shape") or [len(space.get("nvec", [])) or space.get("n", 1)]))
    if a.size == dim:
        return a.reshape(1, dim), True
    if a.size % dim != 0:
        raise ValueError(f"observation: shape {a.shape} does not hold rows of {dim} values")
    return a.reshape(-1, dim), False


class Algorithm:
    """An rl algorithm with Stable-Baselines3's interface.

    ``Algo(policy, env, **hyperparameters)`` or ``Algo(env_id=..., **hyperparameters)``:
    hyperparameters take the names of rl's YAML ``algo_kwargs`` (SB3's, RLlib's as aliases),
    run settings the names of its top level (``seed``, ``n_envs``, ``env_kwargs``,
    ``normalize``, ``device`` …). A bad name or value raises ``ValueError`` naming it.
    """

    #: rl's name for the algorithm (``algorithm:`` in YAML).
    algorithm: str = ""
    #: The policy names this algorithm accepts (SB3's spelling).
    policies: tuple[str, ...] = ("MlpPolicy",)
    #: Whether ``policy`` is also one of the algorithm's hyperparameters (ARS: linear or mlp).
    policy_is_hyperparameter: bool = False

    def __init__(
        self,
        policy: str = "MlpPolicy",
        env: Any = None,
        *,
        env_id: Any = None,
        verbose: int = 0,
        **kwargs: Any,
    ) -> None:
        algo_policy = None
        if policy not in self.policies:
            if not self.policy_is_hyperparameter:
                raise ValueError(f"policy: {policy!r}; {type(self).__name__} takes {', '.join(self.policies)}")
            # ARS's own `policy` hyperparameter (linear or mlp), given by keyword.
            algo_policy = policy
        if env is not None and env_id is not None:
            raise ValueError("env_id: give env or env_id, not both")
        env = env if env is not None else env_id
        if env is None:
            raise ValueError("env: missing; give an env id (env_id='CartPole-v1') or a gymnasium.Env")
        self.verbose = int(verbose)
        top = set(_rl.run_config_keys())
        run: dict[str, Any] = {"algorithm": self.algorithm}
        algo_kwargs: dict[str, Any] = dict(kwargs.pop("algo_kwargs", None) or {})
        if algo_policy is not None:
            algo_kwargs["policy"] = algo_policy
        if policy == "CnnPolicy":
            # SB3's CnnPolicy: the Nature CNN shared by both heads, no hidden layers after it.
            pk = dict(algo_kwargs.get("policy_kwargs") or {})
            pk.setdefault("features_extractor_class", "NatureCNN")
            pk.setdefault("net_arch", [])
            algo_kwargs["policy_kwargs"] = pk
        for key, value in kwargs.items():
            if key in ("algorithm", "env_id"):
                raise ValueError(f"{key}: set by the class and its env argument")
            (run if key in top else algo_kwargs)[key] = value
        if run.get("device") in _DEVICES:
            run["device"] = _DEVICES[run["device"]]
        if run.get("seed") is None:
            run.pop("seed", None)
        run["env_id"], run["env_kwargs"] = _env_id(env, dict(run.get("env_kwargs") or {}))
        run.setdefault("total_timesteps", 1)
        run["algo_kwargs"] = algo_kwargs
        self._run = run
        self._agent = _rl.Agent.build(_dumps(run))
        self._fresh = True

    @classmethod
    def from_config(cls, path: Any, **overrides: Any) -> "Algorithm":
        """The run of an ``rl train`` YAML file (its algorithm, env and settings; keyword
        arguments override its keys). ``learn(config["total_timesteps"])`` then trains what
        ``rl train`` would."""
        run = json.loads(_rl.Agent.read_config(str(path)))
        target = _CLASSES.get(run["algorithm"])
        if target is None or (cls.algorithm and cls is not target):
            raise ValueError(f"algorithm: {run['algorithm']!r} in {path}; this class trains {cls.algorithm or 'any'}")
        kwargs = {k: v for k, v in run.items() if k not in ("algorithm", "env_id", "algo_kwargs") and v is not None}
        kwargs.update(run.get("algo_kwargs") or {})
        kwargs.update(overrides)
        return target(env_id=run["env_id"], **kwargs)

    # -- training ---------------------------------------------------------------------------

    def learn(
        self,
        total_timesteps: int,
        callback: Callable[[dict], Any] | None = None,
        progress_bar: bool = False,
    ) -> "Algorithm":
        """Trains ``total_timesteps`` more env steps (SB3's ``learn``).

        ``callback(metrics)`` runs after every iteration with that iteration's metrics
        (CleanRL's names, and ``num_timesteps``); returning ``False`` stops training. Schedules
        run over the budget of the first ``learn``, as with ``rl train``'s ``total_timesteps``.
        """
        total_timesteps = int(total_timesteps)
        if total_timesteps < 0:
            raise ValueError("total_timesteps: must be >= 0")
        if self._fresh and self._agent.num_timesteps == 0 and self._run["total_timesteps"] != total_timesteps:
            # Schedules (learning rate, exploration, clip range) are relative to the budget: the
            # run is built for it, exactly as `rl train` builds it from its YAML.
            self._run["total_timesteps"] = max(total_timesteps, 1)
            self._agent = _rl.Agent.build(_dumps(self._run))
        self._fresh = False
        cb = callback
        if self.verbose >= 1:
            cb = _printing(callback)
        self._agent.learn(self._agent.num_timesteps + total_timesteps, cb, progress_bar)
        return self

    def train(self, total_timesteps: int, **kwargs: Any) -> "Algorithm":
        """rl_training's spelling of :meth:`learn`."""
        return self.learn(total_timesteps, **kwargs)

    # -- acting -----------------------------------------------------------------------------

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[Any, Any]:
        """The action for an observation (or a batch of them) and the next recurrent state.

        As SB3: ``(action, state)``; ``state`` is ``None`` for feed-forward policies. For a
        recurrent policy pass the returned state back, and ``episode_start`` (one flag per
        observation) when an episode begins.
        """
        rows, single = _obs_rows(observation, self._agent.observation_space)
        space = self._agent.action_space
        recurrent = self.algorithm == "recurrent_ppo"
        # One observation takes and returns its own state; a batch, a state per observation.
        if recurrent and state is not None:
            states = [state] if single else list(state)
        else:
            states = [None] * len(rows)
        if len(states) != len(rows):
            raise ValueError(f"state: {len(states)} states for {len(rows)} observations")
        starts = np.zeros(len(rows), dtype=bool) if episode_start is None else np.asarray(episode_start, dtype=bool).reshape(-1)
        actions, next_states = [], []
        for i, row in enumerate(rows):
            if recurrent:
                s = np.zeros(0, np.float32) if (states[i] is None or starts[i]) else np.asarray(states[i], np.float32)
                a, s = self._agent.predict_with_state(row, s, deterministic)
                next_states.append(s)
            else:
                a = self._agent.predict(row, deterministic)
            actions.append(_to_env_action(a, space))
        out_state = (next_states[0] if single else next_states) if recurrent else None
        return (actions[0] if single else np.stack(actions)), out_state

    # -- persistence ------------------------------------------------------------------------

    def save(self, path: Any) -> None:
        """Writes a checkpoint directory: the same format as ``rl train`` (``rl resume``,
        ``rl eval`` and ``load`` read it)."""
        self._agent.save(str(path))

    @classmethod
    def load(cls, path: Any, device: str | None = None, verbose: int = 0) -> "Algorithm":
        """Loads a checkpoint directory written by :meth:`save` or by the CLI."""
        agent = _rl.Agent.load(str(path), _DEVICES.get(device, device) if device else None)
        if cls.algorithm and agent.algorithm != cls.algorithm:
            raise ValueError(f"path: a {agent.algorithm} checkpoint, not {cls.algorithm}")
        self = object.__new__(_CLASSES.get(agent.algorithm, cls) if not cls.algorithm else cls)
        self.verbose = verbose
        self._agent = agent
        self._run = json.loads(agent.config)
        self._fresh = False
        return self

    # -- information ------------------------------------------------------------------------

    @property
    def num_timesteps(self) -> int:
        """Env steps taken so far."""
        return self._agent.num_timesteps

    @property
    def config(self) -> dict:
        """The run config (``rl train``'s YAML keys)."""
        return json.loads(self._agent.config)

    @property
    def observation_space(self) -> dict:
        """The observation space as rl sees it (``kind``, ``shape`` …)."""
        return self._agent.observation_space

    @property
    def action_space(self) -> dict:
        """The action space as rl sees it."""
        return self._agent.action_space

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env_id={self._run['env_id']!r}, num_timesteps={self.num_timesteps})"


#: Classes by rl's algorithm name, filled by the tier modules (``Algorithm.load`` picks one).
_CLASSES: dict[str, type] = {}


def register(cls: type) -> type:
    """Adds an algorithm class to the table ``Algorithm.load`` chooses from."""
    _CLASSES[cls.algorithm] = cls
    return cls


def _dumps(run: dict) -> str:
    try:
        return json.dumps(run)
    except (TypeError, ValueError) as e:
        raise ValueError(f"config: a value is not a plain number, string, list or dict ({e})") from None


def _printing(callback: Callable[[dict], Any] | None) -> Callable[[dict], Any]:
    def cb(metrics: dict) -> Any:
        parts = [f"{k}={v:.4g}" for k, v in sorted(metrics.items()) if k != "num_timesteps"]
        print(f"num_timesteps={metrics['num_timesteps']} " + " ".join(parts), flush=True)
        return True if callback is None else callback(metrics)

    return cb


def evaluate_policy(
    model: Algorithm,
    env: Any = None,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    return_episode_rewards: bool = False,
    seed: int | None = None,
) -> tuple[Any, Any]:
    """SB3's ``evaluate_policy``.

    With ``env=None``, rl evaluates on a fresh evaluation env of the model's run (its own
    evaluation: episode ``i`` reset with ``seed + i``, the run's ``eval_seed`` by default; the
    loop runs in Rust). With a Gymnasium env, the episodes run here through ``model.predict``.
    Returns ``(mean_reward, std_reward)``, or the episode returns and lengths with
    ``return_episode_rewards=True``.
    """
    if env is None:
        returns, mean_length = model._agent.evaluate(int(n_eval_episodes), bool(deterministic), seed)
        lengths = [mean_length] * len(returns)
    else:
        returns, lengths = [], []
        for i in range(int(n_eval_episodes)):
            obs, _ = env.reset(seed=None if seed is None else seed + i)
            state, start, total, steps, done = None, True, 0.0, 0, False
            while not done:
                action, state = model.predict(obs, state, np.array([start]), deterministic)
                obs, reward, terminated, truncated, _ = env.step(action)
                total, steps, start = total + float(reward), steps + 1, False
                done = terminated or truncated
            returns.append(total)
            lengths.append(steps)
    if return_episode_rewards:
        return returns, lengths
    r = np.asarray(returns, dtype=np.float64)
    return float(r.mean()), float(r.std())
