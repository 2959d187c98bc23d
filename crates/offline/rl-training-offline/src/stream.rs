//! Datasets opened by file type, and batches streamed from them through a bounded shuffle
//! window, so a dataset larger than memory trains: chunks (Parquet row groups; an NPZ file
//! or in-memory data is one chunk) are read in file order from a random starting chunk each
//! epoch, episodes cut by a chunk boundary are joined before their returns are computed, and
//! each batch takes distinct random rows out of the window, which refills from the stream.
//! Every row is drawn once per pass over the data.

use crate::dataset::{DatasetError, DatasetSpec, Transitions, discounted_returns};
use crate::npz_io::read_npz;
use crate::parquet_io::ParquetDataset;
use rl_training_core::{Rng, Space};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Source {
    Parquet(Box<ParquetDataset>),
    Memory(Arc<Transitions>),
}

impl Source {
    fn num_chunks(&self) -> usize {
        match self {
            Source::Parquet(p) => p.num_row_groups(),
            Source::Memory(_) => 1,
        }
    }
    fn num_rows(&self) -> usize {
        match self {
            Source::Parquet(p) => p.num_rows(),
            Source::Memory(d) => d.len(),
        }
    }
}

/// One file of a dataset.
#[derive(Debug, Clone)]
struct Part {
    source: Source,
    /// What this file declares.
    spec: DatasetSpec,
    file: String,
    /// Index of the part's first chunk in the dataset's chunk numbering.
    first_chunk: usize,
}

/// A dataset: one or more files read in order, each a Parquet file read row group by row
/// group or rows in memory (NPZ files are read whole). Chunks are numbered across the files;
/// an episode never continues from one file into the next.
#[derive(Debug, Clone)]
pub struct Dataset {
    parts: Vec<Part>,
    spec: DatasetSpec,
    file: String,
}

fn open_source(path: &Path) -> Result<(Source, DatasetSpec), DatasetError> {
    let file = path.display().to_string();
    match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => {
            let p = ParquetDataset::open(path)?;
            let spec = p.spec().clone();
            Ok((Source::Parquet(Box::new(p)), spec))
        }
        Some("npz") => {
            let (d, spec) = read_npz(path)?;
            Ok((Source::Memory(Arc::new(d)), spec))
        }
        _ => Err(DatasetError::corrupt(
            &file,
            None,
            "unknown dataset format: expected a .parquet or .npz file",
        )),
    }
}

impl Dataset {
    /// Opens `path` by its extension: `.parquet` (streamed) or `.npz` (read whole).
    pub fn open(path: &Path) -> Result<Self, DatasetError> {
        Self::open_all(&[path.to_path_buf()])
    }

