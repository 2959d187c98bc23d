//! Shared by the facade tests: a tiny config per algorithm and a small offline dataset.

use std::path::PathBuf;

/// A small run of `name` (`total_timesteps` steps, 2 envs, seed 1).
pub fn tiny(name: &str, total_timesteps: u64) -> String {
    let (env, kwargs) = match name {
        "ppo" => ("CartPole-v1", "{n_steps: 16, batch_size: 16, n_epochs: 1}"),
        "a2c" => ("Pendulum-v1", "{n_steps: 4, use_sde: true}"),
        "trpo" => (
            "CartPole-v1",
            "{n_steps: 16, batch_size: 16, n_critic_updates: 1}",
        ),
        "ppg" => (
            "CartPole-v1",
            "{n_steps: 8, batch_size: 8, n_policy_iters: 1, n_aux_epochs: 1}",
        ),
        "recurrent_ppo" => (
            "CartPoleNoVel-v1",
            "{n_steps: 16, batch_size: 16, n_epochs: 1, lstm_hidden_size: 8}",
        ),
        "impala" => (
            "CartPole-v1",
            "{num_env_runners: 2, num_envs_per_env_runner: 2, n_steps: 4}",
        ),
        "appo" => (
            "CartPole-v1",
            "{num_env_runners: 2, num_envs_per_env_runner: 2, n_steps: 4, batch_size: 8}",
        ),
        "dqn" => (
            "CartPole-v1",
            "{learning_starts: 8, train_freq: 4, batch_size: 4}",
        ),
        "sac" => (
            "Pendulum-v1",
            "{learning_starts: 8, train_freq: 4, batch_size: 4}",
        ),
        "awr" => (
            "CartPole-v1",
            "{n_steps: 16, batch_size: 8, value_steps: 1, policy_steps: 1}",
        ),
        "es" => (
            "CartPole-v1",
            "{pop_size: 4, num_workers: 2, noise_table_size: 10000}",
        ),
        "ars" => (
            "Pendulum-v1",
            "{n_directions: 2, n_top_directions: 1, num_workers: 2, noise_table_size: 10000}",
        ),
        "bc" | "marwil" => ("CartPole-v1", "{batch_size: 8}"),
        "cql" => (
            "CartPole-v1",
            "{batch_size: 8, policy_kwargs: {net_arch: [8]}}",
        ),
        "gail" => (
            "CartPole-v1",
            "{n_steps: 16, batch_size: 16, n_epochs: 1, disc_batch_size: 8, expert_data_path: EXPERT}",
        ),
        "dreamerv3" => (
            "CartPole-v1",
            "{model_size: nano, batch_size_B: 2, batch_length_T: 8, horizon_H: 3, training_ratio: 16}",
        ),
        other => panic!("add a tiny config for {other}"),
    };
    let kwargs = kwargs.replace("EXPERT", &dataset().display().to_string());
    let data = match name {
        "bc" | "marwil" | "cql" => format!("offline_data: {{input: {}}}\n", dataset().display()),
        _ => String::new(),
    };
    format!(
        "algorithm: {name}\nenv_id: {env}\ntotal_timesteps: {total_timesteps}\nn_envs: 2\nseed: 1\n{data}algo_kwargs: {kwargs}\n"
    )
}

/// A small CartPole dataset for the offline algorithms (random actions), written once per
/// process (tests that run in parallel share it).
pub fn dataset() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(write_dataset).clone()
}

fn write_dataset() -> PathBuf {
    use rl_training::core::Env;
    let p = std::env::temp_dir().join(format!("rl-facade-{}-data.parquet", std::process::id()));
    {
        let mut env = rl_training::envs::make("CartPole-v1", &Default::default()).unwrap();
        let spec = rl_training::offline::DatasetSpec::from_spaces(
            env.observation_space(),
            env.action_space(),
        );
        let mut d = rl_training::offline::Transitions::new(4, 1);
        let mut rng = rl_training::core::Rng::seed_from(0);
        let (mut obs, mut next) = (vec![0.0; 4], vec![0.0; 4]);
        for e in 0..5 {
            env.reset(Some(e), None, &mut obs).unwrap();
            for t in 0.. {
                let a = [rng.below(2) as f32];
                next.copy_from_slice(&obs);
                let s = env.step(&a, &mut next).unwrap();
                d.push(rl_training::offline::Step {
                    eps_id: e as i64,
                    t,
                    obs: &obs,
                    action: &a,
                    reward: s.reward as f32,
                    terminated: s.terminated,
                    truncated: s.truncated,
                    new_obs: &next,
                    action_logp: None,
                });
                std::mem::swap(&mut obs, &mut next);
                if s.terminated || s.truncated {
                    break;
                }
            }
        }
        rl_training::offline::write_dataset(&p, &d, &spec).unwrap();
    }
    p
}
