//! Gymnasium's standard wrappers.

use crate::env::{
    EPISODE_LENGTH, EPISODE_RETURN, Env, EnvError, Info, Kwargs, Step, StepBatch, check_action,
    snap_field,
};
use crate::spaces::Space;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A wrapper around one env, as Gymnasium's `gymnasium.Wrapper`: every [`Env`] method
/// forwards to [`inner`](Wrapper::inner) unless the wrapper overrides it, and every
/// `Wrapper` is an [`Env`]. A wrapper with state of its own (counters, statistics) overrides
/// `snapshot`/`restore` so that resume keeps it.
///
/// The `Env` methods take `this` instead of a `self` receiver, so a method call such as
/// `env.step(..)` on a wrapper always means [`Env::step`] and never needs disambiguation.
pub trait Wrapper: Send {
    /// The wrapped env.
    type Inner: Env;
    /// The wrapped env.
    fn inner(&self) -> &Self::Inner;
    /// The wrapped env, mutably.
    fn inner_mut(&mut self) -> &mut Self::Inner;
    /// [`Env::id`].
    fn id(this: &Self) -> &str {
        this.inner().id()
    }
    /// [`Env::observation_space`].
    fn observation_space(this: &Self) -> &Space {
        this.inner().observation_space()
    }
    /// [`Env::action_space`].
    fn action_space(this: &Self) -> &Space {
        this.inner().action_space()
    }
    /// [`Env::reset`].
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.inner_mut().reset(seed, options, obs)
    }
    /// [`Env::step`].
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        this.inner_mut().step(action, obs)
    }
    /// [`Env::stage`]: a wrapper that changes actions overrides it to stage the changed one.
    fn stage(this: &mut Self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        this.inner_mut().stage(action, batch)
    }
    /// [`Env::state`].
    fn state(this: &Self) -> Option<Vec<f64>> {
        this.inner().state()
    }
    /// [`Env::set_state`].
    fn set_state(this: &mut Self, state: &[f64]) -> Result<(), EnvError> {
        this.inner_mut().set_state(state)
    }
    /// [`Env::render`].
    fn render(this: &Self) -> Option<String> {
        this.inner().render()
    }
    /// [`Env::save_stats`].
    fn save_stats(this: &Self) -> Vec<serde_json::Value> {
        this.inner().save_stats()
    }
    /// [`Env::load_stats`].
    fn load_stats(this: &mut Self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        this.inner_mut().load_stats(stats)
    }
    /// [`Env::set_training`].
    fn set_training(this: &mut Self, training: bool) {
        this.inner_mut().set_training(training)
    }
    /// [`Env::snapshot`].
    fn snapshot(this: &Self) -> Result<serde_json::Value, EnvError> {
        this.inner().snapshot()
    }
    /// [`Env::restore`].
    fn restore(this: &mut Self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        this.inner_mut().restore(snapshot)
    }
}

impl<W: Wrapper> Env for W {
    fn id(&self) -> &str {
        Wrapper::id(self)
    }
    fn observation_space(&self) -> &Space {
        Wrapper::observation_space(self)
    }
    fn action_space(&self) -> &Space {
        Wrapper::action_space(self)
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        Wrapper::reset(self, seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        Wrapper::step(self, action, obs)
    }
    fn stage(&mut self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        Wrapper::stage(self, action, batch)
    }
    fn state(&self) -> Option<Vec<f64>> {
        Wrapper::state(self)
    }
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        Wrapper::set_state(self, state)
    }
    fn render(&self) -> Option<String> {
        Wrapper::render(self)
    }
    fn save_stats(&self) -> Vec<serde_json::Value> {
        Wrapper::save_stats(self)
    }
    fn load_stats(&mut self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        Wrapper::load_stats(self, stats)
    }
    fn set_training(&mut self, training: bool) {
        Wrapper::set_training(self, training)
    }
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Wrapper::snapshot(self)
    }
    fn restore(&mut self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        Wrapper::restore(self, snapshot)
    }
}

/// The running statistics of a normalizing wrapper and whether they update: the part of
/// [`NormalizeObservation`] and [`NormalizeReward`] that `set_training`, `snapshot` and
/// `restore` handle alike.
fn normalizer_snapshot<W: Wrapper>(w: &W, training: bool) -> Result<serde_json::Value, EnvError> {
    Ok(
        json!({"stats": Wrapper::save_stats(w), "training": training, "inner": w.inner().snapshot()?}),
    )
}

