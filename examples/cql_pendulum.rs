//! CQL on Pendulum-v1 from the first 50k transitions of a SAC run: train SAC for 50k steps,
//! write its replay (random to good) to `data/pendulum_sac_50k.parquet`, then learn from the
//! file alone with CQL; `examples/configs/cql_cartpole.yaml` is the discrete form.
//!
//! `cargo run --release --example cql_pendulum`

use rl_training::core::algorithm::Algorithm;
use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::flex();
    let data = Path::new("data/pendulum_sac_50k.parquet");
    if !data.exists() {
        let sac_run = RunConfig::from_yaml(
            include_str!("configs/sac_pendulum.yaml"),
            &["total_timesteps=50000".into()],
            "sac_pendulum.yaml",
        )?;
        let mut sac = rl_training::sac::Sac::new(&sac_run, &rl_training::make_training_env, &dev)?;
        while sac.num_timesteps() < sac_run.total_timesteps {
            sac.train()?;
        }
        // SAC stores squashed actions in [−1, 1]; the dataset holds the env's [−2, 2].
        let rows = rl_training::offline::from_replay(&sac.replay().chronological(), 1, |a| {
            vec![2.0 * a[0]]
        });
        let env = rl_training::envs::make("Pendulum-v1", &Default::default())?;
        let spec = rl_training::offline::DatasetSpec::from_spaces(
            env.observation_space(),
            env.action_space(),
        );
        std::fs::create_dir_all("data")?;
        rl_training::offline::write_dataset(data, &rows, &spec)?;
    }
    let run = RunConfig::from_yaml(
        include_str!("configs/cql_pendulum.yaml"),
        &[],
        "cql_pendulum.yaml",
    )?;
    let mut cql = rl_training::cql::Cql::new(&run, &rl_training::make_training_env, &dev)?;
    let mut env = rl_training::make_eval_env(&run)?;
    while cql.num_timesteps() < run.total_timesteps {
        let m = cql.train()?;
        if cql.learner().grad_steps() % 500 == 0 {
            let r = cql
                .evaluate(env.as_mut(), 10, true, run.eval_seed())?
                .mean_return;
            println!(
                "step {:5}  Q {:7.1}  CQL penalty {:6.2}  alpha' {:.3}  eval {r:7.1}",
                cql.learner().grad_steps(),
                m["losses/q_values"],
                m["losses/cql_loss"],
                m["losses/alpha_prime"]
            );
        }
    }
    cql.save(Path::new("runs/example_cql_pendulum"))?;
    Ok(())
}
