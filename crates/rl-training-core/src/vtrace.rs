//! V-trace off-policy value targets and policy-gradient advantages (Espeholt et al. 2018,
//! IMPALA), for a trajectory batch laid out `[T][B]` (time-major, `B` trajectories).
//!
//! With `ρ_t = exp(log_rhos)`, `ρ̄_t = min(ρ_bar, ρ_t)`, `c_t = min(c_bar, ρ_t)`,
//! `δ_t = ρ̄_t (r_t + γ_t V(x_{t+1}) − V(x_t))`:
//! `v_s − V(x_s) = δ_s + γ_s c_s (v_{s+1} − V(x_{s+1}))`, with `v_T = V(x_T)` the bootstrap
//! value, and the policy-gradient advantage `min(pg_rho_bar, ρ_s)(r_s + γ_s v_{s+1} − V(x_s))`.
//! `γ_t` (`discounts`) is the discount times `1 − done_t`, so nothing crosses an episode end.
//! Computed in f64.

/// The inputs, each `[T × B]` time-major except `bootstrap_value` (`[B]`).
#[derive(Debug, Clone, Copy)]
pub struct VTraceInput<'a> {
    /// `log π(a|x) − log μ(a|x)` (target minus behaviour policy).
    pub log_rhos: &'a [f64],
    /// `γ (1 − done)` per step.
    pub discounts: &'a [f64],
    /// Rewards.
    pub rewards: &'a [f64],
    /// Value estimates `V(x_t)` of the current (learner) value function.
    pub values: &'a [f64],
    /// `V(x_T)`, the value of the observation after the last step of each trajectory.
    pub bootstrap_value: &'a [f64],
}

/// What V-trace gives, each `[T × B]`.
#[derive(Debug, Clone, PartialEq)]
pub struct VTraceOutput {
    /// Value targets `v_s`.
    pub vs: Vec<f64>,
    /// Policy-gradient advantages.
    pub pg_advantages: Vec<f64>,
    /// `min(rho_bar, ρ)`.
    pub clipped_rhos: Vec<f64>,
    /// `min(c_bar, ρ)`.
    pub cs: Vec<f64>,
    /// Temporal differences weighted by the clipped ρ.
    pub deltas: Vec<f64>,
}

/// V-trace over `b` trajectories (the inputs' length must be a multiple of `b`) with the
/// truncation levels `rho_bar`, `c_bar` and `pg_rho_bar` for the policy gradient (the paper:
/// `pg_rho_bar = rho_bar`).
///
/// # Panics
/// If the slices' lengths disagree (a programming error, not user input).
pub fn vtrace(
    inp: &VTraceInput<'_>,
    b: usize,
    rho_bar: f64,
    c_bar: f64,
    pg_rho_bar: f64,
) -> VTraceOutput {
    let n = inp.log_rhos.len();
    assert!(
        b > 0 && n.is_multiple_of(b),
        "vtrace: {n} steps do not split into {b} trajectories"
    );
    for (name, len) in [
        ("discounts", inp.discounts.len()),
        ("rewards", inp.rewards.len()),
        ("values", inp.values.len()),
    ] {
        assert_eq!(len, n, "vtrace: {name} has {len} entries, log_rhos {n}");
    }
    assert_eq!(inp.bootstrap_value.len(), b, "vtrace: bootstrap_value");
    let t_len = n / b;
    let rhos: Vec<f64> = inp.log_rhos.iter().map(|l| l.exp()).collect();
    let clipped_rhos: Vec<f64> = rhos.iter().map(|r| r.min(rho_bar)).collect();
    let cs: Vec<f64> = rhos.iter().map(|r| r.min(c_bar)).collect();
    let next_value = |t: usize, j: usize| {
        if t + 1 < t_len {
            inp.values[(t + 1) * b + j]
        } else {
            inp.bootstrap_value[j]
        }
    };
    let deltas: Vec<f64> = (0..n)
        .map(|i| {
            let (t, j) = (i / b, i % b);
            clipped_rhos[i] * (inp.rewards[i] + inp.discounts[i] * next_value(t, j) - inp.values[i])
        })
        .collect();
    // Backwards: acc_t = δ_t + γ_t c_t acc_{t+1}, acc_T = 0; vs = V + acc.
    let mut vs = vec![0.0; n];
    for j in 0..b {
        let mut acc = 0.0;
        for t in (0..t_len).rev() {
            let i = t * b + j;
            acc = deltas[i] + inp.discounts[i] * cs[i] * acc;
            vs[i] = inp.values[i] + acc;
        }
    }
    let pg_advantages = (0..n)
        .map(|i| {
            let (t, j) = (i / b, i % b);
            let vs_next = if t + 1 < t_len {
                vs[(t + 1) * b + j]
            } else {
                inp.bootstrap_value[j]
            };
            rhos[i].min(pg_rho_bar) * (inp.rewards[i] + inp.discounts[i] * vs_next - inp.values[i])
        })
        .collect();
    VTraceOutput {
        vs,
        pg_advantages,
        clipped_rhos,
        cs,
        deltas,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On-policy (ρ = 1) with c̄ = ρ̄ = 1, V-trace is the n-step TD(λ = 1) return: the
    /// discounted rewards plus the discounted bootstrap value, whatever the value estimates.
    #[test]
    fn on_policy_targets_are_discounted_returns() {
        let (t_len, b) = (3, 2);
        let rewards = [1.0, 2.0, 0.5, -1.0, 2.0, 0.0];
        // Trajectory 1 ends at its second step (discount 0 there).
        let discounts = [0.9, 0.9, 0.9, 0.0, 0.9, 0.9];
        let values = [0.3, -0.2, 1.0, 4.0, -3.0, 0.7];
        let boot = [10.0, 5.0];
        let out = vtrace(
            &VTraceInput {
                log_rhos: &[0.0; 6],
                discounts: &discounts,
                rewards: &rewards,
                values: &values,
                bootstrap_value: &boot,
            },
            b,
            1.0,
            1.0,
            1.0,
        );
        // Trajectory 0: v_2 = 2 + 0.9·10 = 11, v_1 = 0.5 + 0.9·11 = 10.4, v_0 = 1 + 0.9·10.4.
        let want0 = [1.0 + 0.9 * 10.4, 10.4, 11.0];
        // Trajectory 1: v_2 = 0 + 0.9·5 = 4.5, v_1 = -1 (episode end), v_0 = 2 + 0.9·(-1).
        let want1 = [2.0 - 0.9, -1.0, 4.5];
        for t in 0..t_len {
            assert!(
                (out.vs[t * b] - want0[t]).abs() < 1e-12,
                "{t}: {:?}",
                out.vs
            );
            assert!(
                (out.vs[t * b + 1] - want1[t]).abs() < 1e-12,
                "{t}: {:?}",
                out.vs
            );
        }
    }
}
