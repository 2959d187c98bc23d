//! Offline transitions in columns (one row per env step), what a dataset file declares about
//! its spaces, and the checks that data fits an env.

use rl_training_core::Space;
use thiserror::Error;

/// Errors reading, writing or checking a dataset. Each names the file, and where it applies
/// the row group, column and row.
#[derive(Debug, Error)]
pub enum DatasetError {
    /// The file could not be opened, read or written.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file is truncated, corrupt or not in the expected format.
    #[error("{file}{}: {reason}", .row_group.map(|g| format!(" (row group {g})")).unwrap_or_default())]
    Corrupt {
        /// The file.
        file: String,
        /// The row group being read, for Parquet.
        row_group: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// A column is missing or holds values of the wrong type or shape.
    #[error("{file}: column {column}: {reason}")]
    Column {
        /// The file.
        file: String,
        /// The column (Parquet) or array (NPZ).
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// The data does not fit the env or config.
    #[error("{file}: column {column} has shape {found:?} per row, the {what} expects {expected:?}")]
    Shape {
        /// The file.
        file: String,
        /// The column.
        column: String,
        /// Per-row shape in the file.
        found: Vec<usize>,
        /// Per-row shape the env (or config) expects.
        expected: Vec<usize>,
        /// What expects it (`env CartPole-v1 observation space Box(4)`…).
        what: String,
    },
}

impl DatasetError {
    /// A [`DatasetError::Column`] for `file`.
    pub fn column(file: &str, column: &str, reason: impl Into<String>) -> Self {
        Self::Column {
            file: file.to_string(),
            column: column.to_string(),
            reason: reason.into(),
        }
    }

    /// A [`DatasetError::Corrupt`] for `file`.
    pub fn corrupt(file: &str, row_group: Option<usize>, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            file: file.to_string(),
            row_group,
            reason: reason.into(),
        }
    }

    /// A [`DatasetError::Io`] for `file`.
    pub fn io(file: &str, source: std::io::Error) -> Self {
        Self::Io {
            file: file.to_string(),
            source,
        }
    }
}

impl From<DatasetError> for rl_training_core::RlError {
    fn from(e: DatasetError) -> Self {
        rl_training_core::RlError::Other(e.to_string())
    }
}

/// What a dataset declares: per-row shapes of observations and actions, whether actions are
/// discrete indices, and the spaces when the writer recorded them.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetSpec {
    /// Per-row observation shape (`[4]` for CartPole).
    pub obs_shape: Vec<usize>,
    /// Per-row action shape (`[]` for one discrete action, `[1]` for Pendulum).
    pub act_shape: Vec<usize>,
    /// Actions are integers (discrete).
    pub discrete_actions: bool,
    /// The observation space, when the file records it.
    pub observation_space: Option<Space>,
    /// The action space, when the file records it.
    pub action_space: Option<Space>,
    /// The file has rewards (imitation data may not: its rewards read as 0).
    pub has_rewards: bool,
}

impl DatasetSpec {
    /// The spec of data from an env with these spaces.
    pub fn from_spaces(obs: &Space, act: &Space) -> Self {
        Self {
            obs_shape: space_shape(obs),
            act_shape: space_shape(act),
            discrete_actions: matches!(act, Space::Discrete { .. } | Space::MultiDiscrete { .. }),
            observation_space: Some(obs.clone()),
            action_space: Some(act.clone()),
            has_rewards: true,
        }
    }

    /// Values per observation row.
    pub fn obs_dim(&self) -> usize {
        self.obs_shape.iter().product()
    }

    /// Values per action row.
    pub fn act_dim(&self) -> usize {
        self.act_shape.iter().product()
    }

    /// Checks that data of this spec fits an env with spaces `obs` and `act` (`env`: its id,
    /// for the message): shapes first, then recorded spaces.
    pub fn check_fits(
        &self,
        file: &str,
        env: &str,
        obs: &Space,
        act: &Space,
    ) -> Result<(), DatasetError> {
        let want = DatasetSpec::from_spaces(obs, act);
        for (column, found, expected, space, recorded) in [
            (
                "obs",
                &self.obs_shape,
                &want.obs_shape,
                obs,
                &self.observation_space,
            ),
            (
                "actions",
                &self.act_shape,
                &want.act_shape,
                act,
                &self.action_space,
            ),
        ] {
            let what = format!(
                "env {env} {} space {}",
                if column == "obs" {
                    "observation"
                } else {
                    "action"
                },
                space.describe()
            );
            if found != expected {
                return Err(DatasetError::Shape {
                    file: file.to_string(),
                    column: column.to_string(),
                    found: found.clone(),
                    expected: expected.clone(),
                    what,
                });
            }
            if let Some(r) = recorded
                && r != space
            {
                return Err(DatasetError::column(
                    file,
                    column,
                    format!("recorded in space {}, the {what}", r.describe()),
                ));
            }
        }
        if self.discrete_actions != want.discrete_actions {
            return Err(DatasetError::column(
                file,
                "actions",
                format!(
                    "holds {} actions, env {env} has action space {}",
                    if self.discrete_actions {
                        "integer"
                    } else {
                        "real"
                    },
                    act.describe()
                ),
            ));
        }
        Ok(())
    }
}

