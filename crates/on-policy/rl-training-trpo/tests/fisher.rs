//! TRPO's Fisher-vector product (built from a forward-mode JVP, the distribution's Fisher and
//! one backward pass) against a finite-difference Hessian of the mean KL, computed here in
//! f64 on a re-implementation of the small actor network.

use rl_training_core::batch::tensor2;
use rl_training_core::burn::tensor::Device;
use rl_training_core::nn::Activation;
use rl_training_core::params::{flat_params, param_infos, to_vec1};
use rl_training_core::{Rng, Space};
use rl_training_on_policy::{ActorCritic, NetArch, PolicyKwargs};
use rl_training_trpo::loss::fisher_vector_product;
use std::collections::HashMap;

const OBS: usize = 3;
const B: usize = 4;

/// The actor's distribution outputs, per-row log_std and latent features, in f64, for flat
/// parameters `theta`. gSDE's log_std uses the latent features `z_fixed` (those of the base
/// parameters: the policy holds them constant in the variance).
type Actor = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>);

fn actor_f64(
    infos: &[(String, Vec<usize>, usize)],
    theta: &[f64],
    obs: &[f64],
    act: Activation,
    z_fixed: Option<&[Vec<f64>]>,
) -> Actor {
    let p: HashMap<&str, (&[usize], &[f64])> = infos
        .iter()
        .map(|(n, s, o)| {
            (
                n.as_str(),
                (s.as_slice(), &theta[*o..*o + s.iter().product::<usize>()]),
            )
        })
        .collect();
    let linear = |name: &str, x: &[f64]| -> Vec<f64> {
        let (ws, w) = p[format!("{name}.weight").as_str()];
        let (_, b) = p[format!("{name}.bias").as_str()];
        let (din, dout) = (ws[0], ws[1]);
        (0..dout)
            .map(|j| b[j] + (0..din).map(|i| x[i] * w[i * dout + j]).sum::<f64>())
            .collect()
    };
    let (mut outs, mut latents) = (Vec::new(), Vec::new());
    for row in obs.chunks(OBS) {
        let mut h = row.to_vec();
        let mut l = 0;
        while p.contains_key(format!("pi.layers.{l}.weight").as_str()) {
            h = linear(&format!("pi.layers.{l}"), &h)
                .into_iter()
                .map(|v| match act {
                    Activation::Tanh => v.tanh(),
                    _ => v.max(0.0),
                })
                .collect();
            l += 1;
        }
        outs.push(linear("action_net", &h));
        latents.push(h);
    }
    let ls = match (p.get("log_std"), p.get("sde_log_std")) {
        (Some((_, v)), _) => vec![v.to_vec(); outs.len()],
        (None, Some((shape, v))) => {
            let (k, d) = (shape[0], shape[1]);
            let z = z_fixed.unwrap_or(&latents);
            z.iter()
                .map(|zr| {
                    (0..d)
                        .map(|j| {
                            let var: f64 = (0..k)
                                .map(|i| zr[i] * zr[i] * (2.0 * v[i * d + j]).exp())
                                .sum::<f64>()
                                + 1e-6;
                            0.5 * var.ln()
                        })
                        .collect()
                })
                .collect()
        }
        _ => vec![Vec::new(); outs.len()],
    };
    (outs, ls, latents)
}

/// Mean KL(p_θ0 ‖ p_θ) over the rows.
fn mean_kl(space: &Space, a: &Actor, b: &Actor) -> f64 {
    let n = a.0.len() as f64;
    let kl_row = |p: &[f64], q: &[f64], lsp: &[f64], lsq: &[f64]| -> f64 {
        match space {
            Space::Discrete { .. } => {
                let lse = |x: &[f64]| {
                    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    m + x.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
                };
                let (zp, zq) = (lse(p), lse(q));
                p.iter()
                    .zip(q)
                    .map(|(&pi, &qi)| (pi - zp).exp() * ((pi - zp) - (qi - zq)))
                    .sum()
            }
            _ => p
                .iter()
                .zip(q)
                .zip(lsp.iter().zip(lsq))
                .map(|((&mp, &mq), (&lp, &lq))| {
                    lq - lp + ((2.0 * lp).exp() + (mp - mq).powi(2)) / (2.0 * (2.0 * lq).exp())
                        - 0.5
                })
                .sum(),
        }
    };
    (0..a.0.len())
        .map(|r| kl_row(&a.0[r], &b.0[r], &a.1[r], &b.1[r]))
        .sum::<f64>()
        / n
}

