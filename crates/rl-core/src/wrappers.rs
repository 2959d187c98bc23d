//! Gymnasium's standard wrappers.

use crate::env::{
    EPISODE_LENGTH, EPISODE_RETURN, Env, EnvError, Info, Kwargs, Step, check_action, snap_field,
};
use crate::spaces::Space;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Forwards the listed [`Env`] methods to `self.inner`.
macro_rules! delegate {
    (@one id) => { fn id(&self) -> &str { self.inner.id() } };
    (@one observation_space) => { fn observation_space(&self) -> &Space { self.inner.observation_space() } };
    (@one action_space) => { fn action_space(&self) -> &Space { self.inner.action_space() } };
    (@one state) => { fn state(&self) -> Option<Vec<f64>> { self.inner.state() } };
    (@one set_state) => { fn set_state(&mut self, s: &[f64]) -> Result<(), EnvError> { self.inner.set_state(s) } };
    (@one render) => { fn render(&self) -> Option<String> { self.inner.render() } };
    (@one stats) => {
        fn save_stats(&self) -> Vec<serde_json::Value> { self.inner.save_stats() }
        fn load_stats(&mut self, s: &[serde_json::Value]) -> Result<(), EnvError> { self.inner.load_stats(s) }
        fn set_training(&mut self, t: bool) { self.inner.set_training(t) }
    };
    (@one snap) => {
        fn snapshot(&self) -> Result<serde_json::Value, EnvError> { self.inner.snapshot() }
        fn restore(&mut self, s: &serde_json::Value) -> Result<(), EnvError> { self.inner.restore(s) }
    };
    // `set_training`, `snapshot`, `restore` of a normalizer with `training` and its statistics.
    (@one normalizer) => {
        fn set_training(&mut self, training: bool) {
            self.training = training;
            self.inner.set_training(training);
        }
        fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
            Ok(json!({"stats": self.save_stats(), "training": self.training, "inner": self.inner.snapshot()?}))
        }
        fn restore(&mut self, s: &serde_json::Value) -> Result<(), EnvError> {
            let stats: Vec<serde_json::Value> = snap_field(self.inner.id(), s, "stats")?;
            self.load_stats(&stats)?;
            self.training = snap_field(self.inner.id(), s, "training")?;
            self.inner.restore(&s["inner"])
        }
    };
    // Everything but reset/step: for wrappers that change neither spaces nor statistics.
    (@one basics) => { delegate!(id, observation_space, action_space, state, set_state, render, stats); };
    ($($m:ident),*) => { $(delegate!(@one $m);)* };
}

/// Truncates episodes after `max_episode_steps` steps.
pub struct TimeLimit<E: Env> {
    inner: E,
    max_episode_steps: usize,
    elapsed: usize,
}

impl<E: Env> TimeLimit<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, max_episode_steps: usize) -> Self {
        Self {
            inner,
            max_episode_steps,
            elapsed: 0,
        }
    }
}

impl<E: Env> Env for TimeLimit<E> {
    delegate!(basics);
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Ok(json!({"elapsed": self.elapsed, "inner": self.inner.snapshot()?}))
    }
    fn restore(&mut self, s: &serde_json::Value) -> Result<(), EnvError> {
        self.elapsed = snap_field(self.inner.id(), s, "elapsed")?;
        self.inner.restore(&s["inner"])
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.elapsed = 0;
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = self.inner.step(action, obs)?;
        self.elapsed += 1;
        if self.elapsed >= self.max_episode_steps {
            s.truncated = true;
        }
        Ok(s)
    }
}

/// Adds `episode_return` / `episode_length` to the info of an episode's last step
/// (Gymnasium's RecordEpisodeStatistics, SB3's Monitor). Place it inside reward-changing
/// wrappers so the recorded return is the true one.
pub struct RecordEpisodeStatistics<E: Env> {
    inner: E,
    ret: f64,
    len: usize,
}

impl<E: Env> RecordEpisodeStatistics<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            ret: 0.0,
            len: 0,
        }
    }
}

