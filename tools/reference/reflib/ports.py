"""Float32-aware Python ports of Pendulum-v1 and MountainCarContinuous-v0.

These are the recipes documented in ``testdata/reference/README.md`` (a port in another language
follows them to be bit-exact). :func:`check_port` replays recorded Gymnasium episodes through a
port and measures how exactly it follows; the result is stored as ``port_check_f32_aware``.

A port is an object with ``step(state, action, first) -> (state, obs, reward, terminated)``, where
``first`` is true for the first step after ``reset``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .common import f32


class PendulumF32:
    """Pendulum with the float32 roundings numpy 2 applies (see the env's numeric_notes)."""

    def __init__(self, u):
        self.g, self.m, self.l, self.dt = u.g, u.m, u.l, u.dt
        self.max_speed, self.max_torque = u.max_speed, u.max_torque

    @staticmethod
    def _norm(x: float) -> float:
        return ((x + math.pi) % (2 * math.pi)) - math.pi

    def step(self, s, a, first: bool):
        g, m, l, dt, ms, mt = self.g, self.m, self.l, self.dt, self.max_speed, self.max_torque
        th, thd = s
        uu = min(max(f32(a[0]), f32(-mt)), f32(mt))  # float32
        ctrl_cost = f32(f32(0.001) * f32(uu * uu))  # float32 ops, then widened
        costs = self._norm(th) ** 2 + 0.1 * thd ** 2 + ctrl_cost
        torque_term = f32(f32(3.0 / (m * l ** 2)) * uu)  # float32 product
        nthd = thd + (3 * g / (2 * l) * math.sin(th) + torque_term) * dt
        nthd = min(max(nthd, -ms), ms)
        nth = th + nthd * dt
        obs = [f32(v) for v in (math.cos(nth), math.sin(nth), nthd)]
        return [nth, nthd], obs, -costs, False


class MountainCarContinuousF32:
    """MountainCarContinuous with numpy-2 float32 semantics. The internal state is float64 right
    after reset and float32 after every step; Python-float constants meeting a float32 operand are
    first rounded to float32 (NEP 50), comparisons included."""

    def __init__(self, u):
        self.u = u

    def step(self, s, a, first: bool):
        u = self.u
        p, v = s
        f = f32(a[0])
        f = min(max(f, -1.0), 1.0)
        fp = f32(f * f32(u.power))  # float32 product
        three_p = (3 * p) if first else f32(3 * p)  # 3*position: float32 once state is float32
        grav = 0.0025 * math.cos(three_p)  # Python float
        dv = f32(fp - f32(grav))  # float32 - weak Python float -> float32
        if first:
            v = v + dv  # float64 + float32 -> float64
            cmp = lambda x, c: c  # comparisons in float64
        else:
            v = f32(v + dv)
            cmp = lambda x, c: f32(c)  # Python constant rounded to float32
        hi, lo = u.max_speed, -u.max_speed
        v_is_py = False
        if v > cmp(v, hi):
            v, v_is_py = hi, True
        if v < cmp(v, lo):
            v, v_is_py = lo, True
        if first:
            p = p + v
        else:
            p = f32(p + (f32(v) if v_is_py else v))
        p_is_py = False
        if p > cmp(p, u.max_position):
            p, p_is_py = u.max_position, True
        if p < cmp(p, u.min_position):
            p, p_is_py = u.min_position, True
        # once clamped, position is the Python float itself: the == test is then exact in float64
        if p == (u.min_position if p_is_py else cmp(p, u.min_position)) and v < 0:
            v = 0.0
        p, v = f32(p), f32(v)  # stored as float32
        term = p >= f32(u.goal_position) and v >= f32(u.goal_velocity)
        r = (100.0 if term else 0.0) - float(a[0]) ** 2 * 0.1
        return [p, v], [p, v], r, term


PORTS: dict[str, Callable] = {"pendulum": PendulumF32, "mountaincar_cont": MountainCarContinuousF32}


def _max_abs(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def check_port(port, episodes: list[dict]) -> dict:
    """Compare a port against recorded episodes (JSON records from :mod:`reflib.envs`).

    ``one_step``: every recorded step is reproduced from the recorded state before it.
    ``rollout``: each episode is replayed from ``initial_state`` with the recorded actions.
    """
    n = 0
    exact = {"state": 0, "obs": 0, "reward": 0}
    err = {"state": 0.0, "obs": 0.0, "reward": 0.0}
    term_mismatch = 0
    rollout = []
    for ep in episodes:
        prev = ep["initial_state"]
        for t, a in enumerate(ep["actions"]):
            s, o, r, term = port.step(prev, a, t == 0)
            for key, mine, ref in (("state", s, ep["states"][t]), ("obs", o, ep["observations"][t]),
                                   ("reward", [r], [ep["rewards"][t]])):
                exact[key] += list(map(float, mine)) == list(map(float, ref))
                err[key] = max(err[key], _max_abs(mine, ref))
            term_mismatch += bool(term) != ep["terminated"][t]
            n += 1
            prev = ep["states"][t]
        s = ep["initial_state"]
        worst, first_bad = 0.0, None
        for t, a in enumerate(ep["actions"]):
            s, _, _, _ = port.step(s, a, t == 0)
            e = _max_abs(s, ep["states"][t])
            worst = max(worst, e)
            if first_bad is None and list(map(float, s)) != list(map(float, ep["states"][t])):
                first_bad = t
        rollout.append({"seed": ep["seed"], "max_abs_state_err": worst, "first_step_with_state_mismatch": first_bad})
    return {
        "one_step": {
            "n_steps": n,
            "state_bit_exact_fraction": exact["state"] / n,
            "obs_bit_exact_fraction": exact["obs"] / n,
            "reward_bit_exact_fraction": exact["reward"] / n,
            "max_abs_state_err": err["state"],
            "max_abs_obs_err": err["obs"],
            "max_abs_reward_err": err["reward"],
            "terminated_mismatches": term_mismatch,
        },
        "rollout": rollout,
    }
