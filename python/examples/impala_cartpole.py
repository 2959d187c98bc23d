"""IMPALA on CartPole-v1: env runners and a V-trace learner (rl_training's experimental tier)."""

import gymnasium as gym

from rl_training.experimental import IMPALA

model = IMPALA(env_id="CartPole-v1", num_env_runners=2, num_envs_per_env_runner=8, lr=5e-4, gamma=0.99, seed=0)
model.train(total_timesteps=1_000_000)

env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=42)
action, _ = model.predict(obs, deterministic=True)
print("action", action)
