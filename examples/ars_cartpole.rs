//! ARS on CartPole-v1 in a few lines: build the agent from a config, train (the population is
//! evaluated on the worker threads), evaluate, save.
//!
//! `cargo run --release --example ars_cartpole`

use rl::ars::Ars;
use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/ars_cartpole.yaml"),
        &[],
        "ars_cartpole.yaml",
    )?;
    let mut agent = Ars::new(&run, &rl::make_training_env, &Device::flex())?;
    let mut env = rl::make_eval_env(&run)?;
    while agent.num_timesteps() < run.total_timesteps {
        let m = agent.train()?;
        let eval = agent.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
        println!(
            "step {:7}  population return {:6.1}  evaluation {:6.1}",
            agent.num_timesteps(),
            m["charts/episodic_return"],
            eval.mean_return
        );
        if eval.mean_return >= 500.0 {
            break;
        }
    }
    agent.save(std::path::Path::new("runs/example_ars_cartpole"))?;
    Ok(())
}