impl<E: Env> Env for RecordEpisodeStatistics<E> {
    delegate!(basics);
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Ok(json!({"ret": self.ret, "len": self.len, "inner": self.inner.snapshot()?}))
    }
    fn restore(&mut self, s: &serde_json::Value) -> Result<(), EnvError> {
        self.ret = snap_field(self.inner.id(), s, "ret")?;
        self.len = snap_field(self.inner.id(), s, "len")?;
        self.inner.restore(&s["inner"])
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.ret = 0.0;
        self.len = 0;
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = self.inner.step(action, obs)?;
        self.ret += s.reward;
        self.len += 1;
        if s.terminated || s.truncated {
            s.info.insert(EPISODE_RETURN.into(), self.ret);
            s.info.insert(EPISODE_LENGTH.into(), self.len as f64);
            self.ret = 0.0;
            self.len = 0;
        }
        Ok(s)
    }
}

/// Clips Box actions to the action space's bounds before the env sees them.
pub struct ClipAction<E: Env> {
    inner: E,
    buf: Vec<f32>,
}

impl<E: Env> ClipAction<E> {
    /// Wraps `inner` (its action space must be a Box).
    pub fn new(inner: E) -> Result<Self, EnvError> {
        if inner.action_space().bounds().is_none() {
            return Err(EnvError::Make(format!(
                "ClipAction needs a Box action space, {} has {}",
                inner.id(),
                inner.action_space().describe()
            )));
        }
        Ok(Self {
            inner,
            buf: Vec::new(),
        })
    }
}

impl<E: Env> Env for ClipAction<E> {
    delegate!(basics, snap);
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let (low, high) = self.inner.action_space().bounds().expect("checked in new");
        self.buf.clear();
        self.buf.extend(
            action
                .iter()
                .zip(low.iter().zip(high))
                .map(|(&a, (&l, &h))| a.clamp(l, h)),
        );
        let buf = std::mem::take(&mut self.buf);
        let r = self.inner.step(&buf, obs);
        self.buf = buf;
        r
    }
}

/// Affinely maps actions from `[min_action, max_action]` to the env's Box bounds.
pub struct RescaleAction<E: Env> {
    inner: E,
    space: Space,
    buf: Vec<f32>,
}

impl<E: Env> RescaleAction<E> {
    /// Wraps `inner`; the new action space is the box `[min_action, max_action]`.
    pub fn new(inner: E, min_action: f32, max_action: f32) -> Result<Self, EnvError> {
        let n = match inner.action_space().bounds() {
            Some((l, h)) if l.iter().chain(h).all(|v| v.is_finite()) => l.len(),
            _ => {
                return Err(EnvError::Make(format!(
                    "RescaleAction needs a bounded Box action space, {} has {}",
                    inner.id(),
                    inner.action_space().describe()
                )));
            }
        };
        let space = Space::boxed(vec![min_action; n], vec![max_action; n]);
        Ok(Self {
            inner,
            space,
            buf: Vec::new(),
        })
    }
}

impl<E: Env> Env for RescaleAction<E> {
    delegate!(id, observation_space, state, set_state, render, stats, snap);
    fn action_space(&self) -> &Space {
        &self.space
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        check_action(self.inner.id(), &self.space, action)?;
        let (lo, hi) = self.space.bounds().expect("box");
        let (l, h) = self.inner.action_space().bounds().expect("box");
        self.buf.clear();
        for i in 0..action.len() {
            let t = (action[i] as f64 - lo[i] as f64) / (hi[i] as f64 - lo[i] as f64);
            self.buf
                .push((l[i] as f64 + t * (h[i] as f64 - l[i] as f64)) as f32);
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.inner.step(&buf, obs);
        self.buf = buf;
        r
    }
}

/// Applies a function to every reward.
pub struct TransformReward<E: Env> {
    inner: E,
    f: Box<dyn Fn(f64) -> f64 + Send>,
}

impl<E: Env> TransformReward<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, f: impl Fn(f64) -> f64 + Send + 'static) -> Self {
        Self {
            inner,
            f: Box::new(f),
        }
    }
}

impl<E: Env> Env for TransformReward<E> {
    delegate!(basics, snap);
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = self.inner.step(action, obs)?;
        s.reward = (self.f)(s.reward);
        Ok(s)
    }
}

/// Turns any observation space into a Box of its flat encoding (one-hot discrete parts).
pub struct FlattenObservation<E: Env> {
    inner: E,
    space: Space,
    raw: Vec<f32>,
    flat: Vec<f32>,
}

