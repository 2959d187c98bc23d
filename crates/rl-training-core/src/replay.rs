//! Replay buffers for off-policy, offline and actor-learner algorithms: a FIFO ring laid out
//! `[rows][n_envs]` as stable-baselines3's, n-step returns computed at sampling time (a fixed
//! `n` or an RLlib-style range drawn per sample), and optional proportional prioritized
//! replay (Schaul et al. 2016) on a sum-tree with a min-tree for the importance-weight bound.
//!
//! `terminated` and `truncated` are stored apart and `next_obs` is the true next observation,
//! also at episode ends, so a truncated transition bootstraps from its final observation.
//!
//! A [`linked`](Replay::linked) buffer (one column) holds transitions of several sources
//! interleaved, such as the agents of a multi-agent policy in the order their transitions
//! closed: each stored transition may name its successor ([`add_after`](Replay::add_after)),
//! and n-step returns follow those links instead of the next row.

use crate::params::{TensorFileError, TensorMap};
use crate::rng::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One transition of one env, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct TransitionRef<'a> {
    /// Observation (network encoding).
    pub obs: &'a [f32],
    /// Action as stored.
    pub action: &'a [f32],
    /// Reward.
    pub reward: f32,
    /// The true next observation.
    pub next_obs: &'a [f32],
    /// The episode reached a terminal state.
    pub terminated: bool,
    /// The episode was cut short.
    pub truncated: bool,
}

/// A sampled batch, row-major arrays of `B` rows. With n-step returns, `rewards` holds the
/// discounted sum of the `m ≤ n` rewards taken, `next_obs`/`terminated`/`truncated` describe
/// the last of them and `discounts` is γ^m, so every target is
/// `rewards + discounts · (1 − terminated) · V(next_obs)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransitionBatch {
    /// Flat buffer indices of the first transitions (for priority updates).
    pub indices: Vec<usize>,
    /// `[B × obs_dim]`.
    pub obs: Vec<f32>,
    /// `[B × act_dim]`.
    pub actions: Vec<f32>,
    /// `[B]` (n-step) returns.
    pub rewards: Vec<f32>,
    /// `[B × obs_dim]` observation to bootstrap from.
    pub next_obs: Vec<f32>,
    /// `[B]`, 1.0 where the last transition terminated.
    pub terminated: Vec<f32>,
    /// `[B]`, 1.0 where the last transition was truncated.
    pub truncated: Vec<f32>,
    /// `[B]` discount of the bootstrap, γ^m.
    pub discounts: Vec<f32>,
    /// `[B]` importance weights (1.0 for uniform replay).
    pub weights: Vec<f32>,
    /// `[B]` how many one-step transitions (m ≤ n) each row's return sums, from
    /// `indices[i]` on ([`Replay::one_step_transitions`] lists them); empty for batches that
    /// did not come from a replay's [`gather`](Replay::gather) (one step each).
    pub lengths: Vec<usize>,
}

impl TransitionBatch {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }
}

/// The one-step transitions behind the rows of a [`TransitionBatch`]
/// ([`Replay::one_step_transitions`]): row `i`'s `lengths[i]` transitions, in order, then
/// row `i + 1`'s.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OneStepTransitions {
    /// `[n × obs_dim]`.
    pub obs: Vec<f32>,
    /// `[n × act_dim]`.
    pub actions: Vec<f32>,
    /// `[n × obs_dim]`, each transition's own next observation.
    pub next_obs: Vec<f32>,
    /// `[B]` transitions per batch row (they sum to `n`).
    pub lengths: Vec<usize>,
}

impl OneStepTransitions {
    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.lengths.iter().sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Folds per-transition `values` (`[n]`, this order) into one discounted sum per batch
    /// row, `Σ_k γ^k · values[k]`, as the row's n-step return sums its rewards.
    pub fn discounted_sums(&self, values: &[f32], gamma: f32) -> Vec<f32> {
        let mut it = values.iter();
        self.lengths
            .iter()
            .map(|&m| {
                let (mut sum, mut disc) = (0.0f32, 1.0f32);
                for v in it.by_ref().take(m) {
                    sum += disc * v;
                    disc *= gamma;
                }
                sum
            })
            .collect()
    }
}

/// How many rewards an n-step return sums: `3` or RLlib's range `[1, 3]` (drawn per sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NStep {
    /// Always `n`.
    Fixed(usize),
    /// Uniform in `lo..=hi`, drawn for every sampled transition.
    Range(usize, usize),
}

impl Default for NStep {
    fn default() -> Self {
        NStep::Fixed(1)
    }
}

impl NStep {
    /// Checks `n ≥ 1` and `lo ≤ hi`.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            NStep::Fixed(0) => Err("must be at least 1".into()),
            NStep::Range(lo, hi) if lo == 0 || lo > hi => {
                Err(format!("range [{lo}, {hi}]: need 1 ≤ lo ≤ hi"))
            }
            _ => Ok(()),
        }
    }

    /// The largest n.
    pub fn max(&self) -> usize {
        match *self {
            NStep::Fixed(n) => n,
            NStep::Range(_, hi) => hi,
        }
    }

    fn draw(&self, rng: &mut Rng) -> usize {
        match *self {
            NStep::Fixed(n) => n,
            NStep::Range(lo, hi) => lo + rng.below((hi - lo + 1) as u64) as usize,
        }
    }
}