/// Restores [`normalizer_snapshot`]; returns the `training` flag.
fn normalizer_restore<W: Wrapper>(w: &mut W, s: &serde_json::Value) -> Result<bool, EnvError> {
    let stats: Vec<serde_json::Value> = snap_field(w.inner().id(), s, "stats")?;
    Wrapper::load_stats(w, &stats)?;
    let training = snap_field(w.inner().id(), s, "training")?;
    w.inner_mut().restore(&s["inner"])?;
    Ok(training)
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

impl<E: Env> Wrapper for TimeLimit<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn snapshot(this: &Self) -> Result<serde_json::Value, EnvError> {
        Ok(json!({"elapsed": this.elapsed, "inner": this.inner.snapshot()?}))
    }
    fn restore(this: &mut Self, s: &serde_json::Value) -> Result<(), EnvError> {
        this.elapsed = snap_field(this.inner.id(), s, "elapsed")?;
        this.inner.restore(&s["inner"])
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.elapsed = 0;
        this.inner.reset(seed, options, obs)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = this.inner.step(action, obs)?;
        this.elapsed += 1;
        if this.elapsed >= this.max_episode_steps {
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

impl<E: Env> Wrapper for RecordEpisodeStatistics<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn snapshot(this: &Self) -> Result<serde_json::Value, EnvError> {
        Ok(json!({"ret": this.ret, "len": this.len, "inner": this.inner.snapshot()?}))
    }
    fn restore(this: &mut Self, s: &serde_json::Value) -> Result<(), EnvError> {
        this.ret = snap_field(this.inner.id(), s, "ret")?;
        this.len = snap_field(this.inner.id(), s, "len")?;
        this.inner.restore(&s["inner"])
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.ret = 0.0;
        this.len = 0;
        this.inner.reset(seed, options, obs)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = this.inner.step(action, obs)?;
        this.ret += s.reward;
        this.len += 1;
        if s.terminated || s.truncated {
            s.info.insert(EPISODE_RETURN.into(), this.ret);
            s.info.insert(EPISODE_LENGTH.into(), this.len as f64);
            this.ret = 0.0;
            this.len = 0;
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

    /// `action` clipped to the bounds, in the reused buffer (taken out; put it back after).
    fn clipped(&mut self, action: &[f32]) -> Vec<f32> {
        let (low, high) = self.inner.action_space().bounds().expect("checked in new");
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend(
            action
                .iter()
                .zip(low.iter().zip(high))
                .map(|(&a, (&l, &h))| a.clamp(l, h)),
        );
        buf
    }
}

impl<E: Env> Wrapper for ClipAction<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.inner.reset(seed, options, obs)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let buf = this.clipped(action);
        let r = this.inner.step(&buf, obs);
        this.buf = buf;
        r
    }
    fn stage(this: &mut Self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        let buf = this.clipped(action);
        let r = this.inner.stage(&buf, batch);
        this.buf = buf;
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

    /// `action` mapped onto the env's bounds, in the reused buffer (taken out; put it back
    /// after).
    fn rescaled(&mut self, action: &[f32]) -> Result<Vec<f32>, EnvError> {
        check_action(self.inner.id(), &self.space, action)?;
        let (lo, hi) = self.space.bounds().expect("box");
        let (l, h) = self.inner.action_space().bounds().expect("box");
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for i in 0..action.len() {
            let t = (action[i] as f64 - lo[i] as f64) / (hi[i] as f64 - lo[i] as f64);
            buf.push((l[i] as f64 + t * (h[i] as f64 - l[i] as f64)) as f32);
        }
        Ok(buf)
    }
}

impl<E: Env> Wrapper for RescaleAction<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn action_space(this: &Self) -> &Space {
        &this.space
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.inner.reset(seed, options, obs)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let buf = this.rescaled(action)?;
        let r = this.inner.step(&buf, obs);
        this.buf = buf;
        r
    }
    fn stage(this: &mut Self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        let buf = this.rescaled(action)?;
        let r = this.inner.stage(&buf, batch);
        this.buf = buf;
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

impl<E: Env> Wrapper for TransformReward<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.inner.reset(seed, options, obs)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = this.inner.step(action, obs)?;
        s.reward = (this.f)(s.reward);
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

impl<E: Env> Wrapper for FlattenObservation<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn observation_space(this: &Self) -> &Space {
        &this.space
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let mut raw = std::mem::take(&mut this.raw);
        let r = this.inner.reset(seed, options, &mut raw);
        this.raw = raw;
        this.write(obs);
        r
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut raw = std::mem::take(&mut this.raw);
        let r = this.inner.step(action, &mut raw);
        this.raw = raw;
        this.write(obs);
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

impl<E: Env> Wrapper for MaskObservation<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn id(this: &Self) -> &str {
        &this.id
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let r = this.inner.reset(seed, options, obs)?;
        this.indices.iter().for_each(|&i| obs[i] = 0.0);
        Ok(r)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let r = this.inner.step(action, obs)?;
        this.indices.iter().for_each(|&i| obs[i] = 0.0);
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

impl<E: Env> Wrapper for FrameStack<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn snapshot(this: &Self) -> Result<serde_json::Value, EnvError> {
        Ok(json!({"frames": this.frames, "inner": this.inner.snapshot()?}))
    }
    fn restore(this: &mut Self, s: &serde_json::Value) -> Result<(), EnvError> {
        let f: Vec<f32> = snap_field(this.inner.id(), s, "frames")?;
        if f.len() != this.frames.len() {
            return Err(EnvError::InvalidState {
                env: this.inner.id().into(),
                reason: format!(
                    "FrameStack snapshot has {} values, expected {}",
                    f.len(),
                    this.frames.len()
                ),
            });
        }
        this.frames = f;
        this.inner.restore(&s["inner"])
    }
    fn observation_space(this: &Self) -> &Space {
        &this.space
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let d = this.frames.len() / this.k;
        this.frames.fill(0.0);
        let off = (this.k - 1) * d;
        let r = this.inner.reset(seed, options, &mut this.frames[off..])?;
        obs.copy_from_slice(&this.frames);
        Ok(r)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let d = this.frames.len() / this.k;
        this.frames.copy_within(d.., 0);
        let off = (this.k - 1) * d;
        let r = this.inner.step(action, &mut this.frames[off..])?;
        obs.copy_from_slice(&this.frames);
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

impl<E: Env> Wrapper for NormalizeObservation<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn observation_space(this: &Self) -> &Space {
        &this.space
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let r = this.inner.reset(seed, options, obs)?;
        this.normalize(obs);
        Ok(r)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let r = this.inner.step(action, obs)?;
        this.normalize(obs);
        Ok(r)
    }
    fn save_stats(this: &Self) -> Vec<serde_json::Value> {
        let mut v = vec![serde_json::json!({"NormalizeObservation": this.rms})];
        v.extend(this.inner.save_stats());
        v
    }
    fn load_stats(this: &mut Self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        let bad = |reason: String| EnvError::InvalidState {
            env: this.inner.id().to_string(),
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
        if rms.mean.len() != this.rms.mean.len() || rms.var.len() != this.rms.var.len() {
            return Err(bad(format!(
                "NormalizeObservation statistics have {} elements, expected {}",
                rms.mean.len(),
                this.rms.mean.len()
            )));
        }
        this.rms = rms;
        this.inner.load_stats(stats)
    }
    fn set_training(this: &mut Self, training: bool) {
        this.training = training;
        this.inner.set_training(training);
    }
    fn snapshot(this: &Self) -> Result<serde_json::Value, EnvError> {
        normalizer_snapshot(this, this.training)
    }
    fn restore(this: &mut Self, s: &serde_json::Value) -> Result<(), EnvError> {
        this.training = normalizer_restore(this, s)?;
        Ok(())
    }
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

impl<E: Env> Wrapper for NormalizeReward<E> {
    type Inner = E;
    fn inner(&self) -> &E {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
    fn reset(
        this: &mut Self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        this.inner.reset(seed, options, obs)
    }
    fn step(this: &mut Self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let mut s = this.inner.step(action, obs)?;
        this.discounted =
            this.discounted * this.gamma * (1.0 - s.terminated as u8 as f64) + s.reward;
        if this.training {
            this.rms.update(&[this.discounted]);
        }
        s.reward /= (this.rms.var[0] + 1e-8).sqrt();
        Ok(s)
    }
    fn save_stats(this: &Self) -> Vec<serde_json::Value> {
        let mut v =
            vec![serde_json::json!({"NormalizeReward": this.rms, "discounted": this.discounted})];
        v.extend(this.inner.save_stats());
        v
    }
    fn load_stats(this: &mut Self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        let bad = |reason: String| EnvError::InvalidState {
            env: this.inner.id().to_string(),
            reason,
        };
        let first = stats
            .iter()
            .find(|v| v.get("NormalizeReward").is_some())
            .ok_or_else(|| bad("missing NormalizeReward statistics".into()))?;
        this.rms =
            serde_json::from_value(first.get("NormalizeReward").cloned().unwrap_or_default())
                .map_err(|e| bad(format!("NormalizeReward statistics: {e}")))?;
        this.discounted = first
            .get("discounted")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0);
        this.inner.load_stats(stats)
    }
    fn set_training(this: &mut Self, training: bool) {
        this.training = training;
        this.inner.set_training(training);
    }
    fn snapshot(this: &Self) -> Result<serde_json::Value, EnvError> {
        normalizer_snapshot(this, this.training)
    }
    fn restore(this: &mut Self, s: &serde_json::Value) -> Result<(), EnvError> {
        this.training = normalizer_restore(this, s)?;
        Ok(())
    }
}