impl<E: Env> FlattenObservation<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        let d = inner.observation_space().flat_dim();
        let raw = vec![0.0; inner.observation_space().raw_dim()];
        let (low, high) = flat_bounds(inner.observation_space());
        debug_assert_eq!(low.len(), d);
        Self {
            inner,
            space: Space::boxed(low, high),
            raw,
            flat: Vec::with_capacity(d),
        }
    }
    fn write(&mut self, obs: &mut [f32]) {
        self.flat.clear();
        self.inner
            .observation_space()
            .flatten(&self.raw, &mut self.flat);
        obs.copy_from_slice(&self.flat);
    }
}

fn flat_bounds(s: &Space) -> (Vec<f32>, Vec<f32>) {
    match s {
        Space::Box { low, high, .. } => (low.clone(), high.clone()),
        Space::Discrete { n, .. } => (vec![0.0; *n], vec![1.0; *n]),
        Space::MultiBinary { n } => (vec![0.0; *n], vec![1.0; *n]),
        Space::MultiDiscrete { nvec } => {
            let n = nvec.iter().sum();
            (vec![0.0; n], vec![1.0; n])
        }
        Space::Tuple { spaces } => concat_bounds(spaces.iter()),
        Space::Dict { spaces } => concat_bounds(spaces.iter().map(|(_, s)| s)),
    }
}

fn concat_bounds<'a>(it: impl Iterator<Item = &'a Space>) -> (Vec<f32>, Vec<f32>) {
    let (mut l, mut h) = (Vec::new(), Vec::new());
    for s in it {
        let (a, b) = flat_bounds(s);
        l.extend(a);
        h.extend(b);
    }
    (l, h)
}

impl<E: Env> Env for FlattenObservation<E> {
    delegate!(id, action_space, state, set_state, render, stats, snap);
    fn observation_space(&self) -> &Space {
        &self.space
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let mut raw = std::mem::take(&mut self.raw);
        let r = self.inner.reset(seed, options, &mut raw);
        self.raw = raw;
        self.write(obs);
        r
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut raw = std::mem::take(&mut self.raw);
        let r = self.inner.step(action, &mut raw);
        self.raw = raw;
        self.write(obs);
        r
    }
}

/// Zeroes the observation elements at `indices`, keeping the shape (rl-baselines3-zoo's
/// `MaskVelocityWrapper`, used for the `…NoVel` POMDP variants).
pub struct MaskObservation<E: Env> {
    inner: E,
    indices: Vec<usize>,
    id: String,
}

impl<E: Env> MaskObservation<E> {
    /// Wraps `inner`, masking `indices`; `id` names the masked variant.
    pub fn new(inner: E, indices: Vec<usize>, id: &str) -> Self {
        Self {
            inner,
            indices,
            id: id.to_string(),
        }
    }
}

impl<E: Env> Env for MaskObservation<E> {
    delegate!(
        observation_space,
        action_space,
        state,
        set_state,
        render,
        stats,
        snap
    );
    fn id(&self) -> &str {
        &self.id
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let r = self.inner.reset(seed, options, obs)?;
        self.indices.iter().for_each(|&i| obs[i] = 0.0);
        Ok(r)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let r = self.inner.step(action, obs)?;
        self.indices.iter().for_each(|&i| obs[i] = 0.0);
        Ok(r)
    }
}

/// Stacks the last `k` observations of a Box space along a new leading axis (Gymnasium's
/// FrameStackObservation with zero padding at reset).
pub struct FrameStack<E: Env> {
    inner: E,
    k: usize,
    space: Space,
    frames: Vec<f32>,
}

impl<E: Env> FrameStack<E> {
    /// Wraps `inner` (Box observations) to stack `k >= 1` frames.
    pub fn new(inner: E, k: usize) -> Result<Self, EnvError> {
        let Space::Box { low, high, shape } = inner.observation_space().clone() else {
            return Err(EnvError::Make(format!(
                "FrameStack needs a Box observation space, {} has {}",
                inner.id(),
                inner.observation_space().describe()
            )));
        };
        if k == 0 {
            return Err(EnvError::Make("FrameStack: k must be at least 1".into()));
        }
        let mut s = vec![k];
        s.extend(&shape);
        let space = Space::Box {
            low: low.repeat(k),
            high: high.repeat(k),
            shape: s,
        };
        let d = low.len();
        Ok(Self {
            inner,
            k,
            space,
            frames: vec![0.0; d * k],
        })
    }
}

