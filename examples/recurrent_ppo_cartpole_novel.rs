//! Recurrent PPO on CartPoleNoVel-v1 (no velocities in the observation: the LSTM has to
//! remember): build the agent from a config, train, evaluate, save.
//!
//! `cargo run --release --example recurrent_ppo_cartpole_novel`

use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;
use rl::recurrent_ppo::RecurrentPpo;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/recurrent_ppo_cartpole_novel.yaml"),
        &[],
        "recurrent_ppo_cartpole_novel.yaml",
    )?;
    let mut agent = RecurrentPpo::new(&run, &rl::make_training_env, &Device::flex())?;
    while agent.num_timesteps() < run.total_timesteps {
        let metrics = agent.train()?;
        if let Some(r) = metrics.get("charts/episodic_return") {
            println!("step {:6}  episodic return {r:6.1}", agent.num_timesteps());
        }
    }
    // `evaluate` resets the LSTM state at every episode start (`reset_predict_state`).
    let mut env = rl::make_eval_env(&run)?;
    let eval = agent.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
    println!(
        "deterministic evaluation: {:.1} ± {:.1}",
        eval.mean_return, eval.std_return
    );
    agent.save(std::path::Path::new(
        "runs/example_recurrent_ppo_cartpole_novel",
    ))?;
    Ok(())
}
