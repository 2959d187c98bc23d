"""Contrib algorithms (rl_training's Contrib tier: RecurrentPPO)."""

from rl_training._base import Algorithm, register

__all__ = ["RecurrentPPO"]


@register
class RecurrentPPO(Algorithm):
    """PPO with an LSTM policy (sb3-contrib's RecurrentPPO)."""

    algorithm = "recurrent_ppo"
    policies = ("MlpLstmPolicy", "MlpPolicy")
