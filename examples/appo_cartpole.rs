//! APPO on CartPole-v1: env runners feed a learner through a bounded queue (or take turns with it
//! in lockstep, as the config here does); build, train, evaluate, save.
//!
//! `cargo run --release --example appo_cartpole`

use rl::appo::Appo;
use rl::core::algorithm::Algorithm;
use rl::core::burn::tensor::Device;
use rl::core::config::RunConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = RunConfig::from_yaml(
        include_str!("configs/appo_cartpole.yaml"),
        &[],
        "appo_cartpole.yaml",
    )?;
    let mut agent = Appo::new(&run, &rl::make_training_env, &Device::flex())?;
    let mut env = rl::make_eval_env(&run)?;
    let mut next_eval = 0;
    while agent.num_timesteps() < run.total_timesteps {
        let m = agent.train()?;
        if agent.num_timesteps() >= next_eval {
            next_eval += 50_000;
            let eval = agent.evaluate(env.as_mut(), 10, true, run.eval_seed())?;
            println!(
                "step {:7}  policy lag {:.1}  evaluation {:6.1}",
                agent.num_timesteps(),
                m["perf/policy_lag"],
                eval.mean_return
            );
            if eval.mean_return >= 475.0 {
                break;
            }
        }
    }
    agent.save(std::path::Path::new("runs/example_appo_cartpole"))?;
    Ok(())
}