impl<E: Env> Env for FrameStack<E> {
    delegate!(id, action_space, state, set_state, render, stats);
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Ok(json!({"frames": self.frames, "inner": self.inner.snapshot()?}))
    }
    fn restore(&mut self, s: &serde_json::Value) -> Result<(), EnvError> {
        let f: Vec<f32> = snap_field(self.inner.id(), s, "frames")?;
        if f.len() != self.frames.len() {
            return Err(EnvError::InvalidState {
                env: self.inner.id().into(),
                reason: format!(
                    "FrameStack snapshot has {} values, expected {}",
                    f.len(),
                    self.frames.len()
                ),
            });
        }
        self.frames = f;
        self.inner.restore(&s["inner"])
    }
    fn observation_space(&self) -> &Space {
        &self.space
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let d = self.frames.len() / self.k;
        self.frames.fill(0.0);
        let off = (self.k - 1) * d;
        let r = self.inner.reset(seed, options, &mut self.frames[off..])?;
        obs.copy_from_slice(&self.frames);
        Ok(r)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let d = self.frames.len() / self.k;
        self.frames.copy_within(d.., 0);
        let off = (self.k - 1) * d;
        let r = self.inner.step(action, &mut self.frames[off..])?;
        obs.copy_from_slice(&self.frames);
        Ok(r)
    }
}

/// Running mean and variance (parallel Welford), as Gymnasium's / SB3's `RunningMeanStd`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningMeanStd {
    /// Mean per element.
    pub mean: Vec<f64>,
    /// Variance per element.
    pub var: Vec<f64>,
    /// Number of samples seen (starts at 1e-4, as the reference implementations).
    pub count: f64,
}

impl RunningMeanStd {
    /// Statistics for `n` elements.
    pub fn new(n: usize) -> Self {
        Self {
            mean: vec![0.0; n],
            var: vec![1.0; n],
            count: 1e-4,
        }
    }
    /// Adds one sample.
    pub fn update(&mut self, x: &[f64]) {
        let tot = self.count + 1.0;
        for i in 0..self.mean.len() {
            let delta = x[i] - self.mean[i];
            let new_mean = self.mean[i] + delta / tot;
            let m2 = self.var[i] * self.count + delta * delta * self.count / tot;
            self.mean[i] = new_mean;
            self.var[i] = m2 / tot;
        }
        self.count = tot;
    }

    /// Merges a batch's moments (SB3's `update_from_moments`, Chan et al.'s parallel
    /// formula): `batch_count` samples with per-element `batch_mean` and `batch_var`.
    pub fn update_from_moments(&mut self, batch_mean: &[f64], batch_var: &[f64], batch_count: f64) {
        if batch_count <= 0.0 {
            return;
        }
        let tot = self.count + batch_count;
        for i in 0..self.mean.len() {
            let delta = batch_mean[i] - self.mean[i];
            let m2 = self.var[i] * self.count
                + batch_var[i] * batch_count
                + delta * delta * self.count * batch_count / tot;
            self.mean[i] += delta * batch_count / tot;
            self.var[i] = m2 / tot;
        }
        self.count = tot;
    }

    /// Merges a batch of rows, each as wide as the statistics (population moments).
    pub fn update_batch(&mut self, rows: &[f32]) {
        let w = self.mean.len().max(1);
        let n = rows.len() / w;
        if n == 0 {
            return;
        }
        let mut mean = vec![0.0; w];
        for row in rows.chunks_exact(w) {
            for (m, &v) in mean.iter_mut().zip(row) {
                *m += v as f64 / n as f64;
            }
        }
        let mut var = vec![0.0; w];
        for row in rows.chunks_exact(w) {
            for ((s, &v), m) in var.iter_mut().zip(row).zip(&mean) {
                *s += (v as f64 - m).powi(2) / n as f64;
            }
        }
        self.update_from_moments(&mean, &var, n as f64);
    }

    /// `(x − mean) / √(var + 1e-8)` in place, for the leading elements the row has.
    pub fn normalize(&self, row: &mut [f32]) {
        for ((x, m), v) in row.iter_mut().zip(&self.mean).zip(&self.var) {
            *x = ((*x as f64 - m) / (v + 1e-8).sqrt()) as f32;
        }
    }
}

/// Normalizes observations with running statistics (Gymnasium's NormalizeObservation:
/// `(obs - mean) / sqrt(var + 1e-8)`); statistics update only while training.
pub struct NormalizeObservation<E: Env> {
    inner: E,
    rms: RunningMeanStd,
    training: bool,
    space: Space,
    buf: Vec<f64>,
}

