"""Distributions and losses: ``dists_ref.json``.

Every quantity is computed twice with torch, on the float32 inputs (``f32``) and on the same
numbers widened to float64 (``f64``):

* ``categorical``        -- SB3 ``CategoricalDistribution``;
* ``diag_gaussian``      -- SB3 ``DiagGaussianDistribution``;
* ``squashed_gaussian``  -- SB3 ``SquashedDiagGaussianDistribution`` (SAC, epsilon 1e-6);
* ``ppo_clip``           -- the formulas of SB3 ``PPO.train``;
* ``huber``              -- ``F.smooth_l1_loss`` (SB3 DQN) and ``F.huber_loss``.

Random inputs come from one stream, ``numpy.random.default_rng(INPUT_SEED)``, drawn in the order of
:func:`draw_inputs`; the edge cases (``n3_extreme`` logits, ``b3_d2_saturating``) are constants.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3.common.distributions import (
    CategoricalDistribution,
    DiagGaussianDistribution,
    SquashedDiagGaussianDistribution,
    TanhBijector,
)

from .common import SCHEMA_VERSION, versions, write_json

F32 = np.float32
INPUT_SEED = 41
PRECISIONS = (("f32", torch.float32), ("f64", torch.float64))

SQUASH_EPSILON = 1e-6
CLIP_RANGE = 0.2
CLIP_RANGE_VF = 0.2
PPO_N = 32
HUBER_N = 16

GENERATOR = "stable-baselines3 / numpy reference recorder"
DESCRIPTION = "Reference log-probs / entropies (SB3 distributions, torch) and PPO / Huber losses"

CATEGORICAL_DESCRIPTION = (
    "SB3 CategoricalDistribution (torch.distributions.Categorical(logits=...)). log_prob[b] = "
    "log_softmax(logits[b])[actions[b]]; entropy[b] = -sum_i p_i*log p_i (torch clamps log p "
    "at finfo.min so 0*log0 terms are 0). logits [B][n]."
)

DIAG_GAUSSIAN_DESCRIPTION = (
    "SB3 DiagGaussianDistribution: Normal(mean, exp(log_std)) per dimension, summed over the "
    "action dimension. log_prob_per_dim = -((a-mu)^2)/(2 sigma^2) - log_std - log(sqrt(2 "
    "pi)); entropy = sum_d (0.5 + 0.5*log(2 pi) + log_std_d). log_std is given per sample "
    "[B][D] (SB3 PPO broadcasts one [D] vector; SAC has it per sample)."
)

SQUASHED_GAUSSIAN_DESCRIPTION = (
    "SB3 SquashedDiagGaussianDistribution (SAC), epsilon=1e-6. actions = "
    "tanh(gaussian_actions). log_prob = sum_d NormalLogProb(gaussian_actions) - sum_d log(1 - "
    "actions^2 + 1e-6) (= gaussian_log_prob - tanh_correction), computed from the stored "
    "pre-tanh gaussian_actions (SB3's SAC path). log_prob_from_actions_only: SB3 with "
    "gaussian_actions=None, i.e. u recovered as atanh(clamp(a, -1+eps, 1-eps)) with eps = "
    "finfo(dtype).eps, atanh(x)=0.5*(log1p(x)-log1p(-x)) -- differs for saturated actions. "
    "exact_log_det_no_eps = sum_d 2*(log 2 - u - softplus(-2u)) = sum log(1-tanh(u)^2) "
    "without epsilon (the numerically stable form used by e.g. SpinningUp); "
    "log_prob_exact_no_eps uses it. entropy: SB3 returns None (no closed form)."
)

PPO_CLIP_DESCRIPTION = (
    "SB3 PPO.train formulas, clip_range=0.2. ratio = exp(log_prob - old_log_prob); "
    "policy_loss_1 = A*ratio; policy_loss_2 = A*clamp(ratio, 0.8, 1.2); policy_loss = "
    "-mean(min(policy_loss_1, policy_loss_2)); clip_fraction = mean(|ratio-1| > 0.2); "
    "approx_kl = mean((ratio-1) - log_ratio). 'raw_advantages' uses A as given; "
    "'normalized_advantages' uses SB3's A' = (A - mean(A)) / (std(A) + 1e-8) with the "
    "unbiased (N-1) std. 'ratio_direct' feeds ratio_direct as the ratio with raw A. Value "
    "loss: mse(returns, values) and SB3's clip_range_vf form mse(returns, old_values + "
    "clamp(values - old_values, -0.2, 0.2))."
)

HUBER_DESCRIPTION = (
    "d = pred - target. huber_delta(d) = 0.5*d^2 if |d| <= delta else delta*(|d| - "
    "0.5*delta). smooth_l1_beta(d) = 0.5*d^2/beta if |d| < beta else |d| - 0.5*beta (= "
    "huber_beta/beta). SB3 DQN uses F.smooth_l1_loss(current_q, target_q) = "
    "smooth_l1_beta1_mean (mean reduction)."
)

# constant edge cases
EXTREME_LOGITS = np.array([[50.0, -50.0, 0.0], [-30.0, -30.0, -30.0], [0.0, 0.0, 0.001], [100.0, 99.0, -100.0]], dtype=F32)
SATURATING = {
    "mean": np.array([[0.0, 0.0], [3.0, -3.0], [0.5, -0.5]], dtype=F32),
    "log_std": np.array([[0.0, 0.0], [-1.0, -1.0], [0.0, -3.0]], dtype=F32),
    "gaussian_actions": np.array([[0.0, 0.001], [5.0, -8.0], [10.0, -0.25]], dtype=F32),
}


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------


def draw_inputs() -> dict:
    """All random inputs, float32 (actions int64), from one generator in a fixed order."""
    rng = np.random.default_rng(INPUT_SEED)

    def gaussian(batch: int, dim: int, log_std_high: float, spread: float) -> dict:
        """mean ~ N(0,1), log_std ~ U(-2, log_std_high), sample = mean + spread*std*N(0,1)."""
        mean = rng.standard_normal((batch, dim)).astype(F32)
        log_std = rng.uniform(-2.0, log_std_high, (batch, dim)).astype(F32)
        sample = (mean + np.exp(log_std) * rng.standard_normal((batch, dim)) * spread).astype(F32)
        return {"mean": mean, "log_std": log_std, "sample": sample}

    out: dict = {}
    out["logits_n5"] = (rng.standard_normal((8, 5)) * 2).astype(F32)
    out["logits_n2"] = rng.standard_normal((6, 2)).astype(F32)
    out["actions_n5"] = rng.integers(0, 5, 8)
    out["actions_n3"] = rng.integers(0, 3, 4)
    out["actions_n2"] = rng.integers(0, 2, 6)
    out["diag_b8_d3"] = gaussian(8, 3, 1.0, 1.5)
    out["diag_b5_d1"] = gaussian(5, 1, 1.0, 1.5)
    out["squashed_b8_d2"] = gaussian(8, 2, 0.5, 1.0)

    n = PPO_N
    old_log_prob = (-1.0 + 0.5 * rng.standard_normal(n)).astype(F32)
    log_prob = (old_log_prob + 0.25 * rng.standard_normal(n)).astype(F32)
    advantages = (0.3 + 2.0 * rng.standard_normal(n)).astype(F32)
    values = rng.standard_normal(n).astype(F32)
    old_values = (values + 0.4 * rng.standard_normal(n)).astype(F32)
    returns = (1.5 * rng.standard_normal(n)).astype(F32)
    ratio_direct = rng.uniform(0.5, 1.5, n).astype(F32)
    out["ppo"] = {
        "log_prob": log_prob,
        "old_log_prob": old_log_prob,
        "advantages": advantages,
        "ratio_direct": ratio_direct,
        "values": values,
        "old_values": old_values,
        "returns": returns,
    }

    target = (2.0 * rng.standard_normal(HUBER_N)).astype(F32)
    pred = (target + np.linspace(-3.0, 3.0, HUBER_N) + 0.05 * rng.standard_normal(HUBER_N)).astype(F32)
    out["huber"] = {"pred": pred, "target": target}
    return out


def _t(x: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x)).to(dtype)


# ---------------------------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------------------------


def categorical_case(name: str, logits: np.ndarray, actions: np.ndarray) -> dict:
    case = {"name": name, "logits": logits, "actions": actions}
    for key, dtype in PRECISIONS:
        dist = CategoricalDistribution(logits.shape[1]).proba_distribution(_t(logits, dtype))
        acts = torch.as_tensor(actions)
        case[key] = {
            "log_prob": dist.log_prob(acts),
            "entropy": dist.entropy(),
            "log_softmax": torch.log_softmax(_t(logits, dtype), dim=-1),
            "probs": dist.distribution.probs,
        }
    return case


def diag_gaussian_case(name: str, g: dict) -> dict:
    case = {"name": name, "mean": g["mean"], "log_std": g["log_std"], "actions": g["sample"]}
    for key, dtype in PRECISIONS:
        dist = DiagGaussianDistribution(g["mean"].shape[1]).proba_distribution(_t(g["mean"], dtype), _t(g["log_std"], dtype))
        actions = _t(g["sample"], dtype)
        case[key] = {
            "log_prob": dist.log_prob(actions),
            "entropy": dist.entropy(),
            "log_prob_per_dim": dist.distribution.log_prob(actions),
        }
    return case


def squashed_gaussian_case(name: str, mean: np.ndarray, log_std: np.ndarray, gaussian_actions: np.ndarray) -> dict:
    case = {"name": name, "mean": mean, "log_std": log_std, "gaussian_actions": gaussian_actions}
    for key, dtype in PRECISIONS:
        dim = mean.shape[1]
        dist = SquashedDiagGaussianDistribution(dim, epsilon=SQUASH_EPSILON).proba_distribution(_t(mean, dtype), _t(log_std, dtype))
        u = _t(gaussian_actions, dtype)
        actions = torch.tanh(u)
        gaussian_log_prob = DiagGaussianDistribution.log_prob(dist, u)
        tanh_correction = torch.sum(torch.log(1 - actions**2 + SQUASH_EPSILON), dim=1)
        exact_log_det = torch.sum(2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u)), dim=1)
        case[key] = {
            "actions": actions,
            "log_prob": dist.log_prob(actions, u),
            "log_prob_from_actions_only": dist.log_prob(actions),
            "inverse_tanh_of_actions": TanhBijector.inverse(actions),
            "gaussian_log_prob": gaussian_log_prob,
            "tanh_correction": tanh_correction,
            "exact_log_det_no_eps": exact_log_det,
            "log_prob_exact_no_eps": gaussian_log_prob - exact_log_det,
            "entropy": dist.entropy(),
        }
    return case


def _ppo_policy_block(advantages: torch.Tensor, ratio: torch.Tensor, with_advantages: bool = False) -> dict:
    """The clipped surrogate of SB3 ``PPO.train``."""
    policy_loss_1 = advantages * ratio
    policy_loss_2 = advantages * torch.clamp(ratio, 1 - CLIP_RANGE, 1 + CLIP_RANGE)
    min_surrogate = torch.min(policy_loss_1, policy_loss_2)
    block = {"advantages": advantages} if with_advantages else {}
    block.update(
        policy_loss_1=policy_loss_1,
        policy_loss_2=policy_loss_2,
        min_surrogate=min_surrogate,
        policy_loss=(-min_surrogate.mean()).item(),
        clip_fraction=torch.mean((torch.abs(ratio - 1) > CLIP_RANGE).float()).item(),
    )
    return block


def ppo_section(inp: dict) -> dict:
    section = {"description": PPO_CLIP_DESCRIPTION, "clip_range": CLIP_RANGE, "inputs": inp}
    for key, dtype in PRECISIONS:
        t = {k: _t(v, dtype) for k, v in inp.items()}
        log_ratio = t["log_prob"] - t["old_log_prob"]
        ratio = torch.exp(log_ratio)
        adv = t["advantages"]
        norm_adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        values_pred = t["old_values"] + torch.clamp(t["values"] - t["old_values"], -CLIP_RANGE_VF, CLIP_RANGE_VF)
        section[key] = {
            "ratio": ratio,
            "raw_advantages": _ppo_policy_block(adv, ratio),
            "normalized_advantages": _ppo_policy_block(norm_adv, ratio, with_advantages=True),
            "approx_kl": torch.mean((torch.exp(log_ratio) - 1) - log_ratio).item(),
            "ratio_direct": _ppo_policy_block(adv, t["ratio_direct"]),
            "value_loss_unclipped": F.mse_loss(t["returns"], t["values"]).item(),
            "value_loss_sb3_clipped_vf_0.2": F.mse_loss(t["returns"], values_pred).item(),
        }
    return section


def huber_section(inp: dict) -> dict:
    section = {"description": HUBER_DESCRIPTION, "inputs": inp}
    for key, dtype in PRECISIONS:
        pred, target = _t(inp["pred"], dtype), _t(inp["target"], dtype)
        sl1 = F.smooth_l1_loss(pred, target, reduction="none", beta=1.0)
        h1 = F.huber_loss(pred, target, reduction="none", delta=1.0)
        h2 = F.huber_loss(pred, target, reduction="none", delta=2.0)
        section[key] = {
            "smooth_l1_beta1_elementwise": sl1,
            "smooth_l1_beta1_mean": F.smooth_l1_loss(pred, target, beta=1.0).item(),
            "huber_delta1_elementwise": h1,
            "huber_delta1_mean": F.huber_loss(pred, target, delta=1.0).item(),
            "huber_delta2_elementwise": h2,
            "huber_delta2_mean": F.huber_loss(pred, target, delta=2.0).item(),
            "smooth_l1_beta2_mean": F.smooth_l1_loss(pred, target, beta=2.0).item(),
        }
    return section


def check_cpu() -> None:
    """The f32/f64 bits of some elementwise results depend on ATen's vector width: the reference
    was recorded with the AVX512 kernels (and MKL_CBWR=COMPATIBLE, set by ``reflib``)."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        print(f"dists: ATen CPU capability is {capability}, the reference used AVX512; "
              "dists_ref.json may differ in the last bit of some values", file=sys.stderr)


