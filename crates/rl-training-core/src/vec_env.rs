//! Vectorized environments with SB3-style same-step auto-reset.
//!
//! When env `i` ends an episode in `step`, its true last observation is kept in
//! [`VecEnv::final_obs`] (so truncation can be bootstrapped from it), the env is reset and
//! [`VecEnv::obs`] holds the first observation of the next episode.

use crate::env::{EPISODE_LENGTH, EPISODE_RETURN, Env, EnvError, Info, StepBatch, check_action};
use crate::spaces::Space;
use crate::wrappers::RunningMeanStd;
use serde::{Deserialize, Serialize};

/// One set of normalization statistics over every env of a vector (SB3's `VecNormalize`,
/// run config `normalize: {shared: true}`), where the per-env wrappers (Gymnasium's,
/// CleanRL's) keep one set each. Observations: the batch of observations after each step
/// (after auto-reset) updates the statistics, then every row and each true final observation
/// is normalized with them, `(x − mean) / √(var + 1e-8)`. Rewards: each env's discounted
/// return (`returns · γ + r`, zeroed when its episode ends) updates one running variance and
/// rewards are divided by its square root. Unlike SB3 nothing is clipped (as Gymnasium's
/// wrappers), so an evaluation env that loads the statistics sees the same numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedNormalizer {
    /// Observation statistics (when observations are normalized).
    pub obs: Option<RunningMeanStd>,
    /// Statistics of the discounted return (when rewards are normalized).
    pub ret: Option<RunningMeanStd>,
    /// Each env's discounted return so far.
    pub returns: Vec<f64>,
    /// Discount of the returns.
    pub gamma: f64,
    /// Statistics update only while training.
    #[serde(skip, default = "yes")]
    pub training: bool,
}

fn yes() -> bool {
    true
}

impl SharedNormalizer {
    /// Statistics for `n_envs` envs with `obs_dim`-wide observations.
    pub fn new(n_envs: usize, obs_dim: Option<usize>, reward: bool, gamma: f64) -> Self {
        Self {
            obs: obs_dim.map(RunningMeanStd::new),
            ret: reward.then(|| RunningMeanStd::new(1)),
            returns: vec![0.0; n_envs],
            gamma,
            training: true,
        }
    }

    fn normalize_rows(&self, rows: &mut [f32]) {
        if let Some(rms) = &self.obs {
            for row in rows.chunks_mut(rms.mean.len().max(1)) {
                rms.normalize(row);
            }
        }
    }

    /// The batch of raw observations updates the statistics (while training), then is
    /// normalized with them.
    fn observe(&mut self, obs: &mut [f32]) {
        if let Some(rms) = self.obs.as_mut()
            && self.training
        {
            rms.update_batch(obs);
        }
        self.normalize_rows(obs);
    }

    /// After a reset of every env: raw first observations in, normalized out.
    fn after_reset(&mut self, obs: &mut [f32]) {
        self.returns.iter_mut().for_each(|r| *r = 0.0);
        self.observe(obs);
    }

    /// After a step: observations, final observations of the envs whose episode ended
    /// (`terminated` or `truncated`) and rewards, all raw in and normalized out.
    fn after_step(
        &mut self,
        obs: &mut [f32],
        final_obs: &mut [f32],
        rewards: &mut [f64],
        terminated: &[bool],
        truncated: &[bool],
    ) {
        self.observe(obs);
        let done = |i: usize| terminated[i] || truncated[i];
        let d = obs.len() / terminated.len().max(1);
        for i in (0..terminated.len()).filter(|&i| done(i)) {
            self.normalize_rows(&mut final_obs[i * d..(i + 1) * d]);
        }
        if let Some(rms) = self.ret.as_mut() {
            // As SB3: the returns advance, and the statistics with them, only while training.
            if self.training {
                for (g, r) in self.returns.iter_mut().zip(rewards.iter()) {
                    *g = *g * self.gamma + r;
                }
                let n = self.returns.len() as f64;
                let mean = self.returns.iter().sum::<f64>() / n;
                let var = self.returns.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
                rms.update_from_moments(&[mean], &[var], n);
            }
            let scale = (rms.var[0] + 1e-8).sqrt();
            rewards.iter_mut().for_each(|r| *r /= scale);
        }
        for (i, g) in self.returns.iter_mut().enumerate() {
            if done(i) {
                *g = 0.0;
            }
        }
    }
}