    /// Opens several files as one dataset, read in the order given. They must agree on the
    /// observation and action shapes and on discrete vs real actions (the error names the
    /// first file that differs); the dataset has rewards only if every file has them.
    pub fn open_all(paths: &[PathBuf]) -> Result<Self, DatasetError> {
        let first = paths.first().ok_or_else(|| {
            DatasetError::corrupt("offline_data.input", None, "no dataset files given")
        })?;
        let (source, first_spec) = open_source(first)?;
        let mut spec = first_spec.clone();
        let mut parts = vec![Part {
            spec: first_spec,
            first_chunk: 0,
            file: first.display().to_string(),
            source,
        }];
        for p in &paths[1..] {
            let (source, s) = open_source(p)?;
            let file = p.display().to_string();
            let differs = |what: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
                DatasetError::corrupt(
                    &file,
                    None,
                    format!("{what} {b:?} differs from {a:?} in {}", parts[0].file),
                )
            };
            if s.obs_shape != spec.obs_shape {
                return Err(differs("observation shape", &spec.obs_shape, &s.obs_shape));
            }
            if s.act_shape != spec.act_shape {
                return Err(differs("action shape", &spec.act_shape, &s.act_shape));
            }
            if s.discrete_actions != spec.discrete_actions {
                return Err(differs(
                    "discrete actions",
                    &spec.discrete_actions,
                    &s.discrete_actions,
                ));
            }
            // Spaces recorded by one file but not another stay; conflicting ones are dropped
            // here and checked per file against the env in `fit`.
            if spec.observation_space != s.observation_space {
                spec.observation_space = None;
            }
            if spec.action_space != s.action_space {
                spec.action_space = None;
            }
            spec.has_rewards &= s.has_rewards;
            let last = parts.last().expect("one part");
            let first_chunk = last.first_chunk + last.source.num_chunks();
            parts.push(Part {
                source,
                spec: s,
                file,
                first_chunk,
            });
        }
        let file = parts
            .iter()
            .map(|p| p.file.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Self { parts, spec, file })
    }

    /// Rows held in memory (`name` for messages).
    pub fn from_memory(data: Transitions, spec: DatasetSpec, name: &str) -> Self {
        Self {
            parts: vec![Part {
                source: Source::Memory(Arc::new(data)),
                spec: spec.clone(),
                file: name.to_string(),
                first_chunk: 0,
            }],
            spec,
            file: name.to_string(),
        }
    }

    /// What the data declares.
    pub fn spec(&self) -> &DatasetSpec {
        &self.spec
    }

    /// The file (or name); the files joined by commas for a dataset of several.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The files, in reading order.
    pub fn files(&self) -> Vec<&str> {
        self.parts.iter().map(|p| p.file.as_str()).collect()
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.source.num_rows())
            .fold(0usize, usize::saturating_add)
    }

    /// Checks the data fits an env with these spaces (`env`: its id) and adopts the spaces,
    /// so reading also checks action values against them.
    pub fn fit(&mut self, env: &str, obs: &Space, act: &Space) -> Result<(), DatasetError> {
        for part in &self.parts {
            part.spec.check_fits(&part.file, env, obs, act)?;
            if let Source::Memory(d) = &part.source {
                d.check_values(&part.file, Some(act))?;
            }
        }
        self.spec.observation_space = Some(obs.clone());
        self.spec.action_space = Some(act.clone());
        Ok(())
    }

    /// Number of chunks a pass reads.
    pub fn num_chunks(&self) -> usize {
        self.parts.iter().map(|p| p.source.num_chunks()).sum()
    }

    /// The part holding chunk `i` and the chunk's index within it.
    fn locate(&self, i: usize) -> Option<(&Part, usize)> {
        self.parts
            .iter()
            .rev()
            .find(|p| p.first_chunk <= i)
            .filter(|p| i - p.first_chunk < p.source.num_chunks())
            .map(|p| (p, i - p.first_chunk))
    }

    /// Whether chunk `i` directly follows chunk `i − 1` in the same file (so an episode the
    /// earlier chunk cut can continue in it).
    pub fn follows(&self, i: usize) -> bool {
        i > 0 && self.locate(i).is_some_and(|(_, k)| k > 0)
    }

    /// Chunk `i`: row group `k` of the Parquet file holding it, or a whole in-memory file.
    pub fn chunk(&self, i: usize) -> Result<Transitions, DatasetError> {
        let (part, k) = self
            .locate(i)
            .ok_or_else(|| DatasetError::corrupt(&self.file, None, format!("no chunk {i}")))?;
        match &part.source {
            Source::Parquet(p) => {
                let d = p.read_row_group(k)?;
                if let Some(a) = &self.spec.action_space {
                    d.check_values(&part.file, Some(a))
                        .map_err(|e| DatasetError::corrupt(&part.file, Some(k), e.to_string()))?;
                }
                Ok(d)
            }
            Source::Memory(d) => Ok((**d).clone()),
        }
    }

    /// All rows in memory.
    pub fn read_all(&self) -> Result<Transitions, DatasetError> {
        let mut d = Transitions::new(self.spec.obs_dim(), self.spec.act_dim());
        for i in 0..self.num_chunks() {
            d.extend(&self.chunk(i)?);
        }
        Ok(d)
    }
}

