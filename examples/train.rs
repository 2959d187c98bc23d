//! Any algorithm from a config: build the agent by the config's `algorithm`, train with an
//! evaluation every `eval_freq` env steps (stopping at `return_threshold` when set), evaluate,
//! save. The same loop `rl train` runs, in a few lines.
//!
//! `cargo run --release --example train -- examples/configs/dqn_cartpole.yaml [key=value …]`
//! (default config: `examples/configs/ppo_cartpole.yaml`; `key=value` as `rl train --set`).

use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "examples/configs/ppo_cartpole.yaml".into());
    let overrides: Vec<String> = args.collect();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let run = RunConfig::from_yaml(&text, &overrides, &path)?;
    let mut agent = rl_training::build(&run, &Device::flex())?;
    let mut env = rl_training::make_eval_env(&run)?;
    let mut next_eval = run.eval_freq;
    while agent.num_timesteps() < run.total_timesteps {
        let m = agent.train()?;
        let step = agent.num_timesteps();
        if run.eval_freq == 0 || step < next_eval {
            continue;
        }
        next_eval += run.eval_freq;
        let eval = agent.evaluate(env.as_mut(), run.n_eval_episodes, true, run.eval_seed())?;
        let train_return = m.get("charts/episodic_return").copied().unwrap_or(f64::NAN);
        println!(
            "step {step:8}  training return {train_return:7.1}  evaluation {:7.1}",
            eval.mean_return
        );
        if run.return_threshold.is_some_and(|t| eval.mean_return >= t) {
            break;
        }
    }
    let eval = agent.evaluate(env.as_mut(), run.n_eval_episodes, true, run.eval_seed())?;
    println!(
        "{} after {} steps: deterministic evaluation {:.1} ± {:.1}",
        agent.name(),
        agent.num_timesteps(),
        eval.mean_return,
        eval.std_return
    );
    let dir = std::path::PathBuf::from(format!("runs/example_{}", agent.name()));
    agent.save(&dir)?;
    println!("checkpoint: {}", dir.display());
    Ok(())
}
