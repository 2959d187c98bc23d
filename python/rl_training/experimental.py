"""Experimental algorithms (rl_training's Experimental tier: IMPALA, APPO, PPG, GAIL, MARWIL,
AWR, OpenAI-ES, ARS; and rl's BC, CQL and DreamerV3)."""

from rl_training._base import Algorithm, register

__all__ = ["IMPALA", "APPO", "PPG", "GAIL", "MARWIL", "AWR", "ES", "OpenAIES", "ARS", "BC", "CQL", "DreamerV3"]


@register
class IMPALA(Algorithm):
    """IMPALA: asynchronous env runners, V-trace off-policy correction."""

    algorithm = "impala"
    policies = ("MlpPolicy", "CnnPolicy")


@register
class APPO(Algorithm):
    """Asynchronous PPO (RLlib's APPO)."""

    algorithm = "appo"
    policies = ("MlpPolicy", "CnnPolicy")


@register
class PPG(Algorithm):
    """Phasic Policy Gradient."""

    algorithm = "ppg"


@register
class GAIL(Algorithm):
    """Generative adversarial imitation (GAIL, or AIRL with ``reward_net: airl``), from
    expert demonstrations (``offline_data``)."""

    algorithm = "gail"


@register
class MARWIL(Algorithm):
    """Monotonic advantage re-weighted imitation learning, from a dataset (``offline_data``)."""

    algorithm = "marwil"


@register
class AWR(Algorithm):
    """Advantage-Weighted Regression."""

    algorithm = "awr"


@register
class ES(Algorithm):
    """OpenAI Evolution Strategies."""

    algorithm = "es"


#: rl_training's spelling.
OpenAIES = ES


@register
class ARS(Algorithm):
    """Augmented Random Search (``policy="linear"`` or ``"mlp"``, its own hyperparameter)."""

    algorithm = "ars"
    policy_is_hyperparameter = True


@register
class BC(Algorithm):
    """Behavior cloning from a dataset (``offline_data``)."""

    algorithm = "bc"


@register
class CQL(Algorithm):
    """Conservative Q-Learning, offline from a dataset (``offline_data``)."""

    algorithm = "cql"


@register
class DreamerV3(Algorithm):
    """DreamerV3: a world model and behaviour learned in imagination (RLlib's names)."""

    algorithm = "dreamerv3"
