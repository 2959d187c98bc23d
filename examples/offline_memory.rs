//! The offline memory benchmark that `cargo xtask offline-memory` runs: BC trains from a
//! Parquet file much larger than its memory budget, streaming row groups through the shuffle
//! window.
//!
//! `cargo run --release --example offline_memory -- generate FILE GB` writes a synthetic
//! CartPole-v1 dataset of about GB gigabytes (random observations, actions from a fixed rule,
//! episodes of 500 steps), one row group at a time. `… -- train FILE` trains BC for one pass
//! over it (batches of 8,192 rows, a 100,000-row window) and prints, as JSON, the rows trained,
//! the seconds taken, the final evaluation and the peak resident memory (`VmHWM`).

use rl_training::core::algorithm::Algorithm;
use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use rl_training::offline::{DatasetSpec, ParquetWriter, Step, Transitions};
use std::path::Path;

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn generate(path: &Path, gb: f64) -> Result<(), Box<dyn std::error::Error>> {
    let env = rl_training::envs::make("CartPole-v1", &Default::default())?;
    let spec = DatasetSpec::from_spaces(env.observation_space(), env.action_space());
    let rows_per_group = 65_536;
    let mut w = ParquetWriter::create(path, &spec, false, rows_per_group)?;
    let mut rng = rl_training::core::Rng::seed_from(0);
    let mut eps = 0i64;
    let mut t = 0i64;
    let target = (gb * 1e9) as u64;
    let mut written = 0u64;
    while written < target {
        let mut d = Transitions::new(4, 1);
        for _ in 0..rows_per_group {
            let obs: Vec<f32> = (0..4).map(|_| rng.normal() as f32 * 0.1).collect();
            let next: Vec<f32> = (0..4).map(|_| rng.normal() as f32 * 0.1).collect();
            // The expert's rule: push toward the pole's lean.
            let a = [(obs[2] + obs[3] > 0.0) as u8 as f32];
            let end = t == 499;
            d.push(Step {
                eps_id: eps,
                t,
                obs: &obs,
                action: &a,
                reward: 1.0,
                terminated: false,
                truncated: end,
                new_obs: &next,
                action_logp: None,
            });
            t += 1;
            if end {
                eps += 1;
                t = 0;
            }
        }
        w.write(&d)?;
        written = std::fs::metadata(path.with_extension("parquet.tmp"))?.len();
    }
    let rows = w.rows();
    w.finish()?;
    let size = std::fs::metadata(path)?.len();
    println!(
        "{}",
        serde_json::json!({"file": path.display().to_string(), "bytes": size, "rows": rows, "peak_rss_mb": peak_rss_mb()})
    );
    Ok(())
}

fn train(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let rows = rl_training::offline::ParquetDataset::open(path)?.num_rows() as u64;
    let y = format!(
        "algorithm: bc\nenv_id: CartPole-v1\ntotal_timesteps: {rows}\noffline_data: {{input: {}, shuffle_buffer_size: 100000}}\nalgo_kwargs: {{batch_size: 8192, learning_rate: 1.0e-3, policy_kwargs: {{net_arch: [64, 64]}}}}\n",
        path.display()
    );
    let run = RunConfig::from_yaml(&y, &[], "offline_memory")?;
    let mut bc = rl_training::bc::new(&run, &rl_training::make_training_env, &Device::flex())?;
    let t = std::time::Instant::now();
    let mut epochs = 0.0;
    while bc.num_timesteps() < run.total_timesteps {
        epochs = bc.train()?["offline/epochs"];
    }
    let secs = t.elapsed().as_secs_f64();
    let mut env = rl_training::make_eval_env(&run)?;
    let ret = bc.evaluate(env.as_mut(), 10, true, 1)?.mean_return;
    println!(
        "{}",
        serde_json::json!({"rows_trained": bc.num_timesteps(), "dataset_rows": rows, "passes_started": epochs, "seconds": secs, "eval_return": ret, "peak_rss_mb": peak_rss_mb()})
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["generate", file, gb] => generate(Path::new(file), gb.parse()?),
        ["train", file] => train(Path::new(file)),
        _ => Err("usage: offline_memory generate FILE GB | offline_memory train FILE".into()),
    }
}
