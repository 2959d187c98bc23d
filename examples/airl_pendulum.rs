//! AIRL on Pendulum-v1 from 20 expert episodes: train SAC for 20k steps, record 20 of its
//! deterministic episodes to `data/pendulum_expert_20.npz` (the seed's `expert_data_path`
//! format), then learn from those demonstrations alone — the env's reward is never used — with
//! AIRL's discriminator and PPO. `examples/configs/gail_cartpole.yaml` is GAIL on CartPole.
//!
//! `cargo run --release --example airl_pendulum`

use rl_training::core::algorithm::Algorithm;
use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::flex();
    let demos = Path::new("data/pendulum_expert_20.npz");
    if !demos.exists() {
        let sac_run = RunConfig::from_yaml(
            include_str!("configs/sac_pendulum.yaml"),
            &["total_timesteps=20000".into()],
            "sac_pendulum.yaml",
        )?;
        let mut sac = rl_training::sac::Sac::new(&sac_run, &rl_training::make_training_env, &dev)?;
        while sac.num_timesteps() < sac_run.total_timesteps {
            sac.train()?;
        }
        std::fs::create_dir_all("data")?;
        let mut env = rl_training::envs::make("Pendulum-v1", &Default::default())?;
        // 20 episodes, no ε-random actions, env seeds from 100.
        let rows =
            rl_training::offline::record_parts(&mut sac, env.as_mut(), demos, &[(20, 0.0, 100)])?;
        let ret = rows.rewards.iter().map(|&r| r as f64).sum::<f64>() / 20.0;
        println!("expert: 20 episodes, mean return {ret:.1}");
    }
    // The config's expert_data_path is data/pendulum_expert_20.npz.
    let run = RunConfig::from_yaml(
        include_str!("configs/airl_pendulum.yaml"),
        &[],
        "airl_pendulum.yaml",
    )?;
    let mut airl = rl_training::gail::Gail::new(&run, &rl_training::make_training_env, &dev)?;
    let mut env = rl_training::make_eval_env(&run)?;
    let mut next_eval = run.eval_freq;
    while airl.num_timesteps() < run.total_timesteps {
        let m = airl.train()?;
        if airl.num_timesteps() >= next_eval {
            next_eval += run.eval_freq;
            let r = airl
                .evaluate(env.as_mut(), 10, true, run.eval_seed())?
                .mean_return;
            println!(
                "steps {:7}  disc loss {:.3}  expert acc {:.2}  policy acc {:.2}  learned r {:6.2}  env r {:6.2}  eval {r:7.1}",
                airl.num_timesteps(),
                m["losses/disc_loss"],
                m["disc/expert_accuracy"],
                m["disc/policy_accuracy"],
                m["disc/learned_reward"],
                m["disc/env_reward"],
            );
        }
    }
    airl.save(Path::new("runs/example_airl_pendulum"))?;
    Ok(())
}
