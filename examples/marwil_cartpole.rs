//! MARWIL on a mixed-quality CartPole-v1 dataset: 25 expert episodes of a PPO policy and 25
//! with ε = 0.5 random actions (`data/cartpole_mixed.parquet`); compares with BC on the same
//! file.
//!
//! `cargo run --release --example marwil_cartpole`

use rl_training::core::algorithm::Algorithm;
use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::flex();
    let data = Path::new("data/cartpole_mixed.parquet");
    if !data.exists() {
        let ppo_run = RunConfig::from_yaml(include_str!("configs/ppo_cartpole.yaml"), &[], "ppo")?;
        let mut ppo = rl_training::build(&ppo_run, &dev)?;
        while ppo.num_timesteps() < ppo_run.total_timesteps {
            ppo.train()?;
        }
        std::fs::create_dir_all("data")?;
        let mut env = rl_training::envs::make("CartPole-v1", &Default::default())?;
        let parts = [(25, 0.0, 200), (25, 0.5, 300)];
        rl_training::offline::record_parts(ppo.as_mut(), env.as_mut(), data, &parts)?;
    }
    let text = include_str!("configs/marwil_cartpole.yaml");
    let run = RunConfig::from_yaml(text, &[], "marwil_cartpole.yaml")?;
    let mut marwil = rl_training::marwil::Marwil::new(&run, &rl_training::make_training_env, &dev)?;
    let bc_run = RunConfig::from_yaml(
        include_str!("configs/bc_cartpole.yaml"),
        &[format!("offline_data.input={}", data.display())],
        "bc_cartpole.yaml",
    )?;
    let mut bc = rl_training::bc::new(&bc_run, &rl_training::make_training_env, &dev)?;
    let mut env = rl_training::make_eval_env(&run)?;
    while marwil.num_timesteps() < run.total_timesteps {
        let m = marwil.train()?;
        bc.train()?;
        if marwil.num_timesteps() % run.eval_freq < 256 {
            let a = marwil
                .evaluate(env.as_mut(), 10, true, run.eval_seed())?
                .mean_return;
            let b = bc
                .evaluate(env.as_mut(), 10, true, run.eval_seed())?
                .mean_return;
            println!(
                "rows {:7}  value loss {:8.3}  MARWIL {a:6.1}  BC {b:6.1}",
                marwil.num_timesteps(),
                m["losses/value_loss"]
            );
        }
    }
    marwil.save(Path::new("runs/example_marwil_cartpole"))?;
    Ok(())
}
