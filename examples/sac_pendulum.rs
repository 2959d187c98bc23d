//! SAC on Pendulum-v1 (SB3 defaults, learning rate 1e-3): build, train, evaluate, save.
//! `examples/configs/sac_discrete_cartpole.yaml` runs the discrete variant on CartPole-v1.
//!
//! `cargo run --release --example sac_pendulum`

use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;
use rl::sac::Sac;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/sac_pendulum.yaml"),
        &[],
        "sac_pendulum.yaml",
    )?;
    let mut agent = Sac::new(&run, &rl::make_training_env, &Device::flex())?;
    while agent.num_timesteps() < run.total_timesteps {
        let metrics = agent.train()?;
        if let Some(r) = metrics.get("charts/episodic_return") {
            let alpha = metrics.get("losses/alpha").copied().unwrap_or(f64::NAN);
            println!(
                "step {:6}  episodic return {r:8.1}  alpha {alpha:.3}",
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
    agent.save(std::path::Path::new("runs/example_sac_pendulum"))?;
    Ok(())
}
