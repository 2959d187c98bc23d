"""TRPO on Pendulum-v1 with the seed table's settings (rl_training's core tier)."""

import gymnasium as gym

from rl_training.core import TRPO

model = TRPO(env_id="Pendulum-v1", learning_rate=1e-3, n_steps=1024, batch_size=128, gamma=0.9, target_kl=0.01, n_critic_updates=20, seed=0)
model.train(total_timesteps=200_000)

env = gym.make("Pendulum-v1")
obs, _ = env.reset(seed=42)
action, _ = model.predict(obs, deterministic=True)
print("action", action)
