"""Return estimators: ``returns_ref.json``.

* ``gae``    -- stable-baselines3 ``RolloutBuffer.compute_returns_and_advantage`` (float32) and the
  same recursion in float64;
* ``nstep``  -- stable-baselines3 ``NStepReplayBuffer._get_samples`` (float32) and the definition
  in float64;
* ``vtrace`` -- V-trace (IMPALA) in float64 numpy, by the backward recursion and, as a cross-check,
  by the explicit sum form.

All inputs are drawn from ``numpy.random.default_rng(input_seed)`` (seeds below); the recipe of each
draw is in the ``_inputs`` functions. Every output is recomputed.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.buffers import NStepReplayBuffer, RolloutBuffer

from .common import SCHEMA_VERSION, versions, write_json

F32 = np.float32

GENERATOR = "stable-baselines3 / numpy reference recorder"
DESCRIPTION = (
    "Reference values for GAE (SB3), n-step returns (SB3 NStepReplayBuffer) and V-trace (numpy, "
    "IMPALA definition)"
)

# ---------------------------------------------------------------------------------------------
# GAE
# ---------------------------------------------------------------------------------------------

GAE_GAMMA = 0.99
GAE_N_STEPS = 16
GAE_N_ENVS = 4
GAE_LAMBDAS = (0.95, 1.0)
GAE_INPUT_SEEDS = (11, 12)
GAE_START_PROB = 0.15

GAE_DESCRIPTION = (
    "SB3 RolloutBuffer.compute_returns_and_advantage. episode_starts[t][e]=1 means the observation at "
    "step t starts a new episode (i.e. the env was done after step t-1). Recursion: for t=T-1: "
    "nnt=1-last_dones, v_next=last_values; else nnt=1-episode_starts[t+1], v_next=values[t+1]; "
    "delta=r[t]+gamma*v_next*nnt-values[t]; A[t]=delta+gamma*lambda*nnt*A[t+1]; returns=A+values. "
    "'advantages'/'returns' are SB3's float32 results; '*_f64' the same recursion in float64. "
    "dones_after_step[t] = episode_starts[t+1] (t<T-1), last_dones (t=T-1) -- the same data in "
    "'done' convention. SB3 bootstraps truncated episodes by adding gamma*V(terminal_obs) to the "
    "reward in collect_rollouts, not here."
)


def gae_inputs(case: int, seed: int) -> dict:
    """rewards ~ N(0,1), values ~ 2 N(0,1) (float32), episode_starts ~ Bernoulli(0.15).
    Case 0 is the start of training (all envs start an episode at t=0) with fixed last_dones."""
    rng = np.random.default_rng(seed)
    shape = (GAE_N_STEPS, GAE_N_ENVS)
    rewards = rng.standard_normal(shape).astype(F32)
    values = (rng.standard_normal(shape) * 2).astype(F32)
    starts = (rng.random(shape) < GAE_START_PROB).astype(F32)
    if case == 0:
        starts[0] = 1.0
    last_values = (rng.standard_normal(GAE_N_ENVS) * 2).astype(F32)
    last_dones = rng.random(GAE_N_ENVS) < 0.5
    if case == 0:
        last_dones = np.array([True, False, False, True])
    dones_after = np.concatenate([starts[1:], last_dones[None].astype(F32)], axis=0)
    return {
        "rewards": rewards,
        "values": values,
        "episode_starts": starts,
        "last_values": last_values,
        "last_dones": last_dones,
        "dones_after_step": dones_after,
    }


def gae_sb3(inp: dict, gae_lambda: float) -> tuple[np.ndarray, np.ndarray]:
    """Fill an SB3 RolloutBuffer through ``add`` and let SB3 compute advantages / returns."""
    buf = RolloutBuffer(
        GAE_N_STEPS,
        gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
        gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
        device="cpu",
        gae_lambda=gae_lambda,
        gamma=GAE_GAMMA,
        n_envs=GAE_N_ENVS,
    )
    zeros = np.zeros((GAE_N_ENVS, 1), dtype=F32)
    for t in range(GAE_N_STEPS):
        buf.add(
            zeros,
            zeros,
            inp["rewards"][t],
            inp["episode_starts"][t],
            torch.as_tensor(inp["values"][t]).reshape(-1, 1),
            torch.zeros(GAE_N_ENVS),
        )
    buf.compute_returns_and_advantage(torch.as_tensor(inp["last_values"]), inp["last_dones"])
    return buf.advantages.copy(), buf.returns.copy()


def gae_f64(inp: dict, gae_lambda: float) -> tuple[np.ndarray, np.ndarray]:
    """The SB3 recursion, operation for operation, in float64."""
    r = inp["rewards"].astype(np.float64)
    v = inp["values"].astype(np.float64)
    starts = inp["episode_starts"].astype(np.float64)
    adv = np.zeros_like(r)
    last = np.zeros(GAE_N_ENVS)
    for t in reversed(range(GAE_N_STEPS)):
        if t == GAE_N_STEPS - 1:
            nnt = 1.0 - inp["last_dones"].astype(np.float64)
            v_next = inp["last_values"].astype(np.float64)
        else:
            nnt = 1.0 - starts[t + 1]
            v_next = v[t + 1]
        delta = r[t] + GAE_GAMMA * v_next * nnt - v[t]
        last = delta + GAE_GAMMA * gae_lambda * nnt * last
        adv[t] = last
    return adv, adv + v


def gae_section() -> dict:
    cases = []
    for case, seed in enumerate(GAE_INPUT_SEEDS):
        inp = gae_inputs(case, seed)
        results = []
        for lam in GAE_LAMBDAS:
            adv, ret = gae_sb3(inp, lam)
            adv64, ret64 = gae_f64(inp, lam)
            diff = max(np.max(np.abs(adv - adv64)), np.max(np.abs(ret - ret64)))
            results.append({
                "gae_lambda": lam,
                "advantages": adv,
                "returns": ret,
                "advantages_f64": adv64,
                "returns_f64": ret64,
                "max_abs_diff_sb3_f32_vs_f64": float(diff),
            })
        cases.append({"case": case, "input_seed": seed, "inputs": inp, "results": results})
    return {
        "description": GAE_DESCRIPTION,
        "gamma": GAE_GAMMA,
        "n_steps": GAE_N_STEPS,
        "n_envs": GAE_N_ENVS,
        "cases": cases,
    }


# ---------------------------------------------------------------------------------------------
# n-step returns
# ---------------------------------------------------------------------------------------------

NSTEP_GAMMA = 0.99
NSTEP_T = 16
NSTEP_N_ENVS = 4
NSTEP_NS = (1, 3, 5)
NSTEP_INPUT_SEED = 21
NSTEP_TERMINATED_PROB = 0.12
NSTEP_TRUNCATED_PROB = 0.1

NSTEP_DESCRIPTION = (
    "SB3 NStepReplayBuffer (DQN/SAC n-step). Buffer of T=n_steps rows filled exactly once (full, "
    "pos=0); done = terminated | truncated is what SB3 stores, timeouts = truncated (and not "
    "terminated). For each (t,e): k runs from 0 while k<n, stopping after the first index j=t+k that "
    "is done or truncated or is the last stored row (SB3 marks row T-1 as a timeout during sampling, "
    "so sequences never wrap). nstep_return = sum_k gamma^k r[t+k] (float32 in SB3), "
    "bootstrap_discount = gamma^m with m the number of summed rewards, last_index = j (index whose "
    "next_obs is used), final_done = terminated[j] (= done*(1-timeout)). DQN target: nstep_return + "
    "bootstrap_discount*(1-final_done)*max_a Q_target(next_obs[last_index], a)."
)


def nstep_inputs() -> dict:
    """rewards ~ N(0,1) float32; terminated ~ Bernoulli(0.12); truncated ~ Bernoulli(0.1) where not
    terminated."""
    rng = np.random.default_rng(NSTEP_INPUT_SEED)
    shape = (NSTEP_T, NSTEP_N_ENVS)
    rewards = rng.standard_normal(shape).astype(F32)
    terminated = rng.random(shape) < NSTEP_TERMINATED_PROB
    truncated = (rng.random(shape) < NSTEP_TRUNCATED_PROB) & ~terminated
    return {"rewards": rewards, "terminated": terminated, "truncated": truncated, "done": terminated | truncated}


def nstep_sb3(inp: dict, n: int) -> dict:
    """Sample every (t, e) from a full SB3 NStepReplayBuffer.

    ``_get_samples`` draws the env index of each sample with ``np.random.randint``; to visit every
    column deterministically one single-env buffer per column is used (the n-step computation is
    per column, so this is the same arithmetic)."""
    obs_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    cols = {k: [] for k in ("nstep_return", "bootstrap_discount", "final_done", "last_index")}
    for e in range(NSTEP_N_ENVS):
        buf = NStepReplayBuffer(NSTEP_T, obs_space, act_space, device="cpu", n_envs=1,
                                handle_timeout_termination=True, n_steps=n, gamma=NSTEP_GAMMA)
        for t in range(NSTEP_T):
            obs = np.full((1, 1), t, dtype=F32)  # obs index t, next_obs index t+1
            buf.add(obs, obs + 1, np.zeros((1, 1), F32), inp["rewards"][t, e:e + 1],
                    inp["done"][t, e:e + 1], [{"TimeLimit.truncated": bool(inp["truncated"][t, e])}])
        assert buf.full and buf.pos == 0
        s = buf._get_samples(np.arange(NSTEP_T))
        cols["nstep_return"].append(s.rewards.numpy().ravel())
        cols["bootstrap_discount"].append(s.discounts.numpy().ravel())
        cols["final_done"].append(s.dones.numpy().ravel())
        cols["last_index"].append(s.next_observations.numpy().ravel().astype(np.int64) - 1)
    return {k: np.stack(v, axis=1) for k, v in cols.items()}


def nstep_f64(inp: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-step return and bootstrap discount by the definition, in float64."""
    r = inp["rewards"].astype(np.float64)
    stop = inp["done"] | inp["truncated"]
    ret = np.zeros((NSTEP_T, NSTEP_N_ENVS))
    disc = np.zeros((NSTEP_T, NSTEP_N_ENVS))
    for t in range(NSTEP_T):
        for e in range(NSTEP_N_ENVS):
            total, m = 0.0, 0
            for k in range(n):
                j = t + k
                total += NSTEP_GAMMA ** k * r[j, e]
                m += 1
                if stop[j, e] or j == NSTEP_T - 1:
                    break
            ret[t, e] = total
            disc[t, e] = NSTEP_GAMMA ** m
    return ret, disc