/// A finished episode, as reported by `RecordEpisodeStatistics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodeStats {
    /// Index of the env that finished it.
    pub env: usize,
    /// Undiscounted return.
    pub ret: f64,
    /// Number of steps.
    pub len: usize,
}

/// `n` copies of an env stepped together, on the calling thread or on `threads` threads; the
/// results do not depend on the number of threads.
pub struct VecEnv {
    envs: Vec<Box<dyn Env>>,
    /// Shared by all envs (checked at construction); kept here so validating a batch of actions
    /// needs no call into the envs.
    act_space: Space,
    threads: usize,
    obs_dim: usize,
    act_dim: usize,
    obs: Vec<f32>,
    final_obs: Vec<f32>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    infos: Vec<Info>,
    episodes: Vec<EpisodeStats>,
    needs_reset: bool,
    /// `step` calls so far, for error messages.
    steps: u64,
    /// Shared normalization statistics, when enabled ([`VecEnv::share_normalization`]).
    shared: Option<SharedNormalizer>,
    /// Whether the envs may stage their steps ([`Env::stage`]): true until a step finds that
    /// none does (the env stack does not change between steps).
    stages: bool,
}

struct Slot<'a> {
    index: usize,
    env: &'a mut Box<dyn Env>,
    action: &'a [f32],
    obs: &'a mut [f32],
    final_obs: &'a mut [f32],
    reward: &'a mut f64,
    terminated: &'a mut bool,
    truncated: &'a mut bool,
    info: &'a mut Info,
}

fn check_obs(env: &dyn Env, obs: &[f32], when: &str) -> Result<(), EnvError> {
    // Branch-free scan first (the common case); locate the bad element only on failure.
    if obs.iter().fold(true, |ok, v| ok & v.is_finite()) {
        return Ok(());
    }
    if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
        return Err(EnvError::BadOutput {
            env: env.id().to_string(),
            reason: format!("observation element {i} is {} after {when}", obs[i]),
        });
    }
    Ok(())
}

/// The message of a caught panic's payload (`panic!` gives a `&str` or a `String`); shared by
/// every place that turns a panic into an error.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Runs `f` on env `index`, turning an error or a panic into [`EnvError::InVector`] (its `env`
/// id is filled in by [`VecEnv::named`], which can borrow the env again).
pub(crate) fn guarded<T>(
    index: usize,
    step: u64,
    f: impl FnOnce() -> Result<T, EnvError>,
) -> Result<T, EnvError> {
    // The env is reset before it is stepped again (`needs_reset`), so state a panic left
    // half-updated is never observed.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(EnvError::Panicked {
            message: panic_message(p.as_ref()),
        })
    });
    r.map_err(|e| EnvError::InVector {
        env: String::new(),
        index,
        step,
        source: Box::new(e),
    })
}

fn step_guarded(s: Slot<'_>, step: u64) -> Result<(), EnvError> {
    guarded(s.index, step, || step_slot(s))
}

fn step_slot(s: Slot<'_>) -> Result<(), EnvError> {
    let st = s.env.step(s.action, s.obs)?;
    check_obs(s.env.as_ref(), s.obs, "step")?;
    if !st.reward.is_finite() {
        return Err(EnvError::BadOutput {
            env: s.env.id().to_string(),
            reason: format!("reward is {} after step", st.reward),
        });
    }
    *s.reward = st.reward;
    *s.terminated = st.terminated;
    *s.truncated = st.truncated;
    *s.info = st.info;
    if st.terminated || st.truncated {
        s.final_obs.copy_from_slice(s.obs);
        let reset_info = s.env.reset(None, None, s.obs)?;
        check_obs(s.env.as_ref(), s.obs, "reset")?;
        // Keep the ending step's info; reset info keys would shadow it otherwise.
        for (k, v) in reset_info {
            s.info.entry(format!("reset/{k}")).or_insert(v);
        }
    }
    Ok(())
}

impl VecEnv {
    /// Steps `envs` on the calling thread.
    pub fn new(envs: Vec<Box<dyn Env>>) -> Result<Self, EnvError> {
        Self::with_threads(envs, 1)
    }