/// Per-row shape of a space's raw encoding: a Box's shape, `[]` for one discrete value,
/// `[raw_dim]` otherwise.
pub fn space_shape(space: &Space) -> Vec<usize> {
    match space {
        Space::Box { shape, .. } => shape.clone(),
        Space::Discrete { .. } => Vec::new(),
        other => vec![other.raw_dim()],
    }
}

/// Env steps in columns, rows ordered by episode then step (raw encodings: a discrete action
/// is its value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transitions {
    /// Values per observation.
    pub obs_dim: usize,
    /// Values per action.
    pub act_dim: usize,
    /// Episode of each row.
    pub eps_id: Vec<i64>,
    /// Step of each row within its episode.
    pub t: Vec<i64>,
    /// `[N × obs_dim]`.
    pub obs: Vec<f32>,
    /// `[N × act_dim]`.
    pub actions: Vec<f32>,
    /// `[N]`.
    pub rewards: Vec<f32>,
    /// `[N]` the episode ended in a terminal state.
    pub terminated: Vec<bool>,
    /// `[N]` the episode was cut short (time limit).
    pub truncated: Vec<bool>,
    /// `[N × obs_dim]` the observation after the step (the true final one at episode ends).
    pub new_obs: Vec<f32>,
    /// `[N]` log-probability of the action under the behaviour policy, when recorded.
    pub action_logp: Option<Vec<f32>>,
}