impl Serialize for NStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            NStep::Fixed(n) => s.serialize_u64(n as u64),
            NStep::Range(lo, hi) => [lo, hi].serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for NStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(usize),
            Two([usize; 2]),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected a positive integer or a range [lo, hi]")
        })? {
            Raw::One(n) => Ok(NStep::Fixed(n)),
            Raw::Two([lo, hi]) => Ok(NStep::Range(lo, hi)),
        }
    }
}

/// Prioritized replay parameters (RLlib/PER names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PerParams {
    /// Priority exponent α (0 = uniform).
    pub alpha: f64,
    /// Added to |TD error| so nothing gets priority 0.
    pub eps: f64,
}

/// Shape and options of a [`Replay`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// Total transitions kept (split evenly across envs, as SB3).
    pub capacity: usize,
    /// Envs stepped together (one row per vector step).
    pub n_envs: usize,
    /// Observation width.
    pub obs_dim: usize,
    /// Action width.
    pub act_dim: usize,
    /// n-step returns.
    pub n_step: NStep,
    /// Proportional prioritization, if any.
    pub prioritized: Option<PerParams>,
}

/// A sum-tree and a min-tree over the same leaves (capacity padded to a power of two).
/// Parents are recomputed from their children, never updated by deltas, so a tree rebuilt
/// from saved leaves is identical to the one that was saved.
#[derive(Debug, Clone)]
struct PriorityTree {
    size: usize,
    sum: Vec<f64>,
    min: Vec<f64>,
}

impl PriorityTree {
    fn new(n: usize) -> Self {
        let size = n.next_power_of_two().max(1);
        Self {
            size,
            sum: vec![0.0; 2 * size],
            min: vec![f64::INFINITY; 2 * size],
        }
    }

    fn set(&mut self, i: usize, p: f64) {
        let mut k = i + self.size;
        self.sum[k] = p;
        self.min[k] = p;
        while k > 1 {
            k /= 2;
            self.sum[k] = self.sum[2 * k] + self.sum[2 * k + 1];
            self.min[k] = self.min[2 * k].min(self.min[2 * k + 1]);
        }
    }

    fn get(&self, i: usize) -> f64 {
        self.sum[i + self.size]
    }

    fn total(&self) -> f64 {
        self.sum[1]
    }

    fn min(&self) -> f64 {
        self.min[1]
    }

    /// The leaf where the prefix sum passes `mass`; never a zero-priority leaf while the
    /// total is positive (rounding cannot push the walk into an empty subtree).
    fn find(&self, mut mass: f64) -> usize {
        let mut k = 1;
        while k < self.size {
            let (l, r) = (self.sum[2 * k], self.sum[2 * k + 1]);
            if l > 0.0 && (mass < l || r <= 0.0) {
                k *= 2;
            } else {
                mass -= l;
                k = 2 * k + 1;
            }
        }
        k - self.size
    }
}

/// The replay buffer: see the module docs.
#[derive(Debug, Clone)]
pub struct Replay {
    cfg: ReplayConfig,
    rows: usize,
    obs: Vec<f32>,
    next_obs: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    pos: usize,
    full: bool,
    tree: Option<PriorityTree>,
    max_priority: f64,
    /// Transitions written since the buffer was made (`pos` is this modulo `rows`).
    writes: u64,
    /// Linked buffers: each slot's successor slot ([`NO_LINK`] when none yet).
    links: Option<Vec<usize>>,
}

/// A slot without a successor in a linked buffer.
const NO_LINK: usize = usize::MAX;

/// Scalars of a saved buffer (the arrays go to a tensor file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayMeta {
    /// Rows (vector steps) the ring holds.
    pub rows: usize,
    /// Envs per row.
    pub n_envs: usize,
    /// Observation width.
    pub obs_dim: usize,
    /// Action width.
    pub act_dim: usize,
    /// Next row to write.
    pub pos: usize,
    /// Whether the ring has wrapped.
    pub full: bool,
    /// Largest priority seen (prioritized replay).
    pub max_priority: f64,
    /// Whether priorities were saved.
    pub prioritized: bool,
    /// Transitions written since the buffer was made (absent in older checkpoints).
    #[serde(default)]
    pub writes: Option<u64>,
}

impl Replay {
    /// An empty buffer. `capacity / n_envs` rows (at least one).
    pub fn new(cfg: ReplayConfig) -> Self {
        let rows = (cfg.capacity / cfg.n_envs.max(1)).max(1);
        let n = rows * cfg.n_envs;
        Self {
            rows,
            obs: vec![0.0; n * cfg.obs_dim],
            next_obs: vec![0.0; n * cfg.obs_dim],
            actions: vec![0.0; n * cfg.act_dim],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            pos: 0,
            full: false,
            tree: cfg.prioritized.map(|_| PriorityTree::new(n)),
            max_priority: 1.0,
            writes: 0,
            links: None,
            cfg,
        }
    }

