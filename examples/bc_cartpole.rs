//! Behaviour cloning on CartPole-v1: train a PPO expert, record 50 of its episodes to
//! `data/cartpole_expert.parquet`, clone it from the file, evaluate, save.
//!
//! `cargo run --release --example bc_cartpole`

use rl_training::core::algorithm::Algorithm;
use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::flex();
    let data = Path::new("data/cartpole_expert.parquet");
    if !data.exists() {
        let ppo_run = RunConfig::from_yaml(include_str!("configs/ppo_cartpole.yaml"), &[], "ppo")?;
        let mut ppo = rl_training::build(&ppo_run, &dev)?;
        while ppo.num_timesteps() < ppo_run.total_timesteps {
            ppo.train()?;
        }
        std::fs::create_dir_all("data")?;
        let mut env = rl_training::envs::make("CartPole-v1", &Default::default())?;
        let d = rl_training::offline::record_parts(
            ppo.as_mut(),
            env.as_mut(),
            data,
            &[(50, 0.0, 100)],
        )?;
        println!(
            "recorded {} rows of {} expert episodes",
            d.len(),
            d.num_episodes()
        );
    }
    let run = RunConfig::from_yaml(
        include_str!("configs/bc_cartpole.yaml"),
        &[],
        "bc_cartpole.yaml",
    )?;
    let mut bc = rl_training::bc::new(&run, &rl_training::make_training_env, &dev)?;
    let mut env = rl_training::make_eval_env(&run)?;
    while bc.num_timesteps() < run.total_timesteps {
        let m = bc.train()?;
        if bc.num_timesteps() % run.eval_freq < 256 {
            let r = bc.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
            println!(
                "rows {:7}  log-likelihood {:7.3}  eval {:6.1}",
                bc.num_timesteps(),
                m["losses/log_likelihood"],
                r.mean_return
            );
        }
    }
    bc.save(Path::new("runs/example_bc_cartpole"))?;
    Ok(())
}
