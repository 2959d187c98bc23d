//! An actor-critic's parameters as one flat vector θ during an update.
//!
//! A minibatch step through the module tree forks every parameter into an autodiff leaf,
//! records a node per layer, gathers a gradient per parameter and maps the optimizer's step
//! back onto every tensor. Between [`ActorCritic::begin_flat`] and [`ActorCritic::end_flat`]
//! the policy instead reads all its parameters from θ (walking order, the optimizer's layout):
//! each loss differentiates one leaf, each network is one fused node (`rl_training_core::nn::flat_mlp`),
//! and the optimizer steps θ itself. The numbers are those of the module path to the bit
//! (tested): only the bookkeeping changes.

use crate::policy::ActorCritic;
use rl_training_core::burn::tensor::{Gradients, Tensor};
use rl_training_core::nn::{Activation, DenseSlot, Mlp, fused_available};
use rl_training_core::optim::{FlatOptimizer, StepStats};
use rl_training_core::params::{flat_params, param_infos, set_flat};
use std::collections::HashMap;
use std::sync::Arc;

/// Where the networks of an [`ActorCritic`] lie in its flat parameter vector.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatLayout {
    /// The policy trunk's layers, then the action head.
    pub actor: Vec<DenseSlot>,
    /// The value trunk's layers, then the value head.
    pub critic: Vec<DenseSlot>,
    /// `(offset, dim)` of the Gaussian's state-independent `log_std`.
    pub log_std: Option<(usize, usize)>,
}

/// θ and its layout, held by the policy during an update.
#[derive(Debug, Clone)]
pub struct FlatParams {
    /// The flat parameters: the inner backend's tensor between steps, an autodiff leaf in the
    /// copy a loss differentiates.
    pub theta: Tensor<1>,
    /// Where each network reads θ.
    pub layout: Arc<FlatLayout>,
}

impl FlatLayout {
    /// The layout of `policy`, when every parameter it has is covered by it: flat
    /// observations (no CNN), separate `tanh` trunks, no gSDE, biased layers, on a device with
    /// the fused operations.
    pub fn of(policy: &ActorCritic) -> Option<Self> {
        let vf = policy.vf.as_ref()?;
        let device = policy.action_net.weight.val().device();
        if policy.cnn.is_some() || policy.sde.is_some() || !fused_available(&device) {
            return None;
        }
        let offsets: HashMap<String, usize> = param_infos(policy)
            .into_iter()
            .scan(0, |off, p| {
                let at = *off;
                *off += p.numel();
                Some((p.path, at))
            })
            .collect();
        let dense = |prefix: &str, l: &rl_training_core::burn::nn::Linear, tanh: bool| {
            l.bias.as_ref()?;
            let [d_in, d_out] = l.weight.dims();
            Some(DenseSlot {
                w: *offsets.get(&format!("{prefix}.weight"))?,
                b: *offsets.get(&format!("{prefix}.bias"))?,
                d_in,
                d_out,
                tanh,
            })
        };
        let trunk = |name: &str, mlp: &Mlp| -> Option<Vec<DenseSlot>> {
            if mlp.output.is_some() || mlp.activation != Activation::Tanh {
                return None;
            }
            let layers = mlp.layers.iter().enumerate();
            layers
                .map(|(i, l)| dense(&format!("{name}.layers.{i}"), l, true))
                .collect()
        };
        let mut actor = trunk("pi", &policy.pi)?;
        actor.push(dense("action_net", &policy.action_net, false)?);
        let mut critic = trunk("vf", vf)?;
        critic.push(dense("value_net", &policy.value_net, false)?);
        let log_std = match &policy.log_std {
            Some(p) => Some((*offsets.get("log_std")?, p.dims()[0])),
            None => None,
        };
        // Every parameter must be read from θ, or a step would leave it behind.
        let covered = actor
            .iter()
            .chain(&critic)
            .map(|s| s.d_out * (s.d_in + 1))
            .sum::<usize>()
            + log_std.map_or(0, |(_, d)| d);
        (covered == policy.num_params()).then_some(Self {
            actor,
            critic,
            log_std,
        })
    }
}

impl ActorCritic {
    /// Starts reading every parameter from one flat vector θ (see the module docs); false
    /// (nothing changes) where this policy's shape or device has no flat path. Pair with
    /// [`end_flat`](Self::end_flat): until then the module's own tensors are stale.
    pub fn begin_flat(&mut self) -> bool {
        if self.flat.is_some() {
            return true;
        }
        let Some(layout) = FlatLayout::of(self) else {
            return false;
        };
        self.flat = Some(FlatParams {
            theta: flat_params(self),
            layout: Arc::new(layout),
        });
        true
    }

    /// Writes θ back into the module's tensors and stops reading it.
    pub fn end_flat(&mut self) {
        if let Some(f) = self.flat.take() {
            *self = set_flat(self.clone(), f.theta);
        }
    }

    /// A copy whose θ is a fresh autodiff leaf, for one loss to differentiate (the flat
    /// counterpart of `fork`); `None` off the flat path.
    pub fn flat_leaf(&self) -> Option<Self> {
        let f = self.flat.as_ref()?;
        let mut me = self.clone();
        me.flat = Some(FlatParams {
            theta: Tensor::from_inner(f.theta.clone()).require_grad(),
            layout: f.layout.clone(),
        });
        Some(me)
    }

    /// The gradient of θ (a [`flat_leaf`](Self::flat_leaf)) in `grads`: zeros where the loss
    /// did not reach it.
    pub fn flat_grad(&self, grads: &Gradients) -> Option<Tensor<1>> {
        let theta = &self.flat.as_ref()?.theta;
        Some(
            theta
                .grad(grads)
                .unwrap_or_else(|| Tensor::zeros(theta.dims(), &theta.device().inner())),
        )
    }