impl<E: Env> NormalizeObservation<E> {
    /// Wraps `inner` (Box observations).
    pub fn new(inner: E) -> Result<Self, EnvError> {
        let Space::Box { shape, .. } = inner.observation_space() else {
            return Err(EnvError::Make(format!(
                "NormalizeObservation needs a Box observation space, {} has {}",
                inner.id(),
                inner.observation_space().describe()
            )));
        };
        let n = inner.observation_space().raw_dim();
        let space = Space::uniform_box(f32::NEG_INFINITY, f32::INFINITY, &shape.clone());
        Ok(Self {
            inner,
            rms: RunningMeanStd::new(n),
            training: true,
            space,
            buf: vec![0.0; n],
        })
    }
    fn normalize(&mut self, obs: &mut [f32]) {
        for (b, &o) in self.buf.iter_mut().zip(obs.iter()) {
            *b = o as f64;
        }
        if self.training {
            self.rms.update(&self.buf);
        }
        self.rms.normalize(obs);
    }
}

impl<E: Env> Env for NormalizeObservation<E> {
    delegate!(id, action_space, state, set_state, render);
    fn observation_space(&self) -> &Space {
        &self.space
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let r = self.inner.reset(seed, options, obs)?;
        self.normalize(obs);
        Ok(r)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let r = self.inner.step(action, obs)?;
        self.normalize(obs);
        Ok(r)
    }
    fn save_stats(&self) -> Vec<serde_json::Value> {
        let mut v = vec![serde_json::json!({"NormalizeObservation": self.rms})];
        v.extend(self.inner.save_stats());
        v
    }
    fn load_stats(&mut self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        let bad = |reason: String| EnvError::InvalidState {
            env: self.inner.id().to_string(),
            reason,
        };
        let first = stats
            .iter()
            .find(|v| v.get("NormalizeObservation").is_some())
            .ok_or_else(|| bad("missing NormalizeObservation statistics".into()))?;
        let rms: RunningMeanStd = serde_json::from_value(
            first
                .get("NormalizeObservation")
                .cloned()
                .unwrap_or_default(),
        )
        .map_err(|e| bad(format!("NormalizeObservation statistics: {e}")))?;
        if rms.mean.len() != self.rms.mean.len() || rms.var.len() != self.rms.var.len() {
            return Err(bad(format!(
                "NormalizeObservation statistics have {} elements, expected {}",
                rms.mean.len(),
                self.rms.mean.len()
            )));
        }
        self.rms = rms;
        self.inner.load_stats(stats)
    }
    delegate!(normalizer);
}

/// Scales rewards by the running standard deviation of the discounted return (Gymnasium's
/// NormalizeReward, `gamma` 0.99 by default, epsilon 1e-8).
pub struct NormalizeReward<E: Env> {
    inner: E,
    rms: RunningMeanStd,
    discounted: f64,
    gamma: f64,
    training: bool,
}

impl<E: Env> NormalizeReward<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, gamma: f64) -> Self {
        Self {
            inner,
            rms: RunningMeanStd::new(1),
            discounted: 0.0,
            gamma,
            training: true,
        }
    }
}

impl<E: Env> Env for NormalizeReward<E> {
    delegate!(
        id,
        observation_space,
        action_space,
        state,
        set_state,
        render
    );
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = self.inner.step(action, obs)?;
        self.discounted =
            self.discounted * self.gamma * (1.0 - s.terminated as u8 as f64) + s.reward;
        if self.training {
            self.rms.update(&[self.discounted]);
        }
        s.reward /= (self.rms.var[0] + 1e-8).sqrt();
        Ok(s)
    }
    fn save_stats(&self) -> Vec<serde_json::Value> {
        let mut v =
            vec![serde_json::json!({"NormalizeReward": self.rms, "discounted": self.discounted})];
        v.extend(self.inner.save_stats());
        v
    }
    fn load_stats(&mut self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        let bad = |reason: String| EnvError::InvalidState {
            env: self.inner.id().to_string(),
            reason,
        };
        let first = stats
            .iter()
            .find(|v| v.get("NormalizeReward").is_some())
            .ok_or_else(|| bad("missing NormalizeReward statistics".into()))?;
        self.rms =
            serde_json::from_value(first.get("NormalizeReward").cloned().unwrap_or_default())
                .map_err(|e| bad(format!("NormalizeReward statistics: {e}")))?;
        self.discounted = first
            .get("discounted")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0);
        self.inner.load_stats(stats)
    }
    delegate!(normalizer);
}
