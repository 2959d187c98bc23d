//! Fitness shaping.

use serde::{Deserialize, Serialize};

/// How returns become weights of the perturbations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitnessShaping {
    /// Ranks mapped linearly onto [−0.5, 0.5] (Salimans et al. 2017).
    CenteredRank,
    /// The raw returns.
    None,
}

impl FitnessShaping {
    /// The shaped fitness of `returns`.
    pub fn apply(self, returns: &[f64]) -> Vec<f64> {
        match self {
            FitnessShaping::CenteredRank => centered_rank(returns),
            FitnessShaping::None => returns.to_vec(),
        }
    }
}

/// Centered ranks (OpenAI-ES's `compute_centered_ranks`): the i-th smallest of `n` values
/// gets `i / (n − 1) − 0.5`; ties are ranked in input order. One value gets 0.
pub fn centered_rank(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    if n < 2 {
        return vec![0.0; n];
    }
    let mut order: Vec<usize> = (0..n).collect();
    // A stable sort keeps equal values in input order; NaN sorts last.
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut out = vec![0.0; n];
    for (rank, &i) in order.iter().enumerate() {
        out[i] = rank as f64 / (n - 1) as f64 - 0.5;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centered_rank_hand_computed() {
        // Sorted: -3 (0), 0.5 (1), 2 (2), 10 (3), 11 (4) → rank/4 − 0.5.
        let r = centered_rank(&[10.0, -3.0, 2.0, 11.0, 0.5]);
        assert_eq!(r, vec![0.25, -0.5, 0.0, 0.5, -0.25]);
        // Ties keep input order; the result is invariant to monotone transforms.
        assert_eq!(centered_rank(&[1.0, 1.0, 0.0]), vec![0.0, 0.5, -0.5]);
        assert_eq!(
            centered_rank(&[100.0, 100.0, -7.0]),
            centered_rank(&[1.0, 1.0, 0.0])
        );
        assert_eq!(centered_rank(&[3.0]), vec![0.0]);
        assert_eq!(FitnessShaping::None.apply(&[3.0, 1.0]), vec![3.0, 1.0]);
    }
}