def nstep_section() -> dict:
    inp = nstep_inputs()
    results = []
    for n in NSTEP_NS:
        sb3 = nstep_sb3(inp, n)
        ret64, disc64 = nstep_f64(inp, n)
        diff = max(np.max(np.abs(sb3["nstep_return"] - ret64)), np.max(np.abs(sb3["bootstrap_discount"] - disc64)))
        results.append({
            "n": n,
            **sb3,
            "nstep_return_f64": ret64,
            "bootstrap_discount_f64": disc64,
            "max_abs_diff_sb3_f32_vs_f64": float(diff),
        })
    return {
        "description": NSTEP_DESCRIPTION,
        "gamma": NSTEP_GAMMA,
        "n_steps_buffer": NSTEP_T,
        "n_envs": NSTEP_N_ENVS,
        "inputs": inp,
        "results": results,
    }


# ---------------------------------------------------------------------------------------------
# V-trace
# ---------------------------------------------------------------------------------------------

VTRACE_GAMMA = 0.99
VTRACE_T = 20
VTRACE_B = 4
VTRACE_INPUT_SEED = 31
VTRACE_DONE_PROB = 0.1
VTRACE_CLIPS = ((1.0, 1.0), (0.5, 1.0))

VTRACE_DESCRIPTION = (
    "V-trace (IMPALA, Espeholt et al. 2018), float64. rhos=exp(log_rhos), log_rhos = target_logp - "
    "behaviour_logp; clipped_rhos=min(rho_bar,rhos); cs=min(c_bar,rhos); v_next[t]=values[t+1] "
    "(bootstrap_value at t=T-1); deltas=clipped_rhos*(r+discounts*v_next-values); vs[t]-values[t] = "
    "deltas[t] + discounts[t]*cs[t]*(vs[t+1]-values[t+1]) with vs[T]-values[T]=0; pg_advantages = "
    "min(pg_rho_bar,rhos)*(r + discounts*vs_next - values), vs_next[t]=vs[t+1] (bootstrap_value at "
    "t=T-1). discounts = gamma*(1-done), i.e. zero on the last step of an episode. pg_rho_bar = "
    "rho_bar here (paper), the scalable_agent code has a separate clip_pg_rho_threshold (default "
    "1.0). Arrays [T][B]."
)


