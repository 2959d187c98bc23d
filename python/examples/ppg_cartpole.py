"""PPG on CartPole-v1: policy and auxiliary phases (rl_training's experimental tier)."""

import gymnasium as gym

from rl_training.experimental import PPG

model = PPG(env_id="CartPole-v1", learning_rate=5e-4, n_steps=256, n_policy_iters=32, seed=0)
model.train(total_timesteps=200_000)

env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=42)
action, _ = model.predict(obs, deterministic=True)
print("action", action)