def build() -> dict:
    check_cpu()
    torch.set_num_threads(1)
    inp = draw_inputs()
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "description": DESCRIPTION,
        "versions": versions(),
        "categorical": {
            "description": CATEGORICAL_DESCRIPTION,
            "cases": [
                categorical_case("n5_random", inp["logits_n5"], inp["actions_n5"]),
                categorical_case("n3_extreme", EXTREME_LOGITS, inp["actions_n3"]),
                categorical_case("n2_random", inp["logits_n2"], inp["actions_n2"]),
            ],
        },
        "diag_gaussian": {
            "description": DIAG_GAUSSIAN_DESCRIPTION,
            "cases": [
                diag_gaussian_case("b8_d3", inp["diag_b8_d3"]),
                diag_gaussian_case("b5_d1", inp["diag_b5_d1"]),
            ],
        },
        "squashed_gaussian": {
            "description": SQUASHED_GAUSSIAN_DESCRIPTION,
            "epsilon": SQUASH_EPSILON,
            "cases": [
                squashed_gaussian_case("b8_d2_random", inp["squashed_b8_d2"]["mean"], inp["squashed_b8_d2"]["log_std"],
                                       inp["squashed_b8_d2"]["sample"]),
                squashed_gaussian_case("b3_d2_saturating", SATURATING["mean"], SATURATING["log_std"],
                                       SATURATING["gaussian_actions"]),
            ],
        },
        "ppo_clip": ppo_section(inp["ppo"]),
        "huber": huber_section(inp["huber"]),
    }


def write(out_dir: str) -> str:
    path = os.path.join(out_dir, "dists_ref.json")
    write_json(path, build())
    return path