/// The dataset files named by `offline_data.input`: each entry is a file, a directory (its
/// `.parquet` and `.npz` files, by name) or a glob pattern (`data/*.parquet`, matches by
/// name); the order of the entries is kept. An entry that names nothing is an error.
pub fn resolve_inputs(entries: &[String]) -> Result<Vec<PathBuf>, DatasetError> {
    let is_data = |p: &Path| {
        p.is_file()
            && matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("parquet" | "npz")
            )
    };
    let mut out = Vec::new();
    for e in entries {
        let p = Path::new(e);
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|err| DatasetError::io(e, err))?
                .filter_map(|d| d.ok().map(|d| d.path()))
                .filter(|f| is_data(f))
                .collect();
            if files.is_empty() {
                return Err(DatasetError::corrupt(
                    e,
                    None,
                    "a directory without .parquet or .npz files",
                ));
            }
            files.sort();
            out.extend(files);
        } else if e.contains(['*', '?', '[']) && !p.exists() {
            let paths = glob::glob(e).map_err(|err| {
                DatasetError::corrupt(e, None, format!("not a valid glob pattern: {err}"))
            })?;
            let mut files = Vec::new();
            for f in paths {
                let f = f.map_err(|err| DatasetError::corrupt(e, None, err.to_string()))?;
                if is_data(&f) {
                    files.push(f);
                }
            }
            if files.is_empty() {
                return Err(DatasetError::corrupt(
                    e,
                    None,
                    "the pattern matches no .parquet or .npz file",
                ));
            }
            files.sort();
            out.extend(files);
        } else {
            // A plain path; opening it reports a missing file with its name.
            out.push(p.to_path_buf());
        }
    }
    Ok(out)
}

/// A training batch: rows and, when asked for, their discounted returns.
#[derive(Debug, Clone, Default)]
pub struct OfflineBatch {
    /// The rows.
    pub data: Transitions,
    /// Discounted rewards-to-go of each row within its episode (empty when not asked for).
    pub returns: Vec<f32>,
}

/// Streams shuffled batches from a [`Dataset`] through a window of at most `window` rows
/// (plus one chunk being added). The stream owns its RNG and remembers how many batches of
/// which size it drew, so a checkpoint restores it by replaying the draws
/// ([`fast_forward`](Self::fast_forward)) instead of storing the window.
pub struct BatchStream {
    dataset: Dataset,
    rng: Rng,
    /// Batches drawn so far, run-length encoded: `(batch size, count)`.
    draws: Vec<(usize, u64)>,
    window: usize,
    gamma: Option<f32>,
    buf: Transitions,
    buf_returns: Vec<f32>,
    /// Rows of an episode the last chunk cut, waiting for the next chunk.
    pending: Transitions,
    /// The leading rows of a pass's first chunk when they continue an episode from the
    /// chunk before it, which the pass reads last.
    head: Transitions,
    head_open: bool,
    order: Vec<usize>,
    next: usize,
    epochs: u64,
    /// Rows admitted since the pass started.
    epoch_rows: usize,
}

impl BatchStream {
    /// A stream of `dataset` with a shuffle window of `window` rows, drawing with `rng`;
    /// `returns_gamma`: compute discounted returns with this γ.
    pub fn new(dataset: Dataset, window: usize, returns_gamma: Option<f32>, rng: Rng) -> Self {
        let (od, ad) = (dataset.spec.obs_dim(), dataset.spec.act_dim());
        Self {
            dataset,
            rng,
            draws: Vec::new(),
            window: window.max(1),
            gamma: returns_gamma,
            buf: Transitions::new(od, ad),
            buf_returns: Vec::new(),
            pending: Transitions::new(od, ad),
            head: Transitions::new(od, ad),
            head_open: false,
            order: Vec::new(),
            next: 0,
            epochs: 0,
            epoch_rows: 0,
        }
    }

