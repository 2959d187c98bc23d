//! A2C learns with every action space it supports: Discrete (CartPole, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on the contextual bandits of `rl_training_envs::testing`.

rl_training_envs::action_space_tests!(
    "algorithm: a2c\nenv_id: Match\ntotal_timesteps: 20000\nn_envs: 8\nseed: 0\nalgo_kwargs: {n_steps: 5, learning_rate: 3.0e-3, gamma: 0.0, ent_coef: 0.0}\n",
    |run, make| Box::new(
        rl_training_a2c::A2c::new(run, make, &rl_training_core::burn::tensor::Device::flex())
            .unwrap()
    )
);
