"""A2C on CartPole-v1 with the seed table's settings (rl_training's core tier)."""

import gymnasium as gym

from rl_training.core import A2C

model = A2C(env_id="CartPole-v1", learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, seed=0)
model.train(total_timesteps=500_000)

env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=42)
action, _ = model.predict(obs, deterministic=True)
print("action", action)