    /// Steps `envs` on up to `threads` threads (chunks of consecutive envs).
    pub fn with_threads(envs: Vec<Box<dyn Env>>, threads: usize) -> Result<Self, EnvError> {
        let first = envs
            .first()
            .ok_or_else(|| EnvError::Make("a vector env needs at least one env".into()))?;
        let (os, acs) = (
            first.observation_space().clone(),
            first.action_space().clone(),
        );
        for e in &envs[1..] {
            if e.observation_space() != &os || e.action_space() != &acs {
                return Err(EnvError::Make(format!(
                    "all envs of a vector env must share spaces; {} differs",
                    e.id()
                )));
            }
        }
        let n = envs.len();
        let (obs_dim, act_dim) = (os.raw_dim(), acs.raw_dim());
        Ok(Self {
            envs,
            act_space: acs,
            threads: threads.max(1),
            obs_dim,
            act_dim,
            obs: vec![0.0; n * obs_dim],
            final_obs: vec![0.0; n * obs_dim],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            infos: vec![Info::new(); n],
            episodes: Vec::new(),
            needs_reset: true,
            steps: 0,
            shared: None,
            stages: true,
        })
    }

    /// Normalizes observations (`obs`, Box spaces only) and/or rewards (discount `gamma`) with
    /// one set of statistics over all envs ([`SharedNormalizer`]); the envs themselves should
    /// not normalize as well.
    pub fn share_normalization(
        &mut self,
        obs: bool,
        reward: bool,
        gamma: f64,
    ) -> Result<(), EnvError> {
        if obs && !matches!(self.observation_space(), Space::Box { .. }) {
            return Err(EnvError::Make(format!(
                "normalize.obs needs a Box observation space, {} has {}",
                self.envs[0].id(),
                self.observation_space().describe()
            )));
        }
        self.shared = (obs || reward).then(|| {
            SharedNormalizer::new(self.envs.len(), obs.then_some(self.obs_dim), reward, gamma)
        });
        Ok(())
    }

    /// The shared normalization statistics, if any.
    pub fn shared_normalizer(&self) -> Option<&SharedNormalizer> {
        self.shared.as_ref()
    }

    /// Normalization statistics for an evaluation env of this run
    /// ([`Env::load_stats`]): the shared observation statistics (in the per-env wrapper's
    /// format) when there are any, then the first env's own.
    pub fn save_stats(&self) -> Vec<serde_json::Value> {
        let mut v = Vec::new();
        if let Some(rms) = self.shared.as_ref().and_then(|s| s.obs.as_ref()) {
            v.push(serde_json::json!({"NormalizeObservation": rms}));
        }
        v.extend(self.envs[0].save_stats());
        v
    }

