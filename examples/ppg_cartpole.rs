//! PPG on CartPole-v1 in a few lines: build the agent from a config, train, evaluate, save.
//!
//! `cargo run --release --example ppg_cartpole`

use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;
use rl::ppg::Ppg;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/ppg_cartpole.yaml"),
        &[],
        "ppg_cartpole.yaml",
    )?;
    let mut agent = Ppg::new(&run, &rl::make_training_env, &Device::flex())?;
    while agent.num_timesteps() < run.total_timesteps {
        let metrics = agent.train()?;
        if let Some(r) = metrics.get("charts/episodic_return") {
            println!("step {:6}  episodic return {r:6.1}", agent.num_timesteps());
        }
    }
    let mut env = rl::make_eval_env(&run)?;
    let eval = agent.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
    println!(
        "deterministic evaluation: {:.1} ± {:.1}",
        eval.mean_return, eval.std_return
    );
    agent.save(std::path::Path::new("runs/example_ppg_cartpole"))?;
    Ok(())
}