fn check(space: Space, act: Activation) {
    check_with(space, act, false);
}

fn check_with(space: Space, act: Activation, use_sde: bool) {
    let dev = Device::flex().autodiff();
    let mut rng = Rng::seed_from(5);
    let kw = PolicyKwargs {
        net_arch: NetArch::Same(vec![5, 4]),
        activation_fn: act,
        log_std_init: -0.3,
        ..PolicyKwargs::default()
    };
    let policy = ActorCritic::with_sde(
        &Space::boxed(vec![-1.0; OBS], vec![1.0; OBS]),
        &space,
        &kw,
        use_sde,
        &mut rng,
        &dev,
    )
    .unwrap();
    let obs: Vec<f32> = (0..B * OBS).map(|_| rng.normal() as f32).collect();
    let theta: Vec<f32> = to_vec1(flat_params(&policy));
    let v: Vec<f32> = (0..theta.len()).map(|_| rng.normal() as f32).collect();
    let ours = fisher_vector_product(&policy, &tensor2(obs.clone(), B, OBS, &dev), &v, &dev);

    let mut o = 0;
    let infos: Vec<(String, Vec<usize>, usize)> = param_infos(&policy)
        .into_iter()
        .map(|p| {
            let start = o;
            o += p.numel();
            (p.path, p.shape, start)
        })
        .collect();
    let obs64: Vec<f64> = obs.iter().map(|&x| x as f64).collect();
    let th64: Vec<f64> = theta.iter().map(|&x| x as f64).collect();
    let v64: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    let base = actor_f64(&infos, &th64, &obs64, act, None);
    let z0 = base.2.clone();
    let f = |t: &[f64]| mean_kl(&space, &base, &actor_f64(&infos, t, &obs64, act, Some(&z0)));
    let h = 1e-4;
    let reference: Vec<f64> = (0..th64.len())
        .map(|i| {
            let at = |si: f64, sv: f64| {
                let t: Vec<f64> = th64
                    .iter()
                    .zip(&v64)
                    .enumerate()
                    .map(|(j, (&t, &vj))| t + sv * h * vj + if j == i { si * h } else { 0.0 })
                    .collect();
                f(&t)
            };
            (at(1.0, 1.0) - at(1.0, -1.0) - at(-1.0, 1.0) + at(-1.0, -1.0)) / (4.0 * h * h)
        })
        .collect();
    let diff: f64 = ours
        .iter()
        .zip(&reference)
        .map(|(&a, &b)| (a as f64 - b).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = reference.iter().map(|b| b * b).sum::<f64>().sqrt();
    println!(
        "{space:?} {act:?}: |F·v| = {norm:.4}, relative error {:.2e}",
        diff / norm
    );
    assert!(norm > 1e-3, "degenerate test: F·v is {norm}");
    assert!(diff / norm <= 1e-3, "relative error {} > 1e-3", diff / norm);
}

#[test]
fn fisher_vector_product_matches_finite_difference_hessian_of_kl_discrete() {
    check(Space::discrete(3), Activation::Tanh);
}

#[test]
fn fisher_vector_product_matches_finite_difference_hessian_of_kl_gaussian() {
    check(
        Space::boxed(vec![-1.0, -1.0], vec![1.0, 1.0]),
        Activation::Tanh,
    );
}

#[test]
fn fisher_vector_product_matches_with_relu() {
    check(Space::discrete(4), Activation::Relu);
}

#[test]
fn fisher_vector_product_matches_with_gsde() {
    check_with(
        Space::boxed(vec![-1.0, -1.0], vec![1.0, 1.0]),
        Activation::Tanh,
        true,
    );
}
