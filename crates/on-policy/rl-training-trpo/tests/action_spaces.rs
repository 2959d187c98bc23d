//! TRPO learns with every action space it supports: Discrete (CartPole, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on the contextual bandits of `rl_training_envs::testing`.

rl_training_envs::action_space_tests!(
    "algorithm: trpo\nenv_id: Match\ntotal_timesteps: 12000\nn_envs: 4\nseed: 0\nalgo_kwargs: {n_steps: 128, batch_size: 128, gamma: 0.0, target_kl: 0.05}\n",
    |run, make| Box::new(
        rl_training_trpo::Trpo::new(run, make, &rl_training_core::burn::tensor::Device::flex())
            .unwrap()
    )
);
