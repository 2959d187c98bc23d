"""stable-baselines3's SAC on HalfCheetah-v5, beside `rl train examples/configs/sac_halfcheetah.yaml`.

rl-zoo's hyperparameters for SAC on HalfCheetah (learning_starts 10000, everything else SB3's
defaults: 256-256 ReLU, lr 3e-4, buffer 1M, batch 256, tau 0.005, auto entropy) and the same
evaluation as rl's runner: every 15,000 steps, 10 deterministic episodes on a separately
seeded env. Prints one JSON line per evaluation and a summary line.

    python3 python/bench/sb3_halfcheetah.py [--seed 0] [--steps 300000]
"""
import argparse
import json
import time

import gymnasium as gym
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy


class Evaluate(BaseCallback):
    def __init__(self, env, every):
        super().__init__()
        self.env, self.every, self.results = env, every, []

    def _on_step(self):
        if self.num_timesteps % self.every == 0:
            mean, std = evaluate_policy(self.model, self.env, n_eval_episodes=10, deterministic=True)
            self.results.append((self.num_timesteps, mean))
            print(json.dumps({"timesteps": self.num_timesteps, "eval_mean_return": mean,
                              "eval_std_return": std, "seconds": time.time() - START}), flush=True)
        return True


p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--steps", type=int, default=300_000)
a = p.parse_args()
eval_env = gym.make("HalfCheetah-v5")
eval_env.reset(seed=a.seed + 1_000_000)
model = SAC("MlpPolicy", gym.make("HalfCheetah-v5"), learning_starts=10_000, seed=a.seed, device="cpu")
cb = Evaluate(eval_env, 15_000)
START = time.time()
model.learn(a.steps, callback=cb)
best = max(cb.results, key=lambda r: r[1])
print(json.dumps({"total_timesteps": a.steps, "train_seconds": time.time() - START,
                  "eval_mean_return": cb.results[-1][1], "best_eval_mean_return": best[1],
                  "best_eval_timesteps": best[0]}))
