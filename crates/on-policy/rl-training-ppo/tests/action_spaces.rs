//! PPO learns with every action space it supports: Discrete (CartPole, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on the contextual bandits of `rl_training_envs::testing`.

rl_training_envs::action_space_tests!(
    "algorithm: ppo\nenv_id: Match\ntotal_timesteps: 6144\nn_envs: 4\nseed: 0\nalgo_kwargs: {n_steps: 64, batch_size: 64, n_epochs: 4, learning_rate: 3.0e-3, gamma: 0.0, ent_coef: 0.0}\n",
    |run, make| Box::new(
        rl_training_ppo::Ppo::new(run, make, &rl_training_core::burn::tensor::Device::flex())
            .unwrap()
    )
);
