//! DQN on CartPole-v1 (rl-zoo settings): build the agent from a config, train, evaluate, save.
//! Switch on Rainbow's parts with `examples/configs/dqn_rainbow_cartpole.yaml`.
//!
//! `cargo run --release --example dqn_cartpole`

use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;
use rl::dqn::Dqn;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/dqn_cartpole.yaml"),
        &[],
        "dqn_cartpole.yaml",
    )?;
    let mut agent = Dqn::new(&run, &rl::make_training_env, &Device::flex())?;
    while agent.num_timesteps() < run.total_timesteps {
        let metrics = agent.train()?;
        if let (Some(r), Some(eps)) = (
            metrics.get("charts/episodic_return"),
            metrics.get("charts/epsilon"),
        ) {
            println!(
                "step {:6}  episodic return {r:6.1}  epsilon {eps:.3}",
                agent.num_timesteps()
            );
        }
    }
    let mut env = rl::make_eval_env(&run)?;
    let eval = agent.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
    println!(
        "deterministic evaluation: {:.1} ± {:.1}",
        eval.mean_return, eval.std_return
    );
    agent.save(std::path::Path::new("runs/example_dqn_cartpole"))?;
    Ok(())
}
