"""Record Gymnasium trajectories: ``envs/<KEY>.json``.

For every environment and seed the episode is recorded by really running Gymnasium:
``env = gymnasium.make(env_id, **make_kwargs)``, ``env.reset(seed=seed)``, then actions from

* ``rng``: ``rng = numpy.random.default_rng(1000 + seed)``; ``Discrete(n, start)`` ->
  ``start + rng.integers(n)``; ``Box`` -> ``rng.uniform(low.astype(f64), high.astype(f64))
  .astype(space.dtype)``;
* ``policy:...``: a fixed feedback policy on the observation (CartPole, MountainCar*),

until ``terminated`` / ``truncated`` or :data:`STEP_CAP` steps. After reset and after every step
the raw internal state of the unwrapped env is recorded.

Environment-specific extras:

* FrozenLake: the transition table ``P`` and, per draw, the uniform number the env consumed
  (``reset_uniform_draw``, ``uniform_draws``), the chosen transition and the move direction;
* LunarLander: the terrain / initial-force draws of ``reset`` and the two dispersion uniforms
  every step consumes.

The random numbers an env consumed are recovered with a *shadow generator*: a copy of the env's
``np_random`` state is made before the call and the documented draws are repeated on the copy;
afterwards the copy's state must equal the env's state (checked), which proves the recorded
numbers are exactly the ones the env used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from . import ports
from .common import SCHEMA_VERSION, versions, write_json

STEP_CAP = 500
ACTION_RNG_OFFSET = 1000
SEEDS = (0, 1)
#: Seeds over which the float32-aware ports are checked (``port_check_f32_aware``).
PORT_CHECK_SEEDS = (0, 1, 2, 3)

GENERATOR = "gymnasium reference recorder"

ACTION_GENERATION = (
    "episodes with action_source 'rng': rng = numpy.random.default_rng(1000 + seed); per step: "
    "Discrete(n,start) -> start + rng.integers(n); Box -> rng.uniform(low.astype(f64), "
    "high.astype(f64)).astype(space.dtype). Episodes with action_source 'policy:...' use the stated "
    "feedback policy on the observation. Either way the actions are recorded; replay them."
)

PORT_CHECK_DESCRIPTION = (
    "Same as port_check but emulating numpy-2 float32 roundings (f32(x) = round to nearest float32) "
    "exactly as listed in numeric_notes; shows that bit-exact reproduction is possible with these "
    "roundings."
)

FROZENLAKE_NOTES = (
    "Transition sampled as argmax(cumsum(probs) > u) with u = np_random.random(); probs per (s,a) are "
    "in 'transitions' (slippery: [fail, success, fail] for directions [(a-1)%4, a, (a+1)%4], "
    "success_rate=1/3). Actions: 0=LEFT 1=DOWN 2=RIGHT 3=UP. reset draws one u too (recorded as "
    "reset_uniform_draw)."
)

LUNAR_NOTES = (
    "Box2D (float32 internally) physics; a port can only be expected to match approximately. reset() "
    "performs one internal step with the no-op action, which consumes one dispersion pair. RNG draw "
    "order after seeding: 12 terrain heights uniform(0,H/2), 2 initial force uniform(-1000,1000), "
    "(no wind draws: enable_wind=False), then 2 dispersion uniforms(-1,1) per step (also the one "
    "inside reset)."
)

LUNAR_BODY_FIELDS = [
    "lander.position.x",
    "lander.position.y",
    "lander.angle",
    "lander.linearVelocity.x",
    "lander.linearVelocity.y",
    "lander.angularVelocity",
]


# --------------------------------------------------------------------------------------------
# feedback policies (observation -> action); the name is recorded as ``action_source``
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    name: str
    act: Callable[[np.ndarray], Any]


def _cartpole_pd(obs: np.ndarray) -> int:
    x, xd, th, thd = (float(v) for v in obs)
    return int(th + 0.5 * thd + 0.01 * x + 0.1 * xd > 0)


def _mountaincar_pump(obs: np.ndarray) -> int:
    return 2 if obs[1] >= 0 else 0


def _mountaincar_cont_pump(obs: np.ndarray) -> np.ndarray:
    return np.array([1.0 if obs[1] >= 0 else -1.0], dtype=np.float32)


PD_BALANCE = Policy("policy:pd_balance a=int(th+0.5*thd+0.01*x+0.1*xd>0)", _cartpole_pd)
ENERGY_PUMPING = Policy("policy:energy_pumping a=2 if v>=0 else 0", _mountaincar_pump)
ENERGY_PUMPING_CONT = Policy("policy:energy_pumping a=[+1] if v>=0 else [-1]", _mountaincar_cont_pump)


# --------------------------------------------------------------------------------------------
# environment table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvSpec:
    key: str
    env_id: str
    make_kwargs: dict
    state_description: list
    numeric_notes: str
    kind: str = "classic"  # "classic" | "frozenlake" | "lunar"
    policies: tuple = ()
    port: str | None = None  # name of the float32-aware port in reflib.ports


ENV_SPECS: tuple[EnvSpec, ...] = (
    EnvSpec(
        "CartPole-v1", "CartPole-v1", {}, ["x", "x_dot", "theta", "theta_dot"],
        "State is float64 throughout (reset: rng.uniform(-0.05,0.05,4)); obs = float32(state). Euler "
        "integrator; force = +force_mag if action==1 else -force_mag; reward 1.0 every step (also on "
        "the terminating step).",
        policies=(PD_BALANCE,),
    ),
    EnvSpec(
        "Pendulum-v1", "Pendulum-v1", {}, ["theta", "theta_dot"],
        "State float64. The float32 action u enters numpy-2 (NEP 50) arithmetic as float32: "
        "u=clip(a,-2,2)[0] stays float32, so 0.001*(u**2) and 3.0/(m*l**2)*u are computed in float32 "
        "and only then promoted to float64. reward=-(angle_normalize(th)**2+0.1*thdot**2+0.001*u**2) "
        "uses the state BEFORE the step. Never terminates; truncated at 200. port_pendulum_f32() in "
        "ref/README.md (float32 recipes) is an exact (bit-for-bit) recipe.",
        port="pendulum",
    ),
    EnvSpec(
        "MountainCar-v0", "MountainCar-v0", {}, ["position", "velocity"],
        "State float64 (reset: [uniform(-0.6,-0.4), 0]). reward -1.0 per step.",
        policies=(ENERGY_PUMPING,),
    ),
    EnvSpec(
        "MountainCarContinuous-v0", "MountainCarContinuous-v0", {}, ["position", "velocity"],
        "After the first step the internal state is stored as float32 (np.array([...], "
        "dtype=float32)); reset state is float64. force=clip(a,-1,1) is float32 and force*power is a "
        "float32 product (NEP 50). Observation returned by step is the float32 state itself. reward = "
        "100*terminated - 0.1*a**2 (math.pow on the float32 action widened to float64). Comparisons of "
        "a float32 value with a Python constant happen in float32; a clamped value becomes the Python "
        "float constant itself. port_mountaincar_cont_f32() in ref/README.md (float32 recipes) is an "
        "exact (bit-for-bit) recipe.",
        policies=(ENERGY_PUMPING_CONT,),
        port="mountaincar_cont",
    ),
    EnvSpec(
        "Acrobot-v1", "Acrobot-v1", {}, ["theta1", "theta2", "dtheta1", "dtheta2"],
        "Reset state is float32 (cast), widened to float64 on the first step; rk4 with one step of "
        "dt=0.2 over [0, dt]; 'book' dynamics; theta wrapped to [-pi,pi], velocities clipped. reward "
        "-1.0 per step, 0.0 on the terminating step.",
    ),
    EnvSpec(
        "FrozenLake-v1_4x4_slippery", "FrozenLake-v1", {"map_name": "4x4", "is_slippery": True},
        ["s (cell index row*ncol+col)"], FROZENLAKE_NOTES, kind="frozenlake",
    ),
    EnvSpec(
        "FrozenLake-v1_8x8_slippery", "FrozenLake-v1", {"map_name": "8x8", "is_slippery": True},
        ["s (cell index row*ncol+col)"], FROZENLAKE_NOTES, kind="frozenlake",
    ),
    EnvSpec(
        "FrozenLake-v1_4x4_deterministic", "FrozenLake-v1", {"map_name": "4x4", "is_slippery": False},
        ["s (cell index row*ncol+col)"], FROZENLAKE_NOTES, kind="frozenlake",
    ),
    EnvSpec("LunarLander-v3", "LunarLander-v3", {}, LUNAR_BODY_FIELDS, LUNAR_NOTES, kind="lunar"),
    EnvSpec(
        "LunarLander-v3_continuous", "LunarLander-v3", {"continuous": True}, LUNAR_BODY_FIELDS,
        LUNAR_NOTES, kind="lunar",
    ),
)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def space_to_json(space: gym.Space) -> dict:
    """``{"type":"Box",shape,dtype,low,high}`` or ``{"type":"Discrete",n,start}``."""
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": [float(v) for v in space.low.ravel()],
            "high": [float(v) for v in space.high.ravel()],
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise TypeError(f"unsupported space {space!r}")


def action_to_json(action: Any) -> Any:
    if isinstance(action, np.ndarray):
        return [float(v) for v in action.ravel()]
    return int(action)


def obs_to_json(obs: Any) -> Any:
    if isinstance(obs, np.ndarray):
        return [float(v) for v in obs.ravel()]
    return int(obs)


def classic_state(env: gym.Env) -> tuple[list, str]:
    """Raw ``env.unwrapped.state`` as a list of floats plus its numpy dtype description."""
    state = env.unwrapped.state
    if isinstance(state, tuple):
        dtype = "tuple(" + ",".join(np.asarray(v).dtype.name for v in state) + ")"
        return [float(v) for v in state], dtype
    arr = np.asarray(state)
    return [float(v) for v in arr.ravel()], arr.dtype.name


def lunar_body(body) -> list:
    """``[x, y, angle, vx, vy, omega]`` of a Box2D body."""
    return [
        float(body.position.x),
        float(body.position.y),
        float(body.angle),
        float(body.linearVelocity.x),
        float(body.linearVelocity.y),
        float(body.angularVelocity),
    ]


class ShadowRng:
    """Replays an env's random draws on a copy of its generator (see the module docstring)."""

    def __init__(self, env: gym.Env, state: dict | None = None):
        self.env = env
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state if state is not None else env.unwrapped.np_random.bit_generator.state

    @classmethod
    def seeded(cls, env: gym.Env, seed: int) -> "ShadowRng":
        """Generator as Gymnasium seeds it in ``reset(seed=seed)``."""
        return cls(env, np.random.default_rng(seed).bit_generator.state)

    def assert_in_sync(self) -> None:
        if self.rng.bit_generator.state != self.env.unwrapped.np_random.bit_generator.state:
            raise AssertionError("shadow generator out of sync with the environment's np_random")


