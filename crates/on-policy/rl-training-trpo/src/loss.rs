//! TRPO's pieces as functions: the surrogate objective, Fisher-vector products from
//! first-order derivatives, conjugate gradient, and the backtracking line search.

use rl_training_core::batch::{host, tensor1};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::params::{flat_grads, set_flat};
use rl_training_on_policy::ActorCritic;
pub use rl_training_on_policy::loss::{explained_variance, normalize_advantages};

/// Surrogate objective `mean(A · exp(log π − log π_old))` (to maximize).
pub fn surrogate(log_prob: Tensor<1>, old_log_prob: Tensor<1>, advantages: Tensor<1>) -> Tensor<1> {
    ((log_prob - old_log_prob).exp() * advantages).mean()
}

/// `F·v`, with `F` the Fisher information of the policy's action distribution averaged over
/// the observations `obs` `[B, obs_dim]` (= the Hessian of the mean KL between the policy and
/// a fixed copy of itself), for a flat parameter vector `v` in walking order (entries of the
/// value network are ignored and come back 0).
///
/// burn differentiates only once, so the product is built as `Jᵀ (M (J v)) / B`: `J v` by
/// forward-mode differentiation of the actor ([`ActorCritic::actor_jvp`]), `M` the Fisher of
/// the distribution in its outputs ([`DistKind::fisher_apply`]), `Jᵀ u` by one backward pass
/// of `Σ u · outputs`.
///
/// [`DistKind::fisher_apply`]: rl_training_core::distributions::DistKind::fisher_apply
pub fn fisher_vector_product(
    policy: &ActorCritic,
    obs: &Tensor<2>,
    v: &[f32],
    device: &Device,
) -> Vec<f32> {
    FisherProduct::new(policy, obs).apply(policy, obs, v, device)
}

/// What [`fisher_vector_product`] needs of the policy at the current parameters, computed once
/// for the many products of one natural-gradient step: the inference copy, the observations
/// on its device, and the distribution's `log_std` there.
pub struct FisherProduct {
    valid: ActorCritic,
    obs: Tensor<2>,
    latent: Tensor<2>,
    log_std: Vec<f32>,
}

impl FisherProduct {
    /// Prepares the products for `policy` (autodiff) at the observations `obs`.
    pub fn new(policy: &ActorCritic, obs: &Tensor<2>) -> Self {
        let valid = policy.valid();
        let obs = obs.clone().inner();
        let latent = valid.pi.forward(obs.clone());
        // The shared log_std parameter, or gSDE's per-sample values.
        let log_std = valid.dist_log_std(&latent).map(host).unwrap_or_default();
        Self {
            valid,
            obs,
            latent,
            log_std,
        }
    }

    /// `F·v` (see [`fisher_vector_product`]); `policy` and `obs` as given to [`new`](Self::new).
    pub fn apply(
        &self,
        policy: &ActorCritic,
        obs: &Tensor<2>,
        v: &[f32],
        device: &Device,
    ) -> Vec<f32> {
        let inner = device.clone().inner();
        let tangent = set_flat(self.valid.clone(), tensor1(v.to_vec(), &inner));
        let b = obs.dims()[0].max(1);
        let (params, dparams) = self.valid.actor_jvp(&tangent, self.obs.clone());
        let pd = params.dims()[1];
        let dls = match self.valid.sde_log_std_jvp(&tangent, self.latent.clone()) {
            Some(d) => host(d),
            None => tangent
                .log_std
                .as_ref()
                .map(|p| host(p.val()))
                .unwrap_or_default(),
        };
        let u = policy
            .dist
            .fisher_apply(&host(params), &self.log_std, &host(dparams));
        let latent = policy.pi.forward(obs.clone());
        let ls = policy.dist_log_std(&latent);
        let out = policy.action_head(latent);
        let mut total = (out * rl_training_core::batch::tensor2(u, b, pd, device))
            .sum()
            .div_scalar(b as f64);
        // The Gaussian's log_std: Fisher 2 per dimension and sample.
        if let Some(ls) = ls {
            let w: Vec<f32> = dls.iter().map(|d| 2.0 * d).collect();
            let [rows, d] = ls.dims();
            let n = w.len() / d.max(1);
            let w = rl_training_core::batch::tensor2(w, n, d, device);
            total = total + (ls * w).sum().div_scalar(rows as f64);
        }
        host(flat_grads(policy, total.backward(), device).inner())
    }

