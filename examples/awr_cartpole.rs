//! AWR on CartPole-v1 with the seed table's settings: build, train, evaluate, save.
//! `examples/configs/awr_pendulum.yaml` runs it on continuous actions.
//!
//! `cargo run --release --example awr_cartpole`

use rl::awr::Awr;
use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/awr_cartpole.yaml"),
        &[],
        "awr_cartpole.yaml",
    )?;
    let mut agent = Awr::new(&run, &rl::make_training_env, &Device::flex())?;
    while agent.num_timesteps() < run.total_timesteps {
        let m = agent.train()?;
        println!(
            "step {:6}  episodic return {:6.1}  mean weight {:.2}",
            agent.num_timesteps(),
            m.get("charts/episodic_return").copied().unwrap_or(f64::NAN),
            m["losses/mean_weight"],
        );
    }
    let mut env = rl::make_eval_env(&run)?;
    let eval = agent.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
    println!(
        "deterministic evaluation: {:.1} ± {:.1}",
        eval.mean_return, eval.std_return
    );
    agent.save(std::path::Path::new("runs/example_awr_cartpole"))?;
    Ok(())
}
