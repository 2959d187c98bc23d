"""PPO on CartPole-v1 with the seed table's settings (rl_training's core tier)."""

import gymnasium as gym

from rl_training.core import PPO

model = PPO(env_id="CartPole-v1", learning_rate=3e-4, n_steps=2048, batch_size=64, n_epochs=10, gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, seed=0)
model.train(total_timesteps=100_000)

env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=42)
episode_return, done = 0.0, False
while not done:
    action, _ = model.predict(obs, deterministic=True)
    obs, reward, terminated, truncated, _ = env.step(action)
    episode_return += reward
    done = terminated or truncated
print("return", episode_return)
model.save("runs/ppo_cartpole")