    /// The inference copy of the policy the products are taken at.
    pub fn valid(&self) -> &ActorCritic {
        &self.valid
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// Conjugate gradient for `A x = b` with `A` symmetric positive definite, given as the
/// product `av` (sb3-contrib's solver: start at 0, at most `max_iter` products, stop when
/// the squared residual is below `residual_tol`).
pub fn conjugate_gradient(
    mut av: impl FnMut(&[f32]) -> Vec<f32>,
    b: &[f32],
    max_iter: usize,
    residual_tol: f64,
) -> Vec<f32> {
    let mut x = vec![0.0f32; b.len()];
    let mut r = b.to_vec();
    let mut rr = dot(&r, &r);
    if rr < residual_tol {
        return x;
    }
    let mut p = r.clone();
    for i in 0..max_iter {
        let ap = av(&p);
        let alpha = (rr / dot(&p, &ap)) as f32;
        for (xi, &pi) in x.iter_mut().zip(&p) {
            *xi += alpha * pi;
        }
        if i + 1 == max_iter {
            break;
        }
        for (ri, &api) in r.iter_mut().zip(&ap) {
            *ri -= alpha * api;
        }
        let rr_new = dot(&r, &r);
        if rr_new < residual_tol {
            break;
        }
        let beta = (rr_new / rr) as f32;
        rr = rr_new;
        for (pi, &ri) in p.iter_mut().zip(&r) {
            *pi = ri + beta * *pi;
        }
    }
    x
}

/// The step TRPO takes along `direction` `s` at most: `sqrt(2 δ / sᵀ F s)` with `fs = F s`
/// (damped), so that the quadratic model of the KL equals `target_kl` δ.
pub fn max_step_size(direction: &[f32], fs: &[f32], target_kl: f64) -> f64 {
    (2.0 * target_kl / dot(direction, fs)).sqrt()
}

/// What the line search settled on.
#[derive(Debug, Clone, PartialEq)]
pub struct LineSearch {
    /// The accepted parameters, or `None` when no step satisfied the constraints.
    pub params: Option<Vec<f32>>,
    /// Surrogate objective at the accepted parameters (the old one when rejected).
    pub objective: f64,
    /// Mean KL at the accepted parameters (0 when rejected).
    pub kl: f64,
    /// Steps tried.
    pub tries: usize,
}

/// Backtracking line search (sb3-contrib's): tries `θ0 + c · max_step · s` for
/// `c = 1, shrink, shrink², …` (at most `max_iter` times) and accepts the first whose mean KL
/// (from `eval`, which returns `(objective, kl)`) is below `target_kl` and whose surrogate
/// objective improves on `objective0`.
#[allow(clippy::too_many_arguments)]
pub fn line_search(
    theta0: &[f32],
    direction: &[f32],
    max_step: f64,
    shrink: f64,
    max_iter: usize,
    target_kl: f64,
    objective0: f64,
    mut eval: impl FnMut(&[f32]) -> (f64, f64),
) -> LineSearch {
    let mut coeff = 1.0f64;
    for i in 0..max_iter {
        let scale = (coeff * max_step) as f32;
        let cand: Vec<f32> = theta0
            .iter()
            .zip(direction)
            .map(|(&t, &s)| t + scale * s)
            .collect();
        let (obj, kl) = eval(&cand);
        if kl < target_kl && obj > objective0 {
            return LineSearch {
                params: Some(cand),
                objective: obj,
                kl,
                tries: i + 1,
            };
        }
        coeff *= shrink;
    }
    LineSearch {
        params: None,
        objective: objective0,
        kl: 0.0,
        tries: max_iter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conjugate_gradient_solves_a_known_spd_system() {
        // A = [[4, 1, 0], [1, 3, 1], [0, 1, 2]], x* = [1, -2, 3] → b = A x*.
        let a = [[4.0f32, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]];
        let av = |v: &[f32]| -> Vec<f32> {
            a.iter()
                .map(|row| row.iter().zip(v).map(|(x, y)| x * y).sum())
                .collect()
        };
        let b = av(&[1.0, -2.0, 3.0]);
        // n steps solve an n×n SPD system exactly (up to rounding).
        let x = conjugate_gradient(av, &b, 3, 1e-20);
        for (got, want) in x.iter().zip([1.0, -2.0, 3.0]) {
            assert!((got - want).abs() < 1e-5, "{x:?}");
        }
        // One step is the steepest-descent step: x = (bᵀb / bᵀAb) b.
        let x1 = conjugate_gradient(av, &b, 1, 1e-20);
        let ab = av(&b);
        let alpha = dot(&b, &b) / dot(&b, &ab);
        for (got, bi) in x1.iter().zip(&b) {
            assert!((*got as f64 - alpha * *bi as f64).abs() < 1e-5);
        }
        // A zero right-hand side returns 0 without a product.
        let mut calls = 0;
        let x0 = conjugate_gradient(
            |v| {
                calls += 1;
                v.to_vec()
            },
            &[0.0; 3],
            5,
            1e-10,
        );
        assert_eq!((x0, calls), (vec![0.0; 3], 0));
    }

    #[test]
    fn line_search_rejects_steps_that_violate_target_kl() {
        // Objective grows with the step, KL = step²: only steps with c·max_step < 0.1 pass
        // for target_kl 0.01.
        let eval = |p: &[f32]| (p[0] as f64, (p[0] as f64).powi(2));
        let r = line_search(&[0.0], &[1.0], 0.2, 0.5, 10, 0.01, 0.0, eval);
        // c = 1 → 0.2 (KL 0.04, rejected), c = 0.5 → 0.1 (KL 0.01, not < 0.01, rejected),
        // c = 0.25 → 0.05 (KL 0.0025, accepted).
        assert_eq!(r.tries, 3);
        assert!((r.params.unwrap()[0] - 0.05).abs() < 1e-7);
        assert!((r.kl - 0.0025).abs() < 1e-9);
        // A step that never improves the objective is rejected, parameters unchanged.
        let r = line_search(&[0.0], &[1.0], 0.2, 0.5, 4, 0.01, 1.0, eval);
        assert_eq!((r.params, r.objective, r.kl, r.tries), (None, 1.0, 0.0, 4));
        // Too few tries to get inside the trust region: rejected.
        let r = line_search(&[0.0], &[1.0], 0.2, 0.5, 2, 0.01, 0.0, eval);
        assert!(r.params.is_none());
    }

    #[test]
    fn max_step_puts_the_quadratic_kl_model_on_target() {
        // ½ (β s)ᵀ F (β s) = δ for β = sqrt(2δ / sᵀFs).
        let s = [1.0f32, 2.0];
        let fs = [2.0f32, 1.0]; // F = diag(2, 0.5)
        let beta = max_step_size(&s, &fs, 0.01);
        assert!((0.5 * beta * beta * dot(&s, &fs) - 0.01).abs() < 1e-12);
    }
}