    /// One optimizer step with the flat gradient `g`: on θ during a flat update, on the module's
    /// tensors otherwise.
    pub fn step(&mut self, opt: &mut FlatOptimizer, lr: f64, g: Tensor<1>) -> StepStats {
        match self.flat.as_mut() {
            Some(f) => {
                let (theta, stats) = opt.step_theta(lr, f.theta.clone(), g);
                f.theta = theta;
                stats
            }
            None => {
                let (me, stats) = opt.step_flat(lr, self.clone(), g);
                *self = me;
                stats
            }
        }
    }

    /// Number of float parameters.
    fn num_params(&self) -> usize {
        rl_training_core::params::num_params(self)
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use crate::agent::actor_critic_grads;
    use crate::policy::PolicyKwargs;
    use rl_training_core::burn::tensor::{Device, TensorData};
    use rl_training_core::optim::OptimizerKind;
    use rl_training_core::params::{flat_params, to_vec1};
    use rl_training_core::{Rng, Space};

    /// Three clipped Adam steps of an actor loss (log-prob, entropy) and a value loss, once
    /// through the module tree and once on θ: the gradients, the reported values and the final
    /// parameters equal to the bit, for a discrete and a Gaussian policy.
    #[test]
    fn flat_update_equals_the_module_update_to_the_bit() {
        let dev = Device::flex().autodiff();
        for act_space in [
            Space::discrete(3),
            Space::boxed(vec![-1.0; 2], vec![1.0; 2]),
        ] {
            let obs_space = Space::boxed(vec![-5.0; 4], vec![5.0; 4]);
            let kw = PolicyKwargs::default();
            let policy =
                ActorCritic::new(&obs_space, &act_space, &kw, &mut Rng::seed_from(1), &dev)
                    .unwrap();
            let mut rng = Rng::seed_from(2);
            let b = 64;
            let mut vals = |n: usize| (0..n).map(|_| rng.normal() as f32).collect::<Vec<f32>>();
            let obs = Tensor::<2>::from_data(TensorData::new(vals(b * 4), [b, 4]), &dev);
            let ad = act_space.raw_dim();
            let acts: Vec<f32> = match act_space {
                Space::Discrete { .. } => (0..b).map(|i| (i % 3) as f32).collect(),
                _ => vals(b * ad),
            };
            let actions = Tensor::<2>::from_data(TensorData::new(acts, [b, ad]), &dev);
            let adv = Tensor::<1>::from_data(TensorData::new(vals(b), [b]), &dev);
            let ret = Tensor::<1>::from_data(TensorData::new(vals(b), [b]), &dev);
            let run = |flat: bool| {
                let mut p = policy.clone();
                let mut opt = FlatOptimizer::new(OptimizerKind::adam(1e-5), Some(0.5));
                assert_eq!(p.begin_flat(), flat || p.begin_flat());
                if !flat {
                    p.end_flat();
                }
                let mut seen = Vec::new();
                for _ in 0..3 {
                    let actor = |q: &ActorCritic| {
                        let (logp, ent) = q.log_prob_entropy(obs.clone(), actions.clone());
                        let ent = ent.unwrap_or_else(|| logp.clone().neg());
                        let loss =
                            (logp.clone() * adv.clone()).mean().neg() - ent.mean().mul_scalar(0.01);
                        let v = to_vec1(logp.inner());
                        (loss, v)
                    };
                    let critic = |q: &ActorCritic| {
                        let d = q.values(obs.clone()) - ret.clone();
                        ((d.clone() * d).mean(), ())
                    };
                    let (g, logp, ()) = actor_critic_grads(&p, &dev, actor, critic);
                    seen.push((to_vec1(g.clone()), logp));
                    p.step(&mut opt, 3e-3, g);
                }
                p.end_flat();
                assert!(p.flat.is_none());
                (seen, to_vec1(flat_params(&p)))
            };
            let (module, flat) = (run(false), run(true));
            assert_eq!(module.0, flat.0, "gradients and log-probs, {act_space:?}");
            assert_eq!(
                module.1, flat.1,
                "parameters after three steps, {act_space:?}"
            );
            assert_ne!(
                module.1,
                to_vec1(flat_params(&policy)),
                "the steps moved them"
            );
        }
    }

    /// Shapes the flat path does not cover keep the module path.
    #[test]
    fn uncovered_policies_stay_on_the_module_path() {
        let dev = Device::flex().autodiff();
        let obs = Space::boxed(vec![-1.0; 3], vec![1.0; 3]);
        let act = Space::discrete(2);
        let shared = PolicyKwargs {
            shared: true,
            ..PolicyKwargs::default()
        };
        let relu = PolicyKwargs {
            activation_fn: Activation::Relu,
            ..PolicyKwargs::default()
        };
        for kw in [shared, relu] {
            let mut p = ActorCritic::new(&obs, &act, &kw, &mut Rng::seed_from(0), &dev).unwrap();
            assert!(!p.begin_flat(), "{kw:?}");
            assert!(p.flat.is_none());
        }
        let mut p = ActorCritic::with_sde(
            &obs,
            &Space::boxed(vec![-1.0], vec![1.0]),
            &PolicyKwargs::default(),
            true,
            &mut Rng::seed_from(0),
            &dev,
        )
        .unwrap();
        assert!(!p.begin_flat(), "gSDE");
        let mut p = ActorCritic::new(
            &obs,
            &act,
            &PolicyKwargs::default(),
            &mut Rng::seed_from(0),
            &dev,
        )
        .unwrap();
        assert!(p.begin_flat(), "the default MLP policy");
    }
}
