"""Core algorithms: the stable ones (rl_training's Core tier: PPO, A2C, TRPO; and SB3's core
off-policy pair, DQN and SAC)."""

from rl_training._base import Algorithm, register

__all__ = ["PPO", "A2C", "TRPO", "DQN", "SAC"]


@register
class PPO(Algorithm):
    """Proximal Policy Optimization (``rl train`` with ``algorithm: ppo``)."""

    algorithm = "ppo"
    policies = ("MlpPolicy", "CnnPolicy")


@register
class A2C(Algorithm):
    """Advantage Actor-Critic."""

    algorithm = "a2c"
    policies = ("MlpPolicy", "CnnPolicy")


@register
class TRPO(Algorithm):
    """Trust Region Policy Optimization (sb3-contrib's)."""

    algorithm = "trpo"


@register
class DQN(Algorithm):
    """Deep Q-Network, with every Rainbow part as an option."""

    algorithm = "dqn"


@register
class SAC(Algorithm):
    """Soft Actor-Critic, continuous and discrete actions."""

    algorithm = "sac"
