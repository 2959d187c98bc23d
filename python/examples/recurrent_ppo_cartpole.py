"""Recurrent PPO (LSTM policy) on CartPole-v1 (rl_training's contrib tier): the LSTM state goes
from one `predict` to the next, and `episode_start` resets it."""

import gymnasium as gym
import numpy as np

from rl_training.contrib import RecurrentPPO

model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", learning_rate=3e-4, n_steps=128, batch_size=128, n_epochs=4, seed=0)
model.train(total_timesteps=200_000)

env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=42)
state, episode_start = None, np.ones((1,), dtype=bool)
episode_return, done = 0.0, False
while not done:
    action, state = model.predict(obs, state=state, episode_start=episode_start, deterministic=True)
    obs, reward, terminated, truncated, _ = env.step(action)
    episode_start = np.zeros((1,), dtype=bool)
    episode_return += reward
    done = terminated or truncated
print("return", episode_return)