impl Transitions {
    /// No rows, with these widths.
    pub fn new(obs_dim: usize, act_dim: usize) -> Self {
        Self {
            obs_dim,
            act_dim,
            ..Self::default()
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Appends one step.
    pub fn push(&mut self, step: Step<'_>) {
        self.eps_id.push(step.eps_id);
        self.t.push(step.t);
        self.obs.extend_from_slice(step.obs);
        self.actions.extend_from_slice(step.action);
        self.rewards.push(step.reward);
        self.terminated.push(step.terminated);
        self.truncated.push(step.truncated);
        self.new_obs.extend_from_slice(step.new_obs);
        if let Some(l) = step.action_logp {
            self.action_logp.get_or_insert_with(Vec::new).push(l);
        }
    }

    /// Appends all rows of `other` (same widths).
    pub fn extend(&mut self, other: &Transitions) {
        debug_assert_eq!((self.obs_dim, self.act_dim), (other.obs_dim, other.act_dim));
        let had_rows = !self.is_empty();
        self.eps_id.extend_from_slice(&other.eps_id);
        self.t.extend_from_slice(&other.t);
        self.obs.extend_from_slice(&other.obs);
        self.actions.extend_from_slice(&other.actions);
        self.rewards.extend_from_slice(&other.rewards);
        self.terminated.extend_from_slice(&other.terminated);
        self.truncated.extend_from_slice(&other.truncated);
        self.new_obs.extend_from_slice(&other.new_obs);
        self.action_logp = match (self.action_logp.take(), &other.action_logp) {
            (Some(mut a), Some(b)) => {
                a.extend_from_slice(b);
                Some(a)
            }
            (None, Some(b)) if !had_rows => Some(b.clone()),
            // A column only some parts have is dropped rather than misaligned.
            _ => None,
        };
    }

    /// Rows `range` as a new table.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Transitions {
        let (od, ad) = (self.obs_dim, self.act_dim);
        let r = range.clone();
        Transitions {
            obs_dim: od,
            act_dim: ad,
            eps_id: self.eps_id[r.clone()].to_vec(),
            t: self.t[r.clone()].to_vec(),
            obs: self.obs[r.start * od..r.end * od].to_vec(),
            actions: self.actions[r.start * ad..r.end * ad].to_vec(),
            rewards: self.rewards[r.clone()].to_vec(),
            terminated: self.terminated[r.clone()].to_vec(),
            truncated: self.truncated[r.clone()].to_vec(),
            new_obs: self.new_obs[r.start * od..r.end * od].to_vec(),
            action_logp: self.action_logp.as_ref().map(|l| l[range].to_vec()),
        }
    }

    /// Indices one past each episode's last row: an episode ends where it terminates, is
    /// truncated or the next row has another `eps_id`; the last row always closes one.
    pub fn episode_ends(&self) -> Vec<usize> {
        let n = self.len();
        (0..n)
            .filter(|&i| {
                self.terminated[i]
                    || self.truncated[i]
                    || i + 1 == n
                    || self.eps_id[i + 1] != self.eps_id[i]
            })
            .map(|i| i + 1)
            .collect()
    }

    /// Number of distinct episodes (by [`episode_ends`](Self::episode_ends)).
    pub fn num_episodes(&self) -> usize {
        self.episode_ends().len()
    }

    /// Checks values: every float finite, discrete actions whole numbers within `act` when
    /// given. Errors name the file, column and row.
    pub fn check_values(&self, file: &str, act: Option<&Space>) -> Result<(), DatasetError> {
        let finite =
            |name: &str, v: &[f32], width: usize| match v.iter().position(|x| !x.is_finite()) {
                Some(i) => Err(DatasetError::column(
                    file,
                    name,
                    format!("row {} holds {}", i / width.max(1), v[i]),
                )),
                None => Ok(()),
            };
        finite("obs", &self.obs, self.obs_dim)?;
        finite("new_obs", &self.new_obs, self.obs_dim)?;
        finite("actions", &self.actions, self.act_dim)?;
        finite("rewards", &self.rewards, 1)?;
        if let Some(l) = &self.action_logp {
            finite("action_logp", l, 1)?;
        }
        if let Some(space) = act {
            let ad = self.act_dim.max(1);
            for (row, a) in self.actions.chunks(ad).enumerate() {
                if let Err(why) = space.check(a) {
                    return Err(DatasetError::column(
                        file,
                        "actions",
                        format!("row {row}: {why}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One env step, borrowed, for [`Transitions::push`].
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// Episode.
    pub eps_id: i64,
    /// Step within the episode.
    pub t: i64,
    /// Observation the action was taken in.
    pub obs: &'a [f32],
    /// The action (raw).
    pub action: &'a [f32],
    /// Reward.
    pub reward: f32,
    /// Ended in a terminal state.
    pub terminated: bool,
    /// Cut short.
    pub truncated: bool,
    /// Observation after the step.
    pub new_obs: &'a [f32],
    /// Behaviour log-probability of the action.
    pub action_logp: Option<f32>,
}

/// Discounted rewards-to-go within each episode fragment (ends from
/// [`Transitions::episode_ends`]); nothing is bootstrapped past a fragment's end.
pub fn discounted_returns(data: &Transitions, gamma: f32) -> Vec<f32> {
    let mut out = vec![0.0; data.len()];
    let mut start = 0;
    for end in data.episode_ends() {
        let mut g = 0.0;
        for i in (start..end).rev() {
            g = data.rewards[i] + gamma * g;
            out[i] = g;
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_episodes() -> Transitions {
        let mut d = Transitions::new(1, 1);
        for (e, t, r, term, trunc) in [
            (0, 0, 1.0, false, false),
            (0, 1, 1.0, true, false),
            (1, 0, 2.0, false, false),
            (1, 1, 3.0, false, true),
            (2, 0, 5.0, false, false),
        ] {
            d.push(Step {
                eps_id: e,
                t,
                obs: &[t as f32],
                action: &[0.0],
                reward: r,
                terminated: term,
                truncated: trunc,
                new_obs: &[t as f32 + 1.0],
                action_logp: None,
            });
        }
        d
    }

    #[test]
    fn episode_ends_and_returns() {
        let d = two_episodes();
        assert_eq!(d.episode_ends(), vec![2, 4, 5]);
        let g = discounted_returns(&d, 0.5);
        assert_eq!(g, vec![1.5, 1.0, 3.5, 3.0, 5.0]);
    }

    #[test]
    fn slice_and_extend_round_trip() {
        let d = two_episodes();
        let mut a = d.slice(0..2);
        a.extend(&d.slice(2..5));
        assert_eq!(a, d);
    }

    #[test]
    fn spec_checks_name_the_column_and_both_shapes() {
        let obs = Space::uniform_box(-1.0, 1.0, &[4]);
        let spec = DatasetSpec {
            obs_shape: vec![3],
            act_shape: vec![],
            discrete_actions: true,
            observation_space: None,
            action_space: None,
            has_rewards: true,
        };
        let e = spec
            .check_fits("d.parquet", "CartPole-v1", &obs, &Space::discrete(2))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("d.parquet") && e.contains("obs") && e.contains("[3]") && e.contains("[4]"),
            "{e}"
        );
        let spec = DatasetSpec {
            obs_shape: vec![4],
            ..spec
        };
        spec.check_fits("d.parquet", "CartPole-v1", &obs, &Space::discrete(2))
            .unwrap();
        let e = spec
            .check_fits("d.parquet", "X", &obs, &Space::uniform_box(-2.0, 2.0, &[1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("actions") && e.contains("[1]"), "{e}");
    }

    #[test]
    fn bad_values_name_column_and_row() {
        let mut d = two_episodes();
        d.rewards[3] = f32::NAN;
        let e = d.check_values("f.npz", None).unwrap_err().to_string();
        assert!(
            e.contains("f.npz") && e.contains("rewards") && e.contains("row 3"),
            "{e}"
        );
        let mut d = two_episodes();
        d.actions[1] = 7.0;
        let e = d
            .check_values("f.npz", Some(&Space::discrete(2)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("actions") && e.contains("row 1"), "{e}");
    }
}