    /// This (empty) buffer with successor links: n-step returns follow the links that
    /// [`add_after`](Self::add_after) sets. One column only (`n_envs` 1: a row is a transition).
    pub fn linked(mut self) -> Self {
        debug_assert_eq!(self.cfg.n_envs, 1, "a linked replay has one column");
        self.links = Some(vec![NO_LINK; self.rows * self.cfg.n_envs]);
        self
    }

    /// Whether the buffer is [`linked`](Self::linked).
    pub fn is_linked(&self) -> bool {
        self.links.is_some()
    }

    /// The configuration.
    pub fn config(&self) -> &ReplayConfig {
        &self.cfg
    }

    /// Stored transitions (all envs).
    pub fn len(&self) -> usize {
        self.filled_rows() * self.cfg.n_envs
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn filled_rows(&self) -> usize {
        if self.full { self.rows } else { self.pos }
    }

    /// Stores one vector step: arrays of all `n_envs` envs, row-major. Overwrites the oldest
    /// row once full.
    pub fn add(
        &mut self,
        obs: &[f32],
        actions: &[f32],
        rewards: &[f32],
        next_obs: &[f32],
        terminated: &[bool],
        truncated: &[bool],
    ) {
        let (ne, od, ad) = (self.cfg.n_envs, self.cfg.obs_dim, self.cfg.act_dim);
        debug_assert_eq!(obs.len(), ne * od);
        debug_assert_eq!(actions.len(), ne * ad);
        let base = self.pos * ne;
        self.obs[base * od..(base + ne) * od].copy_from_slice(obs);
        self.next_obs[base * od..(base + ne) * od].copy_from_slice(next_obs);
        self.actions[base * ad..(base + ne) * ad].copy_from_slice(actions);
        self.rewards[base..base + ne].copy_from_slice(rewards);
        self.terminated[base..base + ne].copy_from_slice(terminated);
        self.truncated[base..base + ne].copy_from_slice(truncated);
        if let (Some(tree), Some(per)) = (&mut self.tree, self.cfg.prioritized) {
            let p = leaf_priority(self.max_priority, per.alpha);
            for i in base..base + ne {
                tree.set(i, p);
            }
        }
        if let Some(links) = &mut self.links {
            links[base..base + ne].fill(NO_LINK);
        }
        self.pos = (self.pos + 1) % self.rows;
        self.full |= self.pos == 0;
        self.writes += 1;
    }

    /// Stores one transition of a [`linked`](Self::linked) buffer as the successor of the
    /// transition written as number `prev` (what an earlier call returned), if that one is
    /// still stored; returns this transition's number. Without links it is [`add_one`](Self::add_one).
    pub fn add_after(&mut self, t: TransitionRef<'_>, prev: Option<u64>) -> u64 {
        let (slot, rows) = (self.pos, self.rows as u64);
        // `prev` is still stored unless the ring has come round to it (this write included).
        let prev_slot = prev
            .filter(|&w| w < self.writes && self.writes - w < rows)
            .map(|w| (w % rows) as usize);
        self.add_one(t);
        if let (Some(links), Some(p)) = (&mut self.links, prev_slot) {
            links[p] = slot;
        }
        self.writes - 1
    }

    /// The flat index n-step returns go on to from the stored transition `j`: its link in a
    /// linked buffer, else the same env's next row (none at the newest row).
    pub fn successor(&self, j: usize) -> Option<usize> {
        self.next_slot(j, (self.pos + self.rows - 1) % self.rows)
    }

    fn next_slot(&self, j: usize, last_row: usize) -> Option<usize> {
        match &self.links {
            Some(links) => Some(links[j]).filter(|&s| s != NO_LINK),
            None => {
                let ne = self.cfg.n_envs;
                let row = j / ne;
                (row != last_row).then(|| ((row + 1) % self.rows) * ne + j % ne)
            }
        }
    }

    /// Stores one transition of a single-env buffer.
    pub fn add_one(&mut self, t: TransitionRef<'_>) {
        self.add(
            t.obs,
            t.action,
            &[t.reward],
            t.next_obs,
            &[t.terminated],
            &[t.truncated],
        );
    }

    /// Samples `batch_size` transitions: uniformly, or proportionally to priority with
    /// importance weights `(N·P(i))^−β / max_j (N·P(j))^−β` (the PER paper's normalization,
    /// the bound taken from the min-tree). Returns an empty batch when nothing is stored.
    pub fn sample(
        &self,
        batch_size: usize,
        gamma: f32,
        beta: f64,
        rng: &mut Rng,
    ) -> TransitionBatch {
        let n = self.len();
        if n == 0 {
            return TransitionBatch::default();
        }
        let (indices, weights) = match &self.tree {
            None => (
                (0..batch_size)
                    .map(|_| rng.below(n as u64) as usize)
                    .collect::<Vec<_>>(),
                vec![1.0; batch_size],
            ),
            Some(tree) => {
                // Stratified: one draw from each of `batch_size` equal slices of the mass.
                let total = tree.total();
                let seg = total / batch_size as f64;
                let idx: Vec<usize> = (0..batch_size)
                    .map(|i| tree.find((i as f64 + rng.uniform()) * seg).min(n - 1))
                    .collect();
                let max_w = (n as f64 * tree.min() / total).powf(-beta);
                let w = idx
                    .iter()
                    .map(|&i| ((n as f64 * tree.get(i) / total).powf(-beta) / max_w) as f32)
                    .collect();
                (idx, w)
            }
        };
        self.gather(indices, weights, gamma, rng)
    }

    /// Builds the batch for flat indices `indices` (n-step returns drawn with `rng`).
    pub fn gather(
        &self,
        indices: Vec<usize>,
        weights: Vec<f32>,
        gamma: f32,
        rng: &mut Rng,
    ) -> TransitionBatch {
        let (od, ad) = (self.cfg.obs_dim, self.cfg.act_dim);
        let b = indices.len();
        let mut out = TransitionBatch {
            obs: Vec::with_capacity(b * od),
            actions: Vec::with_capacity(b * ad),
            rewards: Vec::with_capacity(b),
            next_obs: Vec::with_capacity(b * od),
            terminated: Vec::with_capacity(b),
            truncated: Vec::with_capacity(b),
            discounts: Vec::with_capacity(b),
            weights,
            indices: Vec::new(),
            lengths: Vec::with_capacity(b),
        };
        // The newest row: n-step sums stop there instead of wrapping into the oldest data.
        let last_row = (self.pos + self.rows - 1) % self.rows;
        for &i in &indices {
            out.obs.extend_from_slice(&self.obs[i * od..(i + 1) * od]);
            out.actions
                .extend_from_slice(&self.actions[i * ad..(i + 1) * ad]);
            let n = self.cfg.n_step.draw(rng);
            let (mut ret, mut disc, mut j, mut m) = (0.0f32, 1.0f32, i, 0);
            for k in 0..n {
                ret += disc * self.rewards[j];
                disc *= gamma;
                m = k + 1;
                if m == n || self.terminated[j] || self.truncated[j] {
                    break;
                }
                match self.next_slot(j, last_row) {
                    Some(s) => j = s,
                    None => break,
                }
            }
            out.lengths.push(m);
            out.rewards.push(ret);
            out.discounts.push(disc);
            out.next_obs
                .extend_from_slice(&self.next_obs[j * od..(j + 1) * od]);
            out.terminated.push(self.terminated[j] as u8 as f32);
            out.truncated.push(self.truncated[j] as u8 as f32);
        }
        out.indices = indices;
        out
    }

    /// The one-step transitions the rows of `batch` sum (`batch.lengths[i]` of them from
    /// `batch.indices[i]` on, as [`gather`](Self::gather) walked them), in row order; the
    /// buffer must not have changed since `batch` was gathered. Plugins that score single
    /// transitions (curiosity) score these and fold the scores into the n-step returns.
    pub fn one_step_transitions(&self, batch: &TransitionBatch) -> OneStepTransitions {
        let (od, ad) = (self.cfg.obs_dim, self.cfg.act_dim);
        let last_row = (self.pos + self.rows - 1) % self.rows;
        let mut out = OneStepTransitions::default();
        for (&i, &m) in batch.indices.iter().zip(&batch.lengths) {
            let mut j = i;
            for k in 0..m {
                out.obs.extend_from_slice(&self.obs[j * od..(j + 1) * od]);
                out.actions
                    .extend_from_slice(&self.actions[j * ad..(j + 1) * ad]);
                out.next_obs
                    .extend_from_slice(&self.next_obs[j * od..(j + 1) * od]);
                if k + 1 < m {
                    j = self
                        .next_slot(j, last_row)
                        .expect("the walk gather took is still stored");
                }
            }
        }
        out.lengths = batch.lengths.clone();
        out
    }

    /// Every stored transition in time order, `[rows][n_envs]` from the oldest row to the
    /// newest (for algorithms that compute returns over the whole buffer, such as AWR). Uses
    /// the configured n-step (AWR's buffers use 1).
    pub fn chronological(&self) -> TransitionBatch {
        let ne = self.cfg.n_envs;
        let start = if self.full { self.pos } else { 0 };
        let idx: Vec<usize> = (0..self.filled_rows())
            .flat_map(|k| {
                let row = (start + k) % self.rows;
                (0..ne).map(move |e| row * ne + e)
            })
            .collect();
        let n = idx.len();
        self.gather(idx, vec![1.0; n], 1.0, &mut Rng::seed_from(0))
    }

    /// Rows (vector steps) stored.
    pub fn rows_stored(&self) -> usize {
        self.filled_rows()
    }

    /// Sets the priorities of `indices` from |TD errors| (`p = (|δ| + eps)^α`). No-op without
    /// prioritization; non-finite errors are ignored so one bad batch cannot poison the tree.
    pub fn update_priorities(&mut self, indices: &[usize], td_errors: &[f32]) {
        let (Some(tree), Some(per)) = (&mut self.tree, self.cfg.prioritized) else {
            return;
        };
        for (&i, &d) in indices.iter().zip(td_errors) {
            if !d.is_finite() {
                continue;
            }
            let p = d.abs() as f64 + per.eps;
            self.max_priority = self.max_priority.max(p);
            tree.set(i, leaf_priority(p, per.alpha));
        }
    }

    /// The priority (`p^α`) of flat index `i`, if prioritized.
    pub fn priority(&self, i: usize) -> Option<f64> {
        self.tree.as_ref().map(|t| t.get(i))
    }

    /// The stored arrays (filled rows only) and scalars, for checkpoints.
    pub fn save(&self) -> (TensorMap, ReplayMeta) {
        let n = self.len();
        let (od, ad) = (self.cfg.obs_dim, self.cfg.act_dim);
        let mut m = TensorMap::default();
        m.insert("obs", vec![n, od], self.obs[..n * od].to_vec());
        m.insert("next_obs", vec![n, od], self.next_obs[..n * od].to_vec());
        m.insert("actions", vec![n, ad], self.actions[..n * ad].to_vec());
        m.insert("rewards", vec![n], self.rewards[..n].to_vec());
        let flags = |v: &[bool]| v[..n].iter().map(|&b| b as u8 as f32).collect::<Vec<_>>();
        m.insert("terminated", vec![n], flags(&self.terminated));
        m.insert("truncated", vec![n], flags(&self.truncated));
        if let Some(t) = &self.tree {
            m.insert(
                "priorities",
                vec![n],
                (0..n).map(|i| t.get(i) as f32).collect(),
            );
        }
        if let Some(links) = &self.links {
            // As the distance forward to the successor (small, exact in f32), −1 for none.
            let d = links[..n]
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    if s == NO_LINK {
                        -1.0
                    } else {
                        ((s + self.rows - i) % self.rows) as f32
                    }
                })
                .collect();
            m.insert("links", vec![n], d);
        }
        let meta = ReplayMeta {
            rows: self.rows,
            n_envs: self.cfg.n_envs,
            obs_dim: od,
            act_dim: ad,
            pos: self.pos,
            full: self.full,
            max_priority: self.max_priority,
            prioritized: self.tree.is_some(),
            writes: Some(self.writes),
        };
        (m, meta)
    }

    /// Restores what [`save`](Self::save) wrote into this (empty, same-shaped) buffer. Errors
    /// name `file` and the mismatch. Priorities missing from the file (saved without
    /// prioritization) start at 1, as new transitions do.
    pub fn load(
        &mut self,
        mut map: TensorMap,
        meta: &ReplayMeta,
        file: &str,
    ) -> Result<(), TensorFileError> {
        let (od, ad, ne) = (self.cfg.obs_dim, self.cfg.act_dim, self.cfg.n_envs);
        let bad = |reason: String| TensorFileError::Tensor {
            file: file.into(),
            name: "replay".into(),
            reason,
        };
        if (meta.rows, meta.n_envs, meta.obs_dim, meta.act_dim) != (self.rows, ne, od, ad) {
            return Err(bad(format!(
                "buffer of {} rows × {} envs, obs width {}, action width {}; this run expects {} × {}, {}, {}",
                meta.rows, meta.n_envs, meta.obs_dim, meta.act_dim, self.rows, ne, od, ad
            )));
        }
        if meta.pos >= self.rows {
            return Err(bad(format!("write position {} out of range", meta.pos)));
        }
        let n = if meta.full { self.rows } else { meta.pos } * ne;
        self.obs[..n * od].copy_from_slice(&map.take("obs", &[n, od], file)?);
        self.next_obs[..n * od].copy_from_slice(&map.take("next_obs", &[n, od], file)?);
        self.actions[..n * ad].copy_from_slice(&map.take("actions", &[n, ad], file)?);
        self.rewards[..n].copy_from_slice(&map.take("rewards", &[n], file)?);
        for (name, dst) in [
            ("terminated", &mut self.terminated),
            ("truncated", &mut self.truncated),
        ] {
            for (d, v) in dst.iter_mut().zip(map.take(name, &[n], file)?) {
                *d = v != 0.0;
            }
        }
        self.pos = meta.pos;
        self.full = meta.full;
        let rows = self.rows as u64;
        self.writes = match meta.writes {
            Some(w) if w % rows == meta.pos as u64 && (w >= rows) == meta.full => w,
            Some(w) => {
                return Err(bad(format!(
                    "{w} writes do not leave the write position at {} (full: {})",
                    meta.pos, meta.full
                )));
            }
            // Older checkpoints: a count with the same position (links start afresh).
            None => meta.pos as u64 + if meta.full { rows } else { 0 },
        };
        let rows_us = self.rows;
        if let Some(links) = &mut self.links {
            links.fill(NO_LINK);
            if map.0.contains_key("links") {
                for (i, d) in map.take("links", &[n], file)?.into_iter().enumerate() {
                    if d == -1.0 {
                        continue;
                    }
                    if !(d >= 1.0 && d < rows_us as f32 && d.fract() == 0.0) {
                        return Err(bad(format!(
                            "link {i} is {d}, expected -1 or a whole number in 1..{rows_us}"
                        )));
                    }
                    links[i] = (i + d as usize) % rows_us;
                }
            }
        }
        if let Some(tree) = &mut self.tree {
            let pr = if map.0.contains_key("priorities") {
                map.take("priorities", &[n], file)?
            } else {
                vec![1.0; n]
            };
            for (i, p) in pr.into_iter().enumerate() {
                if !(p.is_finite() && p > 0.0) {
                    return Err(bad(format!("priority {i} is {p}, expected > 0")));
                }
                tree.set(i, p as f64);
            }
            self.max_priority = meta.max_priority.max(1e-12);
        }
        Ok(())
    }
}

