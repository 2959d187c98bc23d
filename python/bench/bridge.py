"""The Gymnasium bridge's overhead (issue 21), printed as a Markdown section for
`cargo xtask bench` (which runs it when the `rl-training` Python package is installed):

- env steps/s of CartPole-v1 with random actions: rl's Rust CartPole, Gymnasium's through the
  bridge alone (one Python call per step, the interpreter's lock taken per call) and in rl's
  vector env of 8 (one call per vector step), Gymnasium's own loop in Python, and Gymnasium's
  synchronous vector env (8 envs) in Python;
- the same PPO run (examples/configs/ppo_cartpole.yaml, seed 0) with `rl train` and from Python.

Usage: python3 python/bench/bridge.py --cli target/release/rl [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import gymnasium
import numpy as np

import rl_training
from rl_training import _rl

ROOT = Path(__file__).resolve().parents[2]


def python_loop(steps: int) -> float:
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)
    t = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


def python_vector(steps: int, n: int = 8) -> float:
    envs = gymnasium.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync")
    envs.reset(seed=0)
    envs.action_space.seed(0)
    t = time.perf_counter()
    for _ in range(steps // n):
        envs.step(envs.action_space.sample())  # autoreset inside
    return (steps // n) * n / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=str(ROOT / "target" / "release" / "rl"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    steps = 20_000 if a.quick else 200_000
    rows = [
        ("rl's Rust CartPole-v1 (`CartPole-v1`)", _rl.env_steps_per_second("CartPole-v1", steps * 5)),
        ("Gymnasium's CartPole-v1 through the bridge (`gymnasium:CartPole-v1`), one env", _rl.env_steps_per_second("gymnasium:CartPole-v1", steps)),
        ("Gymnasium's CartPole-v1 through the bridge, rl's vector env of 8 (one Python call per vector step)", _rl.env_steps_per_second("gymnasium:CartPole-v1", steps, n_envs=8)),
        ("Gymnasium's CartPole-v1, a Python loop", python_loop(steps)),
        ("Gymnasium's sync vector env, 8 × CartPole-v1, a Python loop", python_vector(steps)),
    ]
    out = ["", "## Gymnasium bridge: env steps/s (CartPole-v1, random actions, one process)", ""]
    out += [f"gymnasium {gymnasium.__version__}, numpy {np.__version__}; `python/bench/bridge.py`.", ""]
    out += ["| env | env steps/s |", "|---|---|"]
    out += [f"| {name} | {rate:,.0f} |" for name, rate in rows]

    config = ROOT / "examples" / "configs" / "ppo_cartpole.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        proc = subprocess.run([a.cli, "train", str(config), "--quiet", "--seed", "0", "--set", "eval_freq=0", "--out", tmp], check=True, capture_output=True, text=True)
        cli_s = time.perf_counter() - t
        cli_return = json.loads(proc.stdout.strip().splitlines()[-1]).get("eval_mean_return")
    t = time.perf_counter()
    model = rl_training.Algorithm.from_config(config, seed=0)
    model.learn(model.config["total_timesteps"])
    py_s = time.perf_counter() - t
    py_return, _ = rl_training.evaluate_policy(model, n_eval_episodes=10)
    out += ["", "| PPO CartPole-v1 100k (`ppo_cartpole.yaml`, seed 0) | wall-clock s | final eval return |", "|---|---|---|"]
    out += [f"| `rl train` | {cli_s:.2f} | {cli_return} |", f"| Python: `rl_training.Algorithm.from_config(...).learn(...)` | {py_s:.2f} | {py_return} |"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
