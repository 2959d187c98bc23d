"""The Python front door: every algorithm from Python, errors, checkpoints shared with the CLI,
a user-defined Gymnasium env. Run with `python3 -m pytest python/tests` after
`python3 -m pip install .` (the CLI tests need `target/release/rl`, or RL_CLI naming it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import rl_training
from rl_training.contrib import RecurrentPPO
from rl_training.core import A2C, DQN, PPO, SAC, TRPO
from rl_training.experimental import APPO, ARS, AWR, BC, CQL, ES, GAIL, IMPALA, MARWIL, PPG, DreamerV3

ROOT = Path(__file__).resolve().parents[2]
EXPERT = str(ROOT / "testdata" / "datasets" / "pendulum_sac_expert_20.npz")

# Each algorithm with the kwargs of its seed table (SB3 / rl_training / RLlib names), shrunk to
# a few iterations: the class, the env, its kwargs and a budget of a few iterations.
CASES = {
    "ppo": (PPO, "CartPole-v1", dict(learning_rate=3e-4, n_steps=128, batch_size=64, n_epochs=2, gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, seed=0), 256),
    "a2c": (A2C, "CartPole-v1", dict(learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, seed=0), 100),
    "trpo": (TRPO, "Pendulum-v1", dict(learning_rate=1e-3, n_steps=256, batch_size=128, gamma=0.9, target_kl=0.01, n_critic_updates=5, seed=0), 512),
    "dqn": (DQN, "CartPole-v1", dict(learning_rate=2.3e-3, buffer_size=1000, learning_starts=100, batch_size=64, train_freq=4, target_update_interval=100, exploration_fraction=0.16, exploration_final_eps=0.04, seed=0), 300),
    "sac": (SAC, "Pendulum-v1", dict(learning_rate=1e-3, buffer_size=1000, learning_starts=100, batch_size=64, seed=0), 200),
    "impala": (IMPALA, "CartPole-v1", dict(num_env_runners=1, num_envs_per_env_runner=4, lockstep=True, seed=0), 400),
    "appo": (APPO, "CartPole-v1", dict(num_env_runners=1, num_envs_per_env_runner=4, lockstep=True, seed=0), 400),
    "ppg": (PPG, "CartPole-v1", dict(learning_rate=5e-4, n_steps=64, n_policy_iters=2, seed=0), 256),
    "recurrent_ppo": (RecurrentPPO, "CartPole-v1", dict(learning_rate=3e-4, n_steps=64, batch_size=64, n_epochs=2, seed=0), 128),
    "awr": (AWR, "CartPole-v1", dict(learning_rate=5e-4, batch_size=64, beta=0.05, n_steps=256, seed=0), 600),
    "es": (ES, "CartPole-v1", dict(learning_rate=0.05, pop_size=8, net_arch=[16], seed=0), 2000),
    "ars": (ARS, "CartPole-v1", dict(n_directions=4, n_top_directions=2, policy="linear", seed=0), 2000),
    "bc": (BC, "Pendulum-v1", dict(learning_rate=1e-3, batch_size=256, offline_data={"input": EXPERT}, seed=0), 512),
    "marwil": (MARWIL, "Pendulum-v1", dict(learning_rate=1e-3, batch_size=256, beta=1.0, offline_data={"input": EXPERT}, seed=0), 512),
    "cql": (CQL, "Pendulum-v1", dict(learning_rate=3e-4, batch_size=64, bc_iters=10, offline_data={"input": EXPERT}, seed=0), 128),
    "gail": (GAIL, "Pendulum-v1", dict(expert_data_path=EXPERT, reward_type="airl", n_steps=256, batch_size=64, n_epochs=2, seed=0), 512),
    "dreamerv3": (DreamerV3, "CartPole-v1", dict(model_size="nano", training_ratio=32, batch_size_B=2, batch_length_T=8, horizon_H=3, seed=0), 64),
}


def test_every_algorithm_of_the_library_has_a_case_and_a_tier():
    assert sorted(CASES) == sorted(rl_training.algorithms())
    tiers = {c.algorithm for m in (rl_training.core, rl_training.experimental, rl_training.contrib) for c in vars(m).values() if isinstance(c, type) and issubclass(c, rl_training.Algorithm) and c.algorithm}
    assert tiers == set(rl_training.algorithms())


@pytest.mark.parametrize("name", sorted(CASES))
def test_constructs_trains_saves_loads_and_predicts(name, tmp_path):
    cls, env_id, kwargs, steps = CASES[name]
    model = cls(env_id=env_id, **kwargs)
    model.learn(steps)
    assert model.num_timesteps >= steps
    obs_space = model.observation_space
    rng = np.random.default_rng(0)
    obs = rng.uniform(-0.5, 0.5, size=(5, *obs_space["shape"])).astype(np.float32)
    action, state = model.predict(obs, deterministic=True)
    assert len(action) == 5
    path = tmp_path / "ckpt"
    model.save(path)
    loaded = cls.load(path)
    assert type(loaded) is cls and loaded.num_timesteps == model.num_timesteps
    again, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_array_equal(np.asarray(action), np.asarray(again))
    # The generic loader picks the class from the checkpoint.
    assert type(rl_training.Algorithm.load(path)) is cls
    if name == "recurrent_ppo":
        assert state is not None and len(state) == 5
    # Actions belong to the env's action space.
    space = gymnasium.make(env_id).action_space
    for a in np.asarray(action):
        assert space.contains(np.asarray(a, dtype=space.dtype).reshape(space.shape))


def test_a_bad_keyword_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="learning_rat"):
        PPO(env_id="CartPole-v1", learning_rat=3e-4)
    with pytest.raises(ValueError, match="n_steps"):
        PPO(env_id="CartPole-v1", n_steps=0)
    with pytest.raises(ValueError, match="n_envs"):
        PPO(env_id="CartPole-v1", n_envs="four")
    with pytest.raises(ValueError, match="policy"):
        PPO("CnnLstmPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match="env"):
        PPO()
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        PPO("MlpPolicy", "NoSuchEnv-v0")
    with pytest.raises(ValueError, match="gamma"):
        DQN(env_id="CartPole-v1", gamma=1.5)


def test_sb3_and_rl_training_spellings_train_the_same_run():
    a = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, seed=3).learn(128)
    b = PPO(env_id="CartPole-v1", n_steps=64, batch_size=32, seed=3).train(total_timesteps=128)
    obs = np.random.default_rng(1).uniform(-1, 1, size=(20, 4)).astype(np.float32)
    np.testing.assert_array_equal(a.predict(obs, deterministic=True)[0], b.predict(obs, deterministic=True)[0])


def test_callback_sees_metrics_and_can_stop_training():
    seen = []

    def cb(metrics):
        seen.append(metrics)
        return len(seen) < 2

    model = PPO(env_id="CartPole-v1", n_steps=64, batch_size=32, seed=0)
    model.learn(64 * 10, callback=cb)
    assert len(seen) == 2 and model.num_timesteps == 128
    assert "losses/policy_loss" in seen[0] and seen[1]["num_timesteps"] == 128


def test_callback_exception_reaches_the_caller():
    def cb(metrics):
        raise KeyError("from the callback")

    model = PPO(env_id="CartPole-v1", n_steps=64, batch_size=32, seed=0)
    with pytest.raises(KeyError, match="from the callback"):
        model.learn(256, callback=cb)


def cli() -> Path:
    path = Path(os.environ.get("RL_CLI", ROOT / "target" / "release" / "rl"))
    assert path.exists(), f"the rl binary {path} is missing: cargo build --release (or set RL_CLI)"
    return path


def test_python_and_the_cli_train_the_same_run_and_read_each_others_checkpoints(tmp_path):
    kwargs = dict(n_steps=128, batch_size=64, n_epochs=4, learning_rate=3e-4, seed=5)
    config = {"algorithm": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1024, "seed": 5, "algo_kwargs": {k: v for k, v in kwargs.items() if k != "seed"}}
    cfg = tmp_path / "ppo.yaml"
    cfg.write_text(json.dumps(config))  # JSON is YAML
    subprocess.run([cli(), "train", cfg, "--out", tmp_path / "cli", "--quiet"], check=True, capture_output=True)
    from_cli = PPO.load(tmp_path / "cli" / "checkpoint")
    model = PPO(env_id="CartPole-v1", **kwargs).learn(1024)
    assert from_cli.num_timesteps == model.num_timesteps == 1024
    obs = np.random.default_rng(2).uniform(-2, 2, size=(200, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], from_cli.predict(obs, deterministic=True)[0])
    # The other way: the CLI evaluates the checkpoint Python wrote, with the same returns.
    model.save(tmp_path / "py")
    out = subprocess.run([cli(), "eval", tmp_path / "py", "--episodes", "5", "--deterministic", "--seed", "77"], check=True, capture_output=True, text=True)
    cli_returns = json.loads(out.stdout.strip().splitlines()[-1])["returns"]
    py_returns, _ = rl_training.evaluate_policy(model, n_eval_episodes=5, deterministic=True, return_episode_rewards=True, seed=77)
    assert cli_returns == py_returns


class Corridor(gymnasium.Env):
    """A user-defined env: walk right along a corridor of 6 cells to the goal (reward 1, less
    0.01 per step); the start cell is random."""

    metadata = {"render_modes": []}

    def __init__(self, length: int = 6):
        self.length = length
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=(length,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.pos = 0
        self.t = 0

    def _obs(self):
        o = np.zeros(self.length, dtype=np.float32)
        o[self.pos] = 1.0
        return o

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = int(self.np_random.integers(0, self.length - 1))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if int(action) == 1 else -1))
        self.t += 1
        terminated = self.pos == self.length - 1
        truncated = not terminated and self.t >= 30
        return self._obs(), (1.0 if terminated else 0.0) - 0.01, terminated, truncated, {}


def test_training_on_a_user_defined_gymnasium_env_class(tmp_path):
    env = Corridor()
    random_mean, _ = _random_return(env)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, learning_rate=1e-3, seed=0)
    assert model.config["env_id"].startswith("gymnasium:rl_py/")
    model.learn(6000)
    mean, _ = rl_training.evaluate_policy(model, n_eval_episodes=10, deterministic=True)
    # The best policy walks right: at most 5 steps, a return of at least 0.95.
    assert mean >= 0.94, (mean, random_mean)
    # Evaluated on the env object itself through predict, the same.
    mean_here, _ = rl_training.evaluate_policy(model, Corridor(), n_eval_episodes=10, seed=0)
    assert mean_here >= 0.94
    model.save(tmp_path / "corridor")
    assert PPO.load(tmp_path / "corridor").num_timesteps == model.num_timesteps


def _random_return(env, episodes=50):
    rng = np.random.default_rng(0)
    total = []
    for i in range(episodes):
        env.reset(seed=i)
        done, ret = False, 0.0
        while not done:
            _, r, term, trunc, _ = env.step(int(rng.integers(2)))
            ret += r
            done = term or trunc
        total.append(ret)
    return float(np.mean(total)), float(np.std(total))


def test_a_gymnasium_env_object_runs_in_gymnasium():
    model = PPO("MlpPolicy", gymnasium.make("MountainCar-v0"), n_steps=64, batch_size=64, seed=0)
    assert model.config["env_id"] == "gymnasium:MountainCar-v0"
    assert model.learn(128).num_timesteps == 128
    # An id rl does not build in goes to Gymnasium too; one it does stays in Rust.
    if "Corridor-v0" not in gymnasium.registry:
        gymnasium.register(id="Corridor-v0", entry_point=Corridor)
    assert PPO(env_id="Corridor-v0", n_steps=64, batch_size=64).config["env_id"] == "gymnasium:Corridor-v0"
    assert PPO(env_id="CartPole-v1").config["env_id"] == "CartPole-v1"


def test_cnn_policy_on_a_wrapped_atari_env(tmp_path):
    # SB3's way: gymnasium.make, then Gymnasium's Atari wrappers; the bridge remakes the
    # wrappers from the env's spec and PPO's CnnPolicy reads the stacked 84×84 frames.
    import ale_py

    gymnasium.register_envs(ale_py)
    env = gymnasium.make("ALE/Breakout-v5", frameskip=1)
    env = gymnasium.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, noop_max=30)
    env = gymnasium.wrappers.FrameStackObservation(env, 4)
    model = PPO("CnnPolicy", env, n_steps=32, batch_size=32, n_epochs=1, n_envs=2, seed=0)
    kw = model.config["env_kwargs"]
    assert [next(iter(w)).rsplit(":", 1)[-1] for w in kw["wrappers"]] == [
        "AtariPreprocessing",
        "FrameStackObservation",
    ]
    assert model.config["algo_kwargs"]["policy_kwargs"]["features_extractor_class"] == "NatureCNN"
    assert model.learn(64).num_timesteps == 64
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4, 84, 84)
    action, _ = model.predict(obs, deterministic=True)
    assert 0 <= int(action) < 4
    model.save(tmp_path / "cnn")
    again = PPO.load(tmp_path / "cnn")
    assert int(again.predict(obs, deterministic=True)[0]) == int(action)
    with pytest.raises(ValueError, match="features_extractor_class"):
        PPO("CnnPolicy", "CartPole-v1")
