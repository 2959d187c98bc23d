//! The committed datasets (`testdata/datasets/`) are what their README says: Pendulum-v1
//! transitions of the project's SAC, every row consistent with Pendulum's dynamics and reward,
//! with the row and episode counts the learning tests rely on.

use rl_training_offline::{Dataset, Transitions};
use std::path::PathBuf;

fn read(name: &str) -> Transitions {
    let path: PathBuf =
        rl_training_offline_testing::datasets_dir(env!("CARGO_MANIFEST_DIR")).join(name);
    let d = Dataset::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    d.read_all()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Gymnasium's Pendulum-v1 step from observation `o` = (cos θ, sin θ, θ̇) with torque `u`:
/// the reward and the next observation.
fn pendulum_step(o: &[f32], u: f32) -> (f64, [f64; 3]) {
    let (g, m, l, dt) = (10.0f64, 1.0f64, 1.0f64, 0.05f64);
    let th = (o[1] as f64).atan2(o[0] as f64);
    let thdot = o[2] as f64;
    let u = (u as f64).clamp(-2.0, 2.0);
    let norm =
        ((th + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI)) - std::f64::consts::PI;
    let reward = -(norm * norm + 0.1 * thdot * thdot + 0.001 * u * u);
    let newthdot =
        (thdot + (3.0 * g / (2.0 * l) * th.sin() + 3.0 / (m * l * l) * u) * dt).clamp(-8.0, 8.0);
    let newth = th + newthdot * dt;
    (reward, [newth.cos(), newth.sin(), newthdot])
}

/// Every row is a Pendulum-v1 step and episodes are 200-step time limits.
fn check_pendulum(d: &Transitions, rows: usize, episodes: usize) {
    assert_eq!((d.obs_dim, d.act_dim), (3, 1));
    assert_eq!(d.len(), rows);
    assert_eq!(d.num_episodes(), episodes);
    for i in 0..d.len() {
        let o = &d.obs[3 * i..3 * i + 3];
        let (r, next) = pendulum_step(o, d.actions[i]);
        assert!(
            (r - d.rewards[i] as f64).abs() < 1e-3,
            "row {i}: reward {} vs {r}",
            d.rewards[i]
        );
        for k in 0..3 {
            let got = d.new_obs[3 * i + k] as f64;
            assert!(
                (got - next[k]).abs() < 1e-3,
                "row {i}: new_obs[{k}] {got} vs {}",
                next[k]
            );
        }
        assert!(!d.terminated[i], "row {i}: Pendulum never terminates");
        assert_eq!(
            d.truncated[i],
            d.t[i] == 199,
            "row {i}: truncation only at t = 199"
        );
    }
}

fn episode_returns(d: &Transitions) -> Vec<f64> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in d.episode_ends() {
        out.push(d.rewards[start..end].iter().map(|&r| r as f64).sum());
        start = end;
    }
    out
}

#[test]
fn pendulum_sac_50k_is_the_first_50k_steps_of_a_sac_run() {
    let d = read("pendulum_sac_50k.parquet");
    check_pendulum(&d, 50_000, 250);
    // A learning run: its first episodes are poor and its last ones good.
    let r = episode_returns(&d);
    let first: f64 = r[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = r[r.len() - 10..].iter().sum::<f64>() / 10.0;
    assert!(
        first < -900.0 && last > -300.0,
        "first 10 {first}, last 10 {last}"
    );
}

#[test]
fn pendulum_sac_expert_20_is_twenty_expert_episodes() {
    let d = read("pendulum_sac_expert_20.npz");
    check_pendulum(&d, 4_000, 20);
    let r = episode_returns(&d);
    let mean = r.iter().sum::<f64>() / r.len() as f64;
    assert!(mean > -300.0, "expert mean return {mean}");
}
