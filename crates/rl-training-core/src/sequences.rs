//! Sequences for recurrent training (truncated backpropagation through time): a rollout laid
//! out `[step][env]` is cut, env by env, into runs of at most `max_len` consecutive steps that
//! never cross an episode start, and runs are padded to `max_len` with a mask, so a minibatch
//! of whole sequences is one `[n_seq, max_len, …]` tensor. A sequence starts either at an
//! episode start (zero recurrent state) or where the previous one was cut (the state stored
//! at collection time for that step).

use crate::Rng;

/// Steps `start .. start + len` of env `env` in a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequence {
    /// The env (column of the rollout).
    pub env: usize,
    /// First step.
    pub start: usize,
    /// Number of real steps (≤ the padded length).
    pub len: usize,
}

impl Sequence {
    /// Flat rollout index (`step * n_envs + env`) of the sequence's `t`-th step.
    pub fn index(&self, t: usize, n_envs: usize) -> usize {
        (self.start + t) * n_envs + self.env
    }
}

/// Cuts a rollout of `n_steps × n_envs` steps into sequences of at most `max_len` steps, a new
/// one at every episode start (`episode_starts[step * n_envs + env] == 1`), in env-major order.
pub fn split_sequences(
    episode_starts: &[f32],
    n_steps: usize,
    n_envs: usize,
    max_len: usize,
) -> Vec<Sequence> {
    let max_len = max_len.max(1);
    let mut out = Vec::new();
    for env in 0..n_envs {
        let mut start = 0;
        for step in 1..=n_steps {
            let cut = step == n_steps
                || step - start == max_len
                || episode_starts[step * n_envs + env] > 0.5;
            if cut {
                out.push(Sequence {
                    env,
                    start,
                    len: step - start,
                });
                start = step;
            }
        }
    }
    out
}

/// Gathers `data` (`[step][env][dim]`) for `seqs` into `[n_seq × max_len × dim]`, padding with
/// zeros, and returns it with the mask `[n_seq × max_len]` (1 for real steps, 0 for padding).
pub fn pad_sequences(
    data: &[f32],
    dim: usize,
    n_envs: usize,
    seqs: &[Sequence],
    max_len: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut out = vec![0.0f32; seqs.len() * max_len * dim];
    let mut mask = vec![0.0f32; seqs.len() * max_len];
    for (s, q) in seqs.iter().enumerate() {
        for t in 0..q.len.min(max_len) {
            let i = q.index(t, n_envs);
            let o = (s * max_len + t) * dim;
            out[o..o + dim].copy_from_slice(&data[i * dim..(i + 1) * dim]);
            mask[s * max_len + t] = 1.0;
        }
    }
    (out, mask)
}

/// Minibatches of whole sequences, shuffled with `rng`: consecutive groups of sequence indices
/// whose real steps add up to about `batch_steps` (at least one sequence each).
pub fn sequence_minibatches(
    seqs: &[Sequence],
    batch_steps: usize,
    rng: &mut Rng,
) -> Vec<Vec<usize>> {
    let order = rng.permutation(seqs.len());
    let mut out = Vec::new();
    let (mut cur, mut steps) = (Vec::new(), 0);
    for i in order {
        cur.push(i);
        steps += seqs[i].len;
        if steps >= batch_steps {
            out.push(std::mem::take(&mut cur));
            steps = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_episode_starts_and_at_the_maximum_length() {
        // 2 envs, 7 steps. Env 0: episode starts at steps 0 and 3; env 1: only at step 0.
        let mut starts = vec![0.0f32; 14];
        starts[0] = 1.0;
        starts[1] = 1.0;
        starts[3 * 2] = 1.0;
        let s = split_sequences(&starts, 7, 2, 3);
        let seq = |env, start, len| Sequence { env, start, len };
        assert_eq!(
            s,
            vec![
                seq(0, 0, 3), // steps 0-2: cut by the episode start at 3 (also length 3)
                seq(0, 3, 3), // steps 3-5: cut by the length
                seq(0, 6, 1), // step 6: the end of the rollout
                seq(1, 0, 3),
                seq(1, 3, 3),
                seq(1, 6, 1),
            ]
        );
        // A start in the middle of a would-be sequence cuts it short.
        starts[5 * 2] = 1.0;
        let s = split_sequences(&starts, 7, 2, 3);
        assert_eq!(&s[..3], &[seq(0, 0, 3), seq(0, 3, 2), seq(0, 5, 2)]);
        // Every step is in exactly one sequence.
        let covered: usize = s.iter().map(|q| q.len).sum();
        assert_eq!(covered, 14);
    }

    #[test]
    fn padding_is_zero_and_masked_out() {
        // 3 steps × 1 env, dim 2; sequences of length 2 → [0, 1] and [2, pad].
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let s = split_sequences(&[1.0, 0.0, 0.0], 3, 1, 2);
        let (x, m) = pad_sequences(&data, 2, 1, &s, 2);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0]);
        assert_eq!(m, vec![1.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn minibatches_hold_whole_sequences_once() {
        let starts: Vec<f32> = (0..40).map(|i| (i % 7 == 0) as u8 as f32).collect();
        let s = split_sequences(&starts, 20, 2, 4);
        let mb = sequence_minibatches(&s, 8, &mut Rng::seed_from(0));
        let mut all: Vec<usize> = mb.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..s.len()).collect::<Vec<_>>());
        for b in &mb[..mb.len() - 1] {
            let steps: usize = b.iter().map(|&i| s[i].len).sum();
            assert!((8..8 + 4).contains(&steps), "{steps}");
        }
    }
}
