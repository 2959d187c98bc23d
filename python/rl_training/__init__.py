"""rl_training: deep reinforcement learning in Rust, on burn, from Python.

Stable-Baselines3's interface over rl's algorithms, in three stability tiers (``core``,
``experimental``, ``contrib``)::

    from rl_training.core import PPO
    model = PPO(env_id="CartPole-v1", learning_rate=3e-4, seed=0)
    model.train(total_timesteps=100_000)
    action, _ = model.predict(obs, deterministic=True)
    model.save("runs/ppo")            # the checkpoint `rl train` writes; PPO.load reads both

Hyperparameters take the names of rl's YAML (``algo_kwargs``: SB3's names, RLlib's as
aliases); run settings (``seed``, ``n_envs``, ``env_kwargs``, ``normalize``, ``device`` …) the
names of its top level. Env ids of rl's built-in envs run in Rust; any other id, and any
``gymnasium.Env`` object, runs in Gymnasium in this interpreter.
"""

from rl_training import contrib, core, experimental
from rl_training._base import Algorithm, evaluate_policy
from rl_training._rl import __version__, algorithms
from rl_training.contrib import RecurrentPPO
from rl_training.core import A2C, DQN, PPO, SAC, TRPO
from rl_training.experimental import APPO, ARS, AWR, BC, CQL, ES, GAIL, IMPALA, MARWIL, PPG, DreamerV3, OpenAIES

__all__ = [
    "Algorithm",
    "evaluate_policy",
    "algorithms",
    "core",
    "experimental",
    "contrib",
    "PPO",
    "A2C",
    "TRPO",
    "DQN",
    "SAC",
    "IMPALA",
    "APPO",
    "PPG",
    "GAIL",
    "MARWIL",
    "AWR",
    "ES",
    "OpenAIES",
    "ARS",
    "BC",
    "CQL",
    "DreamerV3",
    "RecurrentPPO",
    "__version__",
]
