//! IMPALA learns with every action space: Discrete (CartPole, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on the contextual bandits of `rl_training_envs::testing`
//! (lockstep, so the runs are reproducible).

rl_training_envs::action_space_tests!(
    "algorithm: impala\nenv_id: Match\ntotal_timesteps: 30000\nseed: 0\nalgo_kwargs: {num_env_runners: 2, num_envs_per_env_runner: 4, n_steps: 16, gamma: 0.0, ent_coef: 0.0, learning_rate: 3.0e-3, lockstep: true}\n",
    |run, make| Box::new(
        rl_training_impala::Impala::new(run, make, &rl_training_core::burn::tensor::Device::flex())
            .unwrap()
    )
);
