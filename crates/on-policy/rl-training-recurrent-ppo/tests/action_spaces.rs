//! Recurrent PPO learns with every action space: Discrete (CartPoleNoVel, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on the contextual bandits of `rl_training_envs::testing`.

rl_training_envs::action_space_tests!(
    "algorithm: recurrent_ppo\nenv_id: Match\ntotal_timesteps: 12000\nn_envs: 4\nseed: 0\nalgo_kwargs: {n_steps: 64, batch_size: 64, n_epochs: 4, gamma: 0.0, lstm_hidden_size: 16, learning_rate: 3.0e-3}\n",
    |run, make| Box::new(
        rl_training_recurrent_ppo::RecurrentPpo::new(
            run,
            make,
            &rl_training_core::burn::tensor::Device::flex()
        )
        .unwrap()
    )
);