def vtrace_inputs() -> dict:
    """log-probs = log(U(0.05, 1)), dones ~ Bernoulli(0.1), rewards ~ N(0,1), values and the
    bootstrap value ~ 2 N(0,1); all float64."""
    rng = np.random.default_rng(VTRACE_INPUT_SEED)
    shape = (VTRACE_T, VTRACE_B)
    behaviour = np.log(rng.uniform(0.05, 1.0, shape))
    target = np.log(rng.uniform(0.05, 1.0, shape))
    dones = rng.random(shape) < VTRACE_DONE_PROB
    rewards = rng.standard_normal(shape)
    values = rng.standard_normal(shape) * 2
    bootstrap = rng.standard_normal(VTRACE_B) * 2
    return {
        "behaviour_logp": behaviour,
        "target_logp": target,
        "log_rhos": target - behaviour,
        "dones": dones,
        "discounts": VTRACE_GAMMA * (1.0 - dones.astype(np.float64)),
        "rewards": rewards,
        "values": values,
        "bootstrap_value": bootstrap,
    }


def vtrace(inp: dict, rho_bar: float, c_bar: float, pg_rho_bar: float) -> dict:
    """V-trace targets by the backward recursion."""
    rhos = np.exp(inp["log_rhos"])
    clipped_rhos = np.minimum(rho_bar, rhos)
    cs = np.minimum(c_bar, rhos)
    values, disc, r = inp["values"], inp["discounts"], inp["rewards"]
    v_next = np.concatenate([values[1:], inp["bootstrap_value"][None]], axis=0)
    deltas = clipped_rhos * (r + disc * v_next - values)
    acc = np.zeros(VTRACE_B)
    vs_minus_v = np.zeros_like(values)
    for t in reversed(range(VTRACE_T)):
        acc = deltas[t] + disc[t] * cs[t] * acc
        vs_minus_v[t] = acc
    vs = vs_minus_v + values
    vs_next = np.concatenate([vs[1:], inp["bootstrap_value"][None]], axis=0)
    pg_adv = np.minimum(pg_rho_bar, rhos) * (r + disc * vs_next - values)
    return {"vs": vs, "pg_advantages": pg_adv, "clipped_rhos": clipped_rhos, "cs": cs, "deltas": deltas}