def action_sampler(space: gym.Space, seed: int) -> Callable[[np.ndarray], Any]:
    """Random actions as described in :data:`ACTION_GENERATION`."""
    rng = np.random.default_rng(ACTION_RNG_OFFSET + seed)
    if isinstance(space, gym.spaces.Discrete):
        return lambda obs: int(space.start + rng.integers(space.n))
    if isinstance(space, gym.spaces.Box):
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        return lambda obs: rng.uniform(low, high).astype(space.dtype)
    raise TypeError(f"unsupported action space {space!r}")


# --------------------------------------------------------------------------------------------
# episode recording
# --------------------------------------------------------------------------------------------


def frozenlake_is_slippery(env: gym.Env) -> bool:
    """A slippery lake has three outcomes per (state, action), a deterministic one exactly one."""
    return len(env.unwrapped.P[0][0]) > 1


def frozenlake_move_direction(env: gym.Env, action: int, index: int) -> int:
    """Direction actually moved: slippery outcomes are ``[(a-1)%4, a, (a+1)%4]``."""
    if not frozenlake_is_slippery(env):
        return int(action)
    return [(action - 1) % 4, action, (action + 1) % 4][index]


def frozenlake_transition_index(env: gym.Env, state: int, action: int, u: float) -> int:
    probs = np.asarray([t[0] for t in env.unwrapped.P[state][action]])
    return int(np.argmax(np.cumsum(probs) > u))