    /// Number of envs.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }
    /// Observation space of each env.
    pub fn observation_space(&self) -> &Space {
        self.envs[0].observation_space()
    }
    /// Action space of each env.
    pub fn action_space(&self) -> &Space {
        self.envs[0].action_space()
    }
    /// Raw observation length.
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }
    /// Raw action length.
    pub fn act_dim(&self) -> usize {
        self.act_dim
    }
    /// The envs, e.g. to read wrapper statistics.
    pub fn envs(&self) -> &[Box<dyn Env>] {
        &self.envs
    }
    /// Mutable access to the envs.
    pub fn envs_mut(&mut self) -> &mut [Box<dyn Env>] {
        self.stages = true;
        &mut self.envs
    }

    /// Full state of every env, for checkpoints ([`Env::snapshot`]).
    /// With shared normalization its statistics follow as one more entry.
    pub fn snapshots(&self) -> Result<Vec<serde_json::Value>, EnvError> {
        let mut v = self
            .envs
            .iter()
            .map(|e| e.snapshot())
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(n) = &self.shared {
            v.push(serde_json::json!({ "SharedNormalizer": n }));
        }
        Ok(v)
    }

    /// Restores what [`snapshots`](Self::snapshots) returned; the count must match.
    pub fn restore_snapshots(&mut self, snaps: &[serde_json::Value]) -> Result<(), EnvError> {
        let (snaps, shared) = match (&self.shared, snaps.split_last()) {
            (Some(_), Some((last, rest))) => (rest, Some(last)),
            _ => (snaps, None),
        };
        if let (Some(cur), Some(saved)) = (self.shared.as_mut(), shared) {
            let restored: SharedNormalizer = saved
                .get("SharedNormalizer")
                .cloned()
                .and_then(|v| serde_json::from_value(v).ok())
                .filter(|n: &SharedNormalizer| {
                    n.returns.len() == cur.returns.len()
                        && n.obs.as_ref().map(|r| r.mean.len()) == cur.obs.as_ref().map(|r| r.mean.len())
                        && n.ret.is_some() == cur.ret.is_some()
                })
                .ok_or_else(|| EnvError::InvalidState {
                    env: self.envs[0].id().to_string(),
                    reason: "the checkpoint's last env entry is not this run's shared normalization statistics".into(),
                })?;
            *cur = SharedNormalizer {
                training: cur.training,
                ..restored
            };
        }
        if snaps.len() != self.envs.len() {
            return Err(EnvError::InvalidState {
                env: self.envs[0].id().to_string(),
                reason: format!(
                    "checkpoint holds {} envs, the run has {}",
                    snaps.len(),
                    self.envs.len()
                ),
            });
        }
        for (e, s) in self.envs.iter_mut().zip(snaps) {
            e.restore(s)?;
        }
        Ok(())
    }

    /// Resets every env; env `i` gets `seed + i` when a seed is given.
    pub fn reset(&mut self, seed: Option<u64>) -> Result<&[f32], EnvError> {
        let d = self.obs_dim;
        let step = self.steps;
        let mut failed = None;
        for (i, (env, obs)) in self.envs.iter_mut().zip(self.obs.chunks_mut(d)).enumerate() {
            let r = guarded(i, step, || {
                let info = env.reset(seed.map(|s| s.wrapping_add(i as u64)), None, obs)?;
                check_obs(env.as_ref(), obs, "reset")?;
                Ok(info)
            });
            match r {
                Ok(info) => self.infos[i] = info,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            return Err(self.named(e));
        }
        if let Some(n) = self.shared.as_mut() {
            n.after_reset(&mut self.obs);
        }
        self.needs_reset = false;
        Ok(&self.obs)
    }

    /// Steps every env with its action (`actions` is `[n_envs × act_dim]`, raw encoding).
    pub fn step(&mut self, actions: &[f32]) -> Result<(), EnvError> {
        if self.needs_reset {
            return Err(EnvError::NeedsReset {
                env: self.envs[0].id().to_string(),
                reason: "VecEnv::step called before reset".into(),
            });
        }
        let n = self.envs.len();
        if actions.len() != n * self.act_dim {
            return Err(EnvError::InvalidAction {
                env: self.envs[0].id().to_string(),
                action: actions.to_vec(),
                reason: format!(
                    "expected {} values ({n} envs × {}), got {}",
                    n * self.act_dim,
                    self.act_dim,
                    actions.len()
                ),
            });
        }
        let (d, a) = (self.obs_dim, self.act_dim);
        // Validate every action first: a bad action leaves all envs untouched.
        for (i, action) in actions.chunks(a.max(1)).enumerate() {
            let action = if a == 0 { &[][..] } else { action };
            if self.act_space.check(action).is_err() {
                check_action(self.envs[i].id(), &self.act_space, action)?;
            }
        }
        self.steps += 1;
        let step = self.steps;
        if self.stages
            && let Err(e) = self.stage_all(actions)
        {
            self.needs_reset = true;
            return Err(self.named(e));
        }
        let mut slots = self
            .envs
            .iter_mut()
            .enumerate()
            .zip(actions.chunks(a.max(1)))
            .zip(self.obs.chunks_mut(d).zip(self.final_obs.chunks_mut(d)))
            .zip(
                self.rewards
                    .iter_mut()
                    .zip(self.terminated.iter_mut().zip(self.truncated.iter_mut())),
            )
            .zip(self.infos.iter_mut())
            .map(
                |(
                    ((((index, env), action), (obs, final_obs)), (reward, (terminated, truncated))),
                    info,
                )| {
                    Slot {
                        index,
                        env,
                        action: if a == 0 { &[] } else { action },
                        obs,
                        final_obs,
                        reward,
                        terminated,
                        truncated,
                        info,
                    }
                },
            );
        let threads = self.threads.min(n);
        let result = if threads <= 1 {
            slots.try_for_each(|s| step_guarded(s, step))
        } else {
            let mut slots: Vec<Slot<'_>> = slots.collect();
            let per = n.div_ceil(threads);
            let mut groups = Vec::new();
            while !slots.is_empty() {
                let rest = slots.split_off(per.min(slots.len()));
                groups.push(std::mem::replace(&mut slots, rest));
            }
            std::thread::scope(|sc| {
                let handles: Vec<_> = groups
                    .into_iter()
                    .map(|g| {
                        sc.spawn(move || g.into_iter().try_for_each(|s| step_guarded(s, step)))
                    })
                    .collect();
                // Every thread is joined (the scope would anyway); the lowest env index's
                // error is reported, whatever the thread count. A panic is caught inside
                // `step_guarded`, so `join` itself does not fail.
                let mut first = Ok(());
                for h in handles {
                    let r = h.join().unwrap_or_else(|p| {
                        Err(EnvError::Panicked {
                            message: panic_message(p.as_ref()),
                        })
                    });
                    if first.is_ok() {
                        first = r;
                    }
                }
                first
            })
        };
        if let Err(e) = result {
            self.needs_reset = true;
            return Err(self.named(e));
        }
        if let Some(norm) = self.shared.as_mut() {
            norm.after_step(
                &mut self.obs,
                &mut self.final_obs,
                &mut self.rewards,
                &self.terminated,
                &self.truncated,
            );
        }
        for i in 0..n {
            if (self.terminated[i] || self.truncated[i])
                && let (Some(&r), Some(&l)) = (
                    self.infos[i].get(EPISODE_RETURN),
                    self.infos[i].get(EPISODE_LENGTH),
                )
            {
                self.episodes.push(EpisodeStats {
                    env: i,
                    ret: r,
                    len: l as usize,
                });
            }
        }
        Ok(())
    }

    /// Lets every env stage its action ([`Env::stage`]) and runs what they staged together,
    /// so that each env's `step` finds its result waiting.
    fn stage_all(&mut self, actions: &[f32]) -> Result<(), EnvError> {
        let a = self.act_dim;
        let mut batch = StepBatch::default();
        for (i, env) in self.envs.iter_mut().enumerate() {
            let action = if a == 0 {
                &[][..]
            } else {
                &actions[i * a..(i + 1) * a]
            };
            guarded(i, self.steps, || env.stage(action, &mut batch))?;
        }
        if batch.is_empty() {
            self.stages = false;
            return Ok(());
        }
        guarded(0, self.steps, || batch.run())
    }

    /// Fills in the env id of an [`EnvError::InVector`].
    fn named(&self, mut e: EnvError) -> EnvError {
        if let EnvError::InVector { env, index, .. } = &mut e
            && let Some(x) = self.envs.get(*index)
        {
            *env = x.id().to_string();
        }
        e
    }

    /// Current observations `[n_envs × obs_dim]` (after auto-reset for finished envs).
    pub fn obs(&self) -> &[f32] {
        &self.obs
    }
    /// True last observation of env `i`'s episode; valid when it ended in the last step.
    pub fn final_obs(&self, i: usize) -> &[f32] {
        &self.final_obs[i * self.obs_dim..(i + 1) * self.obs_dim]
    }
    /// Rewards of the last step.
    pub fn rewards(&self) -> &[f64] {
        &self.rewards
    }
    /// `terminated` flags of the last step.
    pub fn terminated(&self) -> &[bool] {
        &self.terminated
    }
    /// `truncated` flags of the last step.
    pub fn truncated(&self) -> &[bool] {
        &self.truncated
    }
    /// Infos of the last step.
    pub fn infos(&self) -> &[Info] {
        &self.infos
    }
    /// Episodes finished since the last call (needs `RecordEpisodeStatistics` in the envs).
    pub fn drain_episodes(&mut self) -> Vec<EpisodeStats> {
        std::mem::take(&mut self.episodes)
    }
    /// Switches normalizing wrappers of every env between training and frozen statistics.
    pub fn set_training(&mut self, training: bool) {
        self.envs.iter_mut().for_each(|e| e.set_training(training));
        if let Some(n) = self.shared.as_mut() {
            n.training = training;
        }
    }
}