/// `p^α`, rounded to f32 so saved leaves restore bit-exactly.
fn leaf_priority(p: f64, alpha: f64) -> f64 {
    p.powf(alpha) as f32 as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(cap: usize, n_envs: usize, n_step: NStep, per: Option<PerParams>) -> Replay {
        Replay::new(ReplayConfig {
            capacity: cap,
            n_envs,
            obs_dim: 1,
            act_dim: 1,
            n_step,
            prioritized: per,
        })
    }

    fn push(b: &mut Replay, r: f32, term: bool, trunc: bool) {
        b.add_one(TransitionRef {
            obs: &[r],
            action: &[0.0],
            reward: r,
            next_obs: &[r + 1.0],
            terminated: term,
            truncated: trunc,
        });
    }

    #[test]
    fn chronological_order_after_wrapping() {
        let mut b = buf(3, 1, NStep::Fixed(1), None);
        for i in 0..5 {
            push(&mut b, i as f32, false, false);
        }
        assert_eq!(b.chronological().rewards, vec![2.0, 3.0, 4.0]);
        assert_eq!(b.rows_stored(), 3);
    }

    #[test]
    fn ring_is_fifo_and_keeps_flags_apart() {
        let mut b = buf(3, 1, NStep::Fixed(1), None);
        for i in 0..5 {
            push(&mut b, i as f32, i == 3, i == 4);
        }
        assert_eq!(b.len(), 3);
        let mut rng = Rng::seed_from(0);
        let s = b.sample(64, 0.99, 0.4, &mut rng);
        for k in 0..64 {
            let r = s.rewards[k];
            assert!(r >= 2.0, "oldest entries were overwritten");
            assert_eq!(s.obs[k], r);
            assert_eq!(s.next_obs[k], r + 1.0);
            assert_eq!(s.terminated[k], (r == 3.0) as u8 as f32);
            assert_eq!(s.truncated[k], (r == 4.0) as u8 as f32);
            assert_eq!(s.discounts[k], 0.99);
        }
    }

    #[test]
    fn one_step_transitions_are_the_steps_each_n_step_row_sums() {
        // Two envs, rows of rewards (1, 10), (2, 20), (4, 40), (8, 80); env 0's second
        // transition ends its episode. obs = reward, next_obs = reward + 1.
        let mut b = buf(8, 2, NStep::Fixed(3), None);
        for (r, term) in [(1.0, false), (2.0, true), (4.0, false), (8.0, false)] {
            b.add(
                &[r, 10.0 * r],
                &[0.0, 0.0],
                &[r, 10.0 * r],
                &[r + 1.0, 10.0 * r + 1.0],
                &[term, false],
                &[false, false],
            );
        }
        let g = 0.5f32;
        // Env 0 from row 0 (stops at its episode end), env 1 from row 0 (three steps), env 0
        // from row 3 (the newest row).
        let s = b.gather(vec![0, 1, 6], vec![1.0; 3], g, &mut Rng::seed_from(0));
        assert_eq!(s.lengths, vec![2, 3, 1]);
        let steps = b.one_step_transitions(&s);
        assert_eq!(steps.len(), 6);
        assert_eq!(steps.obs, vec![1.0, 2.0, 10.0, 20.0, 40.0, 8.0]);
        assert_eq!(steps.next_obs, vec![2.0, 3.0, 11.0, 21.0, 41.0, 9.0]);
        // Each row's last step is where its bootstrap observation comes from.
        assert_eq!(s.next_obs, vec![3.0, 41.0, 9.0]);
        // Folding the steps' rewards (here their observations) gives the rows' returns.
        assert_eq!(steps.discounted_sums(&steps.obs, g), s.rewards);
        assert_eq!(
            steps.discounted_sums(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], g),
            vec![1.5, 1.75, 1.0]
        );
    }

    #[test]
    fn n_step_stops_at_episode_ends_and_at_the_newest_row() {
        let mut b = buf(8, 1, NStep::Fixed(3), None);
        // rewards 1, 2, 4 (terminated), 8, 16
        for (i, r) in [1.0, 2.0, 4.0, 8.0, 16.0].into_iter().enumerate() {
            push(&mut b, r, i == 2, false);
        }
        let mut rng = Rng::seed_from(1);
        let g = 0.5f32;
        let s = b.gather(vec![0, 1, 2, 3, 4], vec![1.0; 5], g, &mut rng);
        assert_eq!(
            s.rewards,
            vec![1.0 + 1.0 + 1.0, 2.0 + 2.0, 4.0, 8.0 + 8.0, 16.0]
        );
        assert_eq!(s.discounts, vec![0.125, 0.25, 0.5, 0.25, 0.5]);
        assert_eq!(s.terminated, vec![1.0, 1.0, 1.0, 0.0, 0.0]);
        // next_obs of the last transition used
        assert_eq!(s.next_obs, vec![5.0, 5.0, 5.0, 17.0, 17.0]);
    }

    #[test]
    fn n_step_range_draws_each_length() {
        let mut b = buf(16, 1, NStep::Range(1, 3), None);
        for _ in 0..10 {
            push(&mut b, 1.0, false, false);
        }
        let mut rng = Rng::seed_from(2);
        let s = b.gather(vec![0; 300], vec![1.0; 300], 0.5, &mut rng);
        let mut counts = [0; 3];
        for &r in &s.rewards {
            counts[match r {
                1.0 => 0,
                1.5 => 1,
                1.75 => 2,
                _ => panic!("unexpected return {r}"),
            }] += 1;
        }
        assert!(counts.iter().all(|&c| c > 70), "{counts:?}");
    }

    #[test]
    fn sum_tree_sampling_matches_priorities_chi_square() {
        let per = PerParams {
            alpha: 1.0,
            eps: 0.0,
        };
        let k = 10;
        let mut b = buf(16, 1, NStep::Fixed(1), Some(per));
        for i in 0..k {
            push(&mut b, i as f32, false, false);
        }
        // priorities 1..=10 (minus eps 0, alpha 1)
        let idx: Vec<usize> = (0..k).collect();
        let pr: Vec<f32> = (1..=k).map(|p| p as f32).collect();
        b.update_priorities(&idx, &pr);
        let mut rng = Rng::seed_from(7);
        let mut counts = vec![0f64; k];
        let draws = 200;
        for _ in 0..draws {
            for &i in &b.sample(64, 0.99, 0.5, &mut rng).indices {
                counts[i] += 1.0;
            }
        }
        let n = (draws * 64) as f64;
        let total: f64 = pr.iter().map(|&p| p as f64).sum();
        let chi2: f64 = (0..k)
            .map(|i| {
                let e = n * pr[i] as f64 / total;
                (counts[i] - e).powi(2) / e
            })
            .sum();
        // 9 degrees of freedom: the 0.999 quantile is 27.88.
        assert!(chi2 < 27.88, "chi-square {chi2}, counts {counts:?}");
    }

    #[test]
    fn importance_weights_follow_the_per_paper() {
        let per = PerParams {
            alpha: 0.6,
            eps: 1e-6,
        };
        let mut b = buf(8, 1, NStep::Fixed(1), Some(per));
        for i in 0..4 {
            push(&mut b, i as f32, false, false);
        }
        let td = [0.5f32, 1.0, 2.0, 4.0];
        b.update_priorities(&[0, 1, 2, 3], &td);
        let beta = 0.4;
        let p: Vec<f64> = td
            .iter()
            .map(|&d| (d as f64 + 1e-6).powf(0.6) as f32 as f64)
            .collect();
        let total: f64 = p.iter().sum();
        let w: Vec<f64> = p.iter().map(|&pi| (4.0 * pi / total).powf(-beta)).collect();
        let wmax = w.iter().cloned().fold(0.0, f64::max);
        let mut rng = Rng::seed_from(3);
        let s = b.sample(256, 0.99, beta, &mut rng);
        for (&i, &got) in s.indices.iter().zip(&s.weights) {
            let want = w[i] / wmax;
            assert!(
                (got as f64 - want).abs() < 1e-6,
                "index {i}: {got} vs {want}"
            );
        }
        assert!(s.weights.contains(&1.0), "the rarest sample has weight 1");
        assert!(b.max_priority >= 4.0);
    }

    #[test]
    fn new_transitions_get_the_max_priority() {
        let per = PerParams {
            alpha: 0.5,
            eps: 0.0,
        };
        let mut b = buf(8, 1, NStep::Fixed(1), Some(per));
        push(&mut b, 0.0, false, false);
        b.update_priorities(&[0], &[9.0]);
        push(&mut b, 1.0, false, false);
        assert_eq!(b.priority(1), Some(3.0));
    }

    #[test]
    fn save_and_load_restore_the_same_samples() {
        let per = PerParams {
            alpha: 0.6,
            eps: 1e-6,
        };
        let mut b = buf(6, 2, NStep::Fixed(2), Some(per));
        for i in 0..5 {
            b.add(
                &[i as f32, -(i as f32)],
                &[1.0, 0.0],
                &[i as f32, 2.0 * i as f32],
                &[i as f32 + 1.0, 0.5],
                &[i == 2, false],
                &[false, i == 3],
            );
        }
        b.update_priorities(&[0, 3, 5], &[0.3, 2.0, 0.1]);
        let (map, meta) = b.save();
        let bytes = map.to_bytes();
        let mut c = buf(6, 2, NStep::Fixed(2), Some(per));
        c.load(
            TensorMap::from_bytes(&bytes, "replay.safetensors").unwrap(),
            &meta,
            "replay.safetensors",
        )
        .unwrap();
        let (mut r1, mut r2) = (Rng::seed_from(5), Rng::seed_from(5));
        assert_eq!(
            b.sample(32, 0.9, 0.5, &mut r1),
            c.sample(32, 0.9, 0.5, &mut r2)
        );
        let mut wrong = buf(8, 2, NStep::Fixed(2), Some(per));
        let err = wrong
            .load(
                TensorMap::from_bytes(&bytes, "replay.safetensors").unwrap(),
                &meta,
                "replay.safetensors",
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("replay.safetensors") && err.contains("rows"),
            "{err}"
        );
    }

    /// Two agents' transitions interleaved in one linked column: agent A's rewards 1, 2, 4
    /// (then its episode ends), B's 10, 20, 40 (still going). n-step sums follow each agent.
    fn interleaved(cap: usize) -> Replay {
        let mut b = buf(cap, 1, NStep::Fixed(3), None).linked();
        let t = |r: f32, term: bool| TransitionRef {
            obs: &[0.0],
            action: &[0.0],
            reward: r,
            next_obs: &[0.0],
            terminated: term,
            truncated: false,
        };
        let (mut a, mut bb) = (None, None);
        for (ra, rb) in [(1.0, 10.0), (2.0, 20.0), (4.0, 40.0)] {
            a = Some(b.add_after(t(ra, ra == 4.0), a));
            bb = Some(b.add_after(t(rb, false), bb));
        }
        b
    }

    #[test]
    fn linked_n_step_returns_follow_each_source() {
        let b = interleaved(8);
        let g = 0.5f32;
        let s = b.gather((0..6).collect(), vec![1.0; 6], g, &mut Rng::seed_from(0));
        // Slots: A1 B10 A2 B20 A4 B40. A stops at its terminal step, B at its newest one.
        assert_eq!(
            s.rewards,
            vec![
                1.0 + 1.0 + 1.0,
                10.0 + 10.0 + 10.0,
                2.0 + 2.0,
                20.0 + 20.0,
                4.0,
                40.0
            ]
        );
        assert_eq!(s.discounts, vec![0.125, 0.125, 0.25, 0.25, 0.5, 0.5]);
        assert_eq!(s.terminated, vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
        // Unlinked, the same rows would have been summed across the two agents.
        let mut plain = buf(8, 1, NStep::Fixed(3), None);
        for r in [1.0, 10.0, 2.0] {
            push(&mut plain, r, false, false);
        }
        let p = plain.gather(vec![0], vec![1.0], g, &mut Rng::seed_from(0));
        assert_eq!(p.rewards, vec![1.0 + 5.0 + 0.5]);
    }

    #[test]
    fn linked_buffer_drops_links_to_overwritten_slots_and_round_trips() {
        // Capacity 4: A1 B10 are overwritten by A4 B40; a link into a reused slot is not set.
        let mut b = interleaved(4);
        let g = 0.5f32;
        let s = b.gather((0..4).collect(), vec![1.0; 4], g, &mut Rng::seed_from(0));
        // Slots 0..4 now hold A4 B40 A2 B20.
        assert_eq!(s.rewards, vec![4.0, 40.0, 2.0 + 2.0, 20.0 + 20.0]);
        // A successor named after the ring came round to it is ignored.
        let stale = b.add_after(
            TransitionRef {
                obs: &[0.0],
                action: &[0.0],
                reward: 7.0,
                next_obs: &[0.0],
                terminated: false,
                truncated: false,
            },
            Some(0),
        );
        assert_eq!(stale, 6);
        let (map, meta) = b.save();
        let bytes = map.to_bytes();
        let mut c = buf(4, 1, NStep::Fixed(3), None).linked();
        c.load(
            TensorMap::from_bytes(&bytes, "replay.safetensors").unwrap(),
            &meta,
            "replay.safetensors",
        )
        .unwrap();
        let idx: Vec<usize> = (0..4).collect();
        assert_eq!(
            b.gather(idx.clone(), vec![1.0; 4], g, &mut Rng::seed_from(0)),
            c.gather(idx, vec![1.0; 4], g, &mut Rng::seed_from(0))
        );
        assert_eq!(c.writes, 7);
        let mut bad = map.clone();
        bad.insert("links", vec![4], vec![0.5, -1.0, -1.0, -1.0]);
        let err = buf(4, 1, NStep::Fixed(3), None)
            .linked()
            .load(bad, &meta, "replay.safetensors")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("replay.safetensors") && err.contains("link 0"),
            "{err}"
        );
    }
}