    /// The dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// Passes over the data started so far.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Rows in the window now.
    pub fn window_rows(&self) -> usize {
        self.buf.len()
    }

    /// The batches drawn so far, `(batch size, count)` runs: what
    /// [`fast_forward`](Self::fast_forward) replays.
    pub fn draws(&self) -> &[(usize, u64)] {
        &self.draws
    }

    /// Replays `draws` on a fresh stream (same dataset, window and RNG seed), leaving it
    /// where the stream that made them was.
    pub fn fast_forward(&mut self, draws: &[(usize, u64)]) -> Result<(), DatasetError> {
        for &(n, count) in draws {
            for _ in 0..count {
                self.next_batch(n)?;
            }
        }
        Ok(())
    }

    fn start_epoch(&mut self) {
        let n = self.dataset.num_chunks();
        let s = if n > 0 {
            self.rng.below(n as u64) as usize
        } else {
            0
        };
        self.order = (0..n).map(|i| (s + i) % n).collect();
        self.next = 0;
        self.epochs += 1;
        self.epoch_rows = 0;
    }

    /// Moves complete episodes of `rows` into the window; with `keep_tail`, the trailing
    /// rows of an unfinished episode wait in `pending`.
    fn admit(&mut self, rows: Transitions, keep_tail: bool) {
        let n = rows.len();
        let cut = if keep_tail {
            // Rows after the last true episode end.
            (0..n)
                .rev()
                .find(|&i| rows.terminated[i] || rows.truncated[i])
                .map_or(0, |i| i + 1)
        } else {
            n
        };
        if cut < n {
            self.pending = rows.slice(cut..n);
        }
        if cut == 0 {
            return;
        }
        let done = if cut < n { rows.slice(0..cut) } else { rows };
        self.epoch_rows += done.len();
        if let Some(g) = self.gamma {
            self.buf_returns.extend(discounted_returns(&done, g));
        }
        self.buf.extend(&done);
    }

    fn pull(&mut self) -> Result<bool, DatasetError> {
        if self.next >= self.order.len() {
            return Ok(false);
        }
        let i = self.order[self.next];
        self.next += 1;
        let mut chunk = self.dataset.chunk(i)?;
        let first_of_pass = self.next == 1;
        let last_of_pass = self.next >= self.order.len();
        let (od, ad) = (chunk.obs_dim, chunk.act_dim);
        if first_of_pass && self.dataset.follows(i) && chunk.t.first().is_some_and(|&t| t > 0) {
            self.head_open = true;
        }
        // The head runs to the first true episode end, across chunks if need be.
        if self.head_open {
            let n = chunk.len();
            let cut = (0..n)
                .find(|&k| chunk.terminated[k] || chunk.truncated[k])
                .map_or(n, |k| k + 1);
            self.head_open = cut == n && !last_of_pass;
            self.head.extend(&chunk.slice(0..cut));
            chunk = chunk.slice(cut..n);
        }
        // The pending fragment continues only into the chunk that follows it in the file.
        let pending = std::mem::replace(&mut self.pending, Transitions::new(od, ad));
        let continues = !pending.is_empty()
            && !chunk.is_empty()
            && pending.eps_id.last() == chunk.eps_id.first()
            && self.dataset.follows(i);
        let mut rows = if continues {
            pending
        } else {
            if !pending.is_empty() {
                self.admit(pending, false);
            }
            Transitions::new(od, ad)
        };
        rows.extend(&chunk);
        if last_of_pass && !self.head.is_empty() {
            let head = std::mem::replace(&mut self.head, Transitions::new(od, ad));
            if rows.eps_id.last() == head.eps_id.first() {
                rows.extend(&head);
            } else {
                self.admit(head, false);
            }
        }
        let next_follows =
            !last_of_pass && self.order[self.next] == i + 1 && self.dataset.follows(i + 1);
        self.admit(rows, next_follows);
        Ok(true)
    }