def lunar_reset_info(env: gym.Env, seed: int) -> dict:
    """Replay the documented draws of ``LunarLander.reset`` and describe the terrain."""
    from gymnasium.envs.box2d.lunar_lander import INITIAL_RANDOM, SCALE, VIEWPORT_H, VIEWPORT_W

    u = env.unwrapped
    if u.enable_wind:
        raise NotImplementedError("wind draws are not recorded")
    shadow = ShadowRng.seeded(env, seed)
    w, h = VIEWPORT_W / SCALE, VIEWPORT_H / SCALE
    chunks = 11
    raw = shadow.rng.uniform(0, h / 2, size=(chunks + 1,))
    height = raw.copy()
    chunk_x = [w / (chunks - 1) * i for i in range(chunks)]
    helipad_y = h / 4
    for i in range(chunks // 2 - 2, chunks // 2 + 3):
        height[i] = helipad_y
    smooth_y = [0.33 * (height[i - 1] + height[i + 0] + height[i + 1]) for i in range(chunks)]
    force = [shadow.rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM) for _ in range(2)]
    dispersion = [shadow.rng.uniform(-1.0, +1.0) for _ in range(2)]
    shadow.assert_in_sync()
    assert (u.helipad_x1, u.helipad_x2, u.helipad_y) == (chunk_x[chunks // 2 - 1], chunk_x[chunks // 2 + 1], helipad_y)
    return {
        "terrain": {
            "height_raw_draws": [float(v) for v in raw],
            "height": [float(v) for v in height],
            "chunk_x": [float(v) for v in chunk_x],
            "smooth_y": [float(v) for v in smooth_y],
            "helipad_x1": float(u.helipad_x1),
            "helipad_x2": float(u.helipad_x2),
            "helipad_y": float(u.helipad_y),
        },
        "initial_force": [float(v) for v in force],
        "reset_step_dispersion_uniforms": [float(v) for v in dispersion],
        "body_vec_format": list(LUNAR_BODY_FIELDS),
        "legs_after_reset": [lunar_body(leg) for leg in u.legs],
        "legs_ground_contact_after_reset": [bool(leg.ground_contact) for leg in u.legs],
        "lander_awake_after_reset": bool(u.lander.awake),
    }


def episode_return(rewards: list[float]) -> float:
    """Sum of the rewards as numpy sums a float64 array (pairwise summation)."""
    return float(np.sum(np.asarray(rewards, dtype=np.float64)))


def record_episode(spec: EnvSpec, seed: int, policy: Policy | None) -> dict:
    """Run one episode and return its JSON record (field order as in the reference files)."""
    env = gym.make(spec.env_id, **spec.make_kwargs)
    obs, _ = env.reset(seed=seed)
    u = env.unwrapped
    act = action_sampler(env.action_space, seed) if policy is None else policy.act

    ep: dict[str, Any] = {
        "seed": seed,
        "action_source": "rng" if policy is None else policy.name,
        "action_rng_seed": ACTION_RNG_OFFSET + seed if policy is None else None,
        "initial_obs": obs_to_json(obs),
    }
    if spec.kind == "frozenlake":
        shadow = ShadowRng.seeded(env, seed)
        reset_u = float(shadow.rng.random())
        shadow.assert_in_sync()
        ep.update(initial_state=int(u.s), initial_state_dtype="int", reset_uniform_draw=reset_u,
                  step_state_dtype="int")
    elif spec.kind == "lunar":
        ep.update(initial_state=lunar_body(u.lander), initial_state_dtype="float32 (Box2D)",
                  lunar_reset=lunar_reset_info(env, seed), step_state_dtype="float32 (Box2D)")
    else:
        state, dtype = classic_state(env)
        ep.update(initial_state=state, initial_state_dtype=dtype)

    actions, observations, rewards, terms, truncs, states = [], [], [], [], [], []
    draws, trans_idx, moves, dispersions = [], [], [], []
    step_dtype = None
    terminated = truncated = False
    while not (terminated or truncated) and len(actions) < STEP_CAP:
        action = act(obs)
        if spec.kind == "frozenlake":
            s_before = int(u.s)
            shadow = ShadowRng(env)
            draw = float(shadow.rng.random())
        elif spec.kind == "lunar":
            shadow = ShadowRng(env)
            draw = [float(shadow.rng.uniform(-1.0, +1.0)) for _ in range(2)]
        obs, reward, terminated, truncated, _ = env.step(action)
        actions.append(action_to_json(action))
        observations.append(obs_to_json(obs))
        rewards.append(float(reward))
        terms.append(bool(terminated))
        truncs.append(bool(truncated))
        if spec.kind == "frozenlake":
            shadow.assert_in_sync()
            idx = frozenlake_transition_index(env, s_before, int(action), draw)
            assert u.P[s_before][int(action)][idx][1] == int(u.s)
            states.append(int(u.s))
            draws.append(draw)
            trans_idx.append(idx)
            moves.append(frozenlake_move_direction(env, int(action), idx))
        elif spec.kind == "lunar":
            shadow.assert_in_sync()
            states.append(lunar_body(u.lander))
            dispersions.append(draw)
        else:
            state, step_dtype = classic_state(env)
            states.append(state)
    env.close()

    if spec.kind == "classic":
        ep["step_state_dtype"] = step_dtype
    end = "terminated" if terminated else "truncated" if truncated else "step_cap"
    ep.update(num_steps=len(actions), end_reason=end, episode_return=episode_return(rewards), actions=actions,
              observations=observations, rewards=rewards, terminated=terms, truncated=truncs,
              states=states)
    if spec.kind == "frozenlake":
        ep.update(uniform_draws=draws, transition_index=trans_idx, move_direction=moves)
    elif spec.kind == "lunar":
        ep["dispersion_uniforms"] = dispersions
    return ep


def frozenlake_info(env: gym.Env) -> dict:
    u = env.unwrapped
    return {
        "map": [row.tobytes().decode() for row in u.desc],
        "nrow": int(u.nrow),
        "ncol": int(u.ncol),
        "transitions_format": "transitions[s][a] = list of [prob, next_state, reward, terminated]",
        "transitions": [
            [[[float(p), int(s2), float(r), bool(t)] for p, s2, r, t in u.P[s][a]] for a in range(u.action_space.n)]
            for s in range(u.observation_space.n)
        ],
        "is_slippery": frozenlake_is_slippery(env),
    }


def record_env(spec: EnvSpec) -> dict:
    """The whole ``envs/<KEY>.json`` document for one environment."""
    env = gym.make(spec.env_id, **spec.make_kwargs)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "description": f"Reference trajectories for {spec.env_id} {spec.make_kwargs}",
        "versions": versions(),
        "key": spec.key,
        "env_id": spec.env_id,
        "make_kwargs": dict(spec.make_kwargs),
        "env_class": type(env.unwrapped).__name__,
        "max_episode_steps": env.spec.max_episode_steps,
        "reward_threshold": env.spec.reward_threshold,
        "step_cap": STEP_CAP,
        "seeds": list(SEEDS),
        "action_generation": ACTION_GENERATION,
        "observation_space": space_to_json(env.observation_space),
        "action_space": space_to_json(env.action_space),
        "state_description": list(spec.state_description),
        "numeric_notes": spec.numeric_notes,
    }
    if spec.kind == "frozenlake":
        doc["frozenlake"] = frozenlake_info(env)
    env.close()
    if spec.port is not None:
        doc["port_check_f32_aware"] = port_check(spec)
    episodes = [record_episode(spec, seed, None) for seed in SEEDS]
    for policy in spec.policies:
        episodes += [record_episode(spec, seed, policy) for seed in SEEDS]
    doc["episodes"] = episodes
    return doc


def port_check(spec: EnvSpec) -> dict:
    """``port_check_f32_aware``: replay freshly recorded Gymnasium episodes (random actions, then
    each policy, seeds :data:`PORT_CHECK_SEEDS`) through the float32-aware Python port."""
    env = gym.make(spec.env_id, **spec.make_kwargs)
    port = ports.PORTS[spec.port](env.unwrapped)
    env.close()
    episodes = [record_episode(spec, seed, None) for seed in PORT_CHECK_SEEDS]
    for policy in spec.policies:
        episodes += [record_episode(spec, seed, policy) for seed in PORT_CHECK_SEEDS]
    return {"description": PORT_CHECK_DESCRIPTION, **ports.check_port(port, episodes)}


def write_all(out_dir: str, keys: list[str] | None = None) -> list[str]:
    """Write ``<out_dir>/envs/<KEY>.json`` for every (selected) environment; returns the paths."""
    paths = []
    for spec in ENV_SPECS:
        if keys and spec.key not in keys:
            continue
        path = os.path.join(out_dir, "envs", f"{spec.key}.json")
        write_json(path, record_env(spec))
        paths.append(path)
    return paths
