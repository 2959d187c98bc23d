//! Validates a user's environment: spaces, the reset/step contract and seeding determinism.

use crate::env::Env;
use crate::rng::Rng;
use crate::spaces::Space;

/// Findings of [`check_env`]: problems that break the contract, and warnings.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    /// Contract violations.
    pub errors: Vec<String>,
    /// Things that work but are suspicious.
    pub warnings: Vec<String>,
}

impl CheckReport {
    /// Whether no error was found.
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }
}

fn check_space(name: &str, s: &Space, r: &mut CheckReport) {
    match s {
        Space::Box { low, high, shape } => {
            if low.len() != high.len() || shape.iter().product::<usize>() != low.len() {
                r.errors.push(format!(
                    "{name}: Box bounds have {} / {} elements but shape {shape:?}",
                    low.len(),
                    high.len()
                ));
            }
            for (i, (l, h)) in low.iter().zip(high).enumerate() {
                if l.is_nan() || h.is_nan() || l > h {
                    r.errors.push(format!(
                        "{name}: Box element {i} has low {l} > high {h} or NaN"
                    ));
                }
            }
        }
        Space::Discrete { n, .. } if *n == 0 => {
            r.errors.push(format!("{name}: Discrete(0) has no values"))
        }
        Space::MultiDiscrete { nvec } if nvec.contains(&0) => r
            .errors
            .push(format!("{name}: MultiDiscrete has a zero-size component")),
        Space::Tuple { spaces } => spaces
            .iter()
            .enumerate()
            .for_each(|(i, s)| check_space(&format!("{name}[{i}]"), s, r)),
        Space::Dict { spaces } => spaces
            .iter()
            .for_each(|(k, s)| check_space(&format!("{name}.{k}"), s, r)),
        _ => {}
    }
}

/// Runs `env` for up to `steps` random steps with several checks; never panics on a bad env.
pub fn check_env(env: &mut dyn Env, steps: usize) -> CheckReport {
    let mut r = CheckReport::default();
    let os = env.observation_space().clone();
    let acs = env.action_space().clone();
    check_space("observation_space", &os, &mut r);
    check_space("action_space", &acs, &mut r);
    if !r.ok() {
        return r;
    }
    let mut obs = vec![0.0; os.raw_dim()];
    let run = |env: &mut dyn Env,
               obs: &mut Vec<f32>,
               seed: u64,
               r: &mut CheckReport|
     -> Vec<(Vec<f32>, f64, bool, bool)> {
        let mut traj = Vec::new();
        let mut rng = Rng::seed_from(seed);
        match env.reset(Some(seed), None, obs) {
            Ok(_) => {}
            Err(e) => {
                r.errors.push(format!("reset(seed={seed}) failed: {e}"));
                return traj;
            }
        }
        if let Err(e) = os.check(obs) {
            r.errors
                .push(format!("reset observation not in observation_space: {e}"));
        }
        traj.push((obs.clone(), 0.0, false, false));
        for t in 0..steps {
            let mut a = Vec::new();
            acs.sample(&mut rng, &mut a);
            match env.step(&a, obs) {
                Ok(s) => {
                    if let Err(e) = os.check(obs) {
                        r.errors.push(format!(
                            "step {t}: observation not in observation_space: {e}"
                        ));
                    }
                    if !s.reward.is_finite() {
                        r.errors.push(format!("step {t}: reward is {}", s.reward));
                    }
                    traj.push((obs.clone(), s.reward, s.terminated, s.truncated));
                    if s.terminated || s.truncated {
                        if let Err(e) = env.reset(None, None, obs) {
                            r.errors
                                .push(format!("reset after episode end failed: {e}"));
                            return traj;
                        }
                        if let Err(e) = os.check(obs) {
                            r.errors
                                .push(format!("reset observation not in observation_space: {e}"));
                        }
                    }
                }
                Err(e) => {
                    r.errors
                        .push(format!("step {t} with a valid action {a:?} failed: {e}"));
                    return traj;
                }
            }
            if r.errors.len() > 10 {
                break;
            }
        }
        traj
    };
    let a = run(env, &mut obs, 12345, &mut r);
    let b = run(env, &mut obs, 12345, &mut r);
    if r.ok() && a != b {
        let t = a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        r.errors.push(format!("not deterministic: two runs with reset(seed=12345) and the same actions differ at step {t}"));
    }
    let c = run(env, &mut obs, 54321, &mut r);
    if r.ok() && a.first() == c.first() && a == c {
        r.warnings
            .push("different reset seeds gave identical trajectories: is the seed used?".into());
    }
    // An invalid action should be an error, not a panic or silent acceptance.
    if env.reset(Some(1), None, &mut obs).is_ok() {
        let bad: Vec<f32> = vec![f32::NAN; acs.raw_dim()];
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.step(&bad, &mut obs))) {
            Ok(Ok(_)) => r.warnings.push("step accepted an action outside the action space (NaN); consider validating actions".into()),
            Ok(Err(_)) => {}
            Err(_) => r.errors.push("step panicked on an action outside the action space; return an EnvError instead".into()),
        }
    }
    r
}