    /// The next batch of `n` distinct rows from the window.
    pub fn next_batch(&mut self, n: usize) -> Result<OfflineBatch, DatasetError> {
        if self.epochs == 0 {
            self.start_epoch();
        }
        loop {
            while self.buf.len() < self.window.max(n) && self.pull()? {}
            if self.buf.len() >= n {
                break;
            }
            // The pass is over: flush the last fragment, then start the next pass (a dataset
            // smaller than a batch then holds some rows twice in the window).
            if !self.pending.is_empty() {
                let p = std::mem::take(&mut self.pending);
                self.admit(p, false);
                continue;
            }
            if self.epoch_rows == 0 {
                return Err(DatasetError::corrupt(
                    &self.dataset.file,
                    None,
                    "no rows to train on",
                ));
            }
            self.start_epoch();
        }
        match self.draws.last_mut() {
            Some((size, count)) if *size == n => *count += 1,
            _ => self.draws.push((n, 1)),
        }
        let rng = &mut self.rng;
        let m = n.min(self.buf.len());
        // Partial Fisher–Yates over the window's row indices: m distinct rows.
        let len = self.buf.len();
        let mut idx: Vec<usize> = (0..len).collect();
        for k in 0..m {
            let j = k + rng.below((len - k) as u64) as usize;
            idx.swap(k, j);
        }
        let mut picked = idx[..m].to_vec();
        let batch = take_rows(&self.buf, &picked);
        let returns = if self.gamma.is_some() {
            picked.iter().map(|&i| self.buf_returns[i]).collect()
        } else {
            Vec::new()
        };
        picked.sort_unstable_by(|a, b| b.cmp(a));
        for &i in &picked {
            swap_remove_row(&mut self.buf, i);
            if self.gamma.is_some() {
                self.buf_returns.swap_remove(i);
            }
        }
        Ok(OfflineBatch {
            data: batch,
            returns,
        })
    }
}

/// Rows `idx` of `d`, in that order.
pub fn take_rows(d: &Transitions, idx: &[usize]) -> Transitions {
    let (od, ad) = (d.obs_dim, d.act_dim);
    let rows = |v: &[f32], w: usize| -> Vec<f32> {
        idx.iter()
            .flat_map(|&i| v[i * w..(i + 1) * w].iter().copied())
            .collect()
    };
    Transitions {
        obs_dim: od,
        act_dim: ad,
        eps_id: idx.iter().map(|&i| d.eps_id[i]).collect(),
        t: idx.iter().map(|&i| d.t[i]).collect(),
        obs: rows(&d.obs, od),
        actions: rows(&d.actions, ad),
        rewards: idx.iter().map(|&i| d.rewards[i]).collect(),
        terminated: idx.iter().map(|&i| d.terminated[i]).collect(),
        truncated: idx.iter().map(|&i| d.truncated[i]).collect(),
        new_obs: rows(&d.new_obs, od),
        action_logp: d
            .action_logp
            .as_ref()
            .map(|l| idx.iter().map(|&i| l[i]).collect()),
    }
}

/// Removes row `i` by moving the last row into its place.
fn swap_remove_row(d: &mut Transitions, i: usize) {
    let last = d.len() - 1;
    let (od, ad) = (d.obs_dim, d.act_dim);
    let mv = |v: &mut Vec<f32>, w: usize| {
        if i != last {
            v.copy_within(last * w..(last + 1) * w, i * w);
        }
        v.truncate(last * w);
    };
    mv(&mut d.obs, od);
    mv(&mut d.new_obs, od);
    mv(&mut d.actions, ad);
    d.eps_id.swap_remove(i);
    d.t.swap_remove(i);
    d.rewards.swap_remove(i);
    d.terminated.swap_remove(i);
    d.truncated.swap_remove(i);
    if let Some(l) = &mut d.action_logp {
        l.swap_remove(i);
    }
}