def vtrace_sum_form(inp: dict, clipped_rhos: np.ndarray, cs: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """vs[s] = V[s] + sum_{t>=s} (prod_{i=s}^{t-1} discounts[i] cs[i]) deltas[t]."""
    values, disc = inp["values"], inp["discounts"]
    vs = np.zeros_like(values)
    for s in range(VTRACE_T):
        total = values[s].copy()
        coef = np.ones(VTRACE_B)
        for t in range(s, VTRACE_T):
            total = total + coef * deltas[t]
            coef = coef * disc[t] * cs[t]
        vs[s] = total
    return vs


def vtrace_section() -> dict:
    inp = vtrace_inputs()
    results = []
    for rho_bar, c_bar in VTRACE_CLIPS:
        out = vtrace(inp, rho_bar, c_bar, rho_bar)
        vs_sum = vtrace_sum_form(inp, out["clipped_rhos"], out["cs"], out["deltas"])
        results.append({
            "rho_bar": rho_bar,
            "c_bar": c_bar,
            "pg_rho_bar": rho_bar,
            **out,
            "max_abs_diff_recursion_vs_sum_form": float(np.max(np.abs(out["vs"] - vs_sum))),
        })
    return {
        "description": VTRACE_DESCRIPTION,
        "gamma": VTRACE_GAMMA,
        "T": VTRACE_T,
        "B": VTRACE_B,
        "inputs": inp,
        "results": results,
    }


def build() -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "description": DESCRIPTION,
        "versions": versions(),
        "gae": gae_section(),
        "nstep": nstep_section(),
        "vtrace": vtrace_section(),
    }


def write(out_dir: str) -> str:
    path = os.path.join(out_dir, "returns_ref.json")
    write_json(path, build())
    return path
