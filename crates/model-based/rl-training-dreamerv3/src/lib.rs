//! DreamerV3 (Hafner et al. 2023, "Mastering Diverse Domains through World Models"), with
//! RLlib's names and defaults.
//!
//! The crate reads top-down: [`config`] (`algo_kwargs`), [`model`] (the world model's
//! networks), [`loss`] (the named loss terms), and here the learner. The shared pieces —
//! RSSM, two-hot heads, categorical latents, λ-returns, return scale — live in the family
//! crate `rl-training-model-based`; the map is `docs/architecture.md`.
//!
//! The learner's update on a replayed batch ([`Learner::update`]): the world model's step,
//! then the critic's and actor's in imagination (discrete and Box actions, REINFORCE for
//! both); the shell around it is [`DreamerV3`]. Image observations come next (see the
//! README).
#![warn(missing_docs)]

pub mod agent;
pub mod config;
pub mod loss;
pub mod model;

pub use agent::DreamerV3;
pub use config::{ContinuousActorGradient, DreamerV3Config};
pub use model::{Actor, Critic, WorldModel};

use model::tensor2;
use rl_training_core::Rng;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError, state_entry};
use rl_training_core::batch::{host, tensor1};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::activation::sigmoid;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::distributions::{diag_gaussian_entropy, diag_gaussian_log_prob};
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, load_module_tensors, module_tensors, num_params, polyak,
};
use rl_training_model_based::categorical::{argmax_one_hot, draw_one_hot};
use rl_training_model_based::rssm::RssmState;
use rl_training_model_based::{
    ObsShape, ReturnScale, SequenceBatch, TwoHot, kl_terms, lambda_returns,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Adam's ε of every DreamerV3 optimizer (RLlib's).
pub const ADAM_EPS: f64 = 1e-8;

/// The world model's loss terms of one batch, as means over its `T·B` rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldModelLosses {
    /// Decoder (symlog squared error of the observations).
    pub decoder: f64,
    /// Reward two-hot cross-entropy.
    pub reward: f64,
    /// Continue binary cross-entropy.
    pub cont: f64,
    /// Dynamics KL (after free bits).
    pub kl_dyn: f64,
    /// Representation KL (after free bits).
    pub kl_rep: f64,
    /// The weighted total.
    pub total: f64,
}

impl WorldModelLosses {
    /// The metrics (`losses/world_model`, `losses/kl_dyn`, …).
    pub fn metrics(&self) -> Metrics {
        let mut m = Metrics::new();
        for (k, v) in [
            ("losses/world_model", self.total),
            ("losses/decoder", self.decoder),
            ("losses/reward", self.reward),
            ("losses/continue", self.cont),
            ("losses/kl_dyn", self.kl_dyn),
            ("losses/kl_rep", self.kl_rep),
        ] {
            m.insert(k.into(), v);
        }
        m
    }
}

/// Update rate of the critic's slow EMA copy (DreamerV3: decay 0.98).
pub const CRITIC_EMA_RATE: f64 = 0.02;

/// World model, actor and critic (with its slow copy), one optimizer each, the return scale
/// and the generator of latent samples and imagined actions.
pub struct DreamerV3Learner {
    cfg: DreamerV3Config,
    world_model: WorldModel,
    actor: Actor,
    critic: Critic,
    critic_ema: Critic,
    wm_opt: FlatOptimizer,
    actor_opt: FlatOptimizer,
    critic_opt: FlatOptimizer,
    return_scale: ReturnScale,
    rng: Rng,
    two_hot: TwoHot,
    device: Device,
}

impl DreamerV3Learner {
    /// A learner for `obs` observations (a vector width, or a 64×64 image) and
    /// `action_dim`-wide actions (one-hot discrete ones, or Box ones scaled to [−1, 1] when
    /// `continuous`); weights from the `seed`'s `model` stream, latent samples and imagined
    /// actions from its `latents` stream.
    pub fn new(
        cfg: DreamerV3Config,
        obs: impl Into<ObsShape>,
        (action_dim, continuous): (usize, bool),
        seed: u64,
        device: &Device,
    ) -> Self {
        let n_actions = action_dim;
        let dims = cfg.model_size.dims();
        let mut init = Rng::for_stream(seed, "model");
        let obs = obs.into();
        let symlog = cfg.symlog_obs.resolve(obs.is_image());
        let world_model = WorldModel::new(&dims, obs, n_actions, symlog, &mut init, device);
        let f = world_model.rssm.feature_dim();
        let actor = Actor::new(f, n_actions, continuous, &dims, &mut init, device);
        let critic = Critic::new(f, &dims, &mut init, device);
        let adam = |clip: f64| FlatOptimizer::new(OptimizerKind::adam(ADAM_EPS), Some(clip));
        Self {
            wm_opt: adam(cfg.world_model_grad_clip_by_global_norm),
            actor_opt: adam(cfg.actor_grad_clip_by_global_norm),
            critic_opt: adam(cfg.critic_grad_clip_by_global_norm),
            return_scale: ReturnScale::new(cfg.return_normalization_decay),
            critic_ema: critic.clone(),
            actor,
            critic,
            cfg,
            world_model,
            rng: Rng::for_stream(seed, "latents"),
            two_hot: TwoHot::dreamer(),
            device: device.clone(),
        }
    }

    /// The hyperparameters.
    pub fn config(&self) -> &DreamerV3Config {
        &self.cfg
    }

    /// The (autodiff) device it trains on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The world model.
    pub fn world_model(&self) -> &WorldModel {
        &self.world_model
    }

    /// The world-model loss of `batch` (a scalar tensor to differentiate) and its terms;
    /// latent samples are drawn from `rng`.
    pub fn world_model_loss(
        &self,
        batch: &SequenceBatch,
        rng: &mut Rng,
    ) -> Result<(Tensor<1>, WorldModelLosses, RssmState), RlError> {
        batch
            .check()
            .map_err(|m| RlError::Config(rl_training_core::config::ConfigError::new("batch", m)))?;
        let dev = &self.device;
        let wm = &self.world_model;
        let n = batch.rows();
        let post = wm.observe(batch, rng, dev);
        let obs = wm.obs_target(tensor2(&batch.obs, n, batch.obs_dim, dev));
        let decoder = loss::decoder_loss(wm.decode(post.features.clone()), obs);
        let reward_logits = wm.reward.forward(post.features.clone());
        let reward = self.two_hot.loss_of(reward_logits, &batch.rewards);
        let cont_target: Vec<f32> = batch.is_terminated.iter().map(|d| 1.0 - d).collect();
        let cont = loss::continue_loss(wm.cont.forward(post.features), tensor1(cont_target, dev));
        let kl = kl_terms(post.posterior, post.prior, loss::FREE_BITS);
        let states = post.states.detach();
        let mean = |t: &Tensor<1>| host(t.clone().mean().inner())[0] as f64;
        let (d, r, c) = (mean(&decoder), mean(&reward), mean(&cont));
        let (kd, kr) = (mean(&kl.dynamics), mean(&kl.representation));
        let prediction = loss::prediction_loss(decoder, reward, cont);
        let total = loss::world_model_loss(prediction, kl.dynamics, kl.representation).mean();
        let t = mean(&total);
        let terms = WorldModelLosses {
            decoder: d,
            reward: r,
            cont: c,
            kl_dyn: kd,
            kl_rep: kr,
            total: t,
        };
        Ok((total, terms, states))
    }

    /// One Adam step of the world model on `batch`; returns its loss terms as metrics and
    /// the posterior states (detached, time-major), where imagination starts.
    pub fn train_world_model(
        &mut self,
        batch: &SequenceBatch,
        progress: &Progress,
    ) -> Result<(Metrics, RssmState), RlError> {
        let mut rng = self.rng.clone();
        let (total, terms, states) = self.world_model_loss(batch, &mut rng)?;
        self.rng = rng;
        rl_training_core::algorithm::check_losses(
            progress.num_timesteps,
            &[("losses/world_model", terms.total)],
        )?;
        let g = flat_grads(&self.world_model, total.backward(), &self.device);
        let lr = self.cfg.world_model_lr;
        let (wm, stats) = self.wm_opt.step_flat(lr, self.world_model.clone(), g);
        self.world_model = wm;
        let mut m = terms.metrics();
        let grad_norm = stats.grad_norm as f64;
        m.insert("losses/world_model_grad_norm".into(), grad_norm);
        Ok((m, states))
    }

    /// The imagined trajectory for REINFORCE (either action kind): no gradient flows through
    /// it, so it runs on inference copies of the networks, without autodiff.
    fn imagine(&mut self, start: RssmState) -> Imagined {
        let (h, n) = (self.cfg.horizon_h, start.h.dims()[0]);
        let (wm, actor, critic) = (
            self.world_model.valid(),
            self.actor.valid(),
            self.critic.valid(),
        );
        let start = RssmState {
            h: start.h.inner(),
            z: start.z.inner(),
        };
        let inner = start.h.device();
        let mut states = vec![start];
        let mut actions = Vec::with_capacity(h * n);
        for t in 0..h {
            let a = draw_actions(&actor, states[t].features(), &mut self.rng, Pick::Sample);
            let k = a.len() / n;
            let a_t = tensor2(&a, n, k, &inner);
            let next = wm.rssm.imagine(states[t].clone(), a_t, &mut self.rng);
            actions.extend(a);
            states.push(next);
        }
        let feats = Tensor::cat(states.iter().map(|s| s.features()).collect(), 0);
        // Predictions without gradient are decoded on the host, one pass per row.
        let rewards = self
            .two_hot
            .decode_host(&host(wm.reward.forward(feats.clone())));
        let cont = host(sigmoid(wm.cont.forward(feats.clone()).squeeze_dim::<1>(1)));
        let values = self
            .two_hot
            .decode_host(&host(critic.logits(feats.clone())));
        Imagined {
            feats: Tensor::from_inner(feats),
            actions,
            rewards,
            cont,
            values,
            reward_t: None,
            value_t: None,
        }
    }

    /// The imagined trajectory for dynamics backpropagation (Box actions): reparameterized
    /// actions `μ + σ·ε` (ε from the learner's generator), the world model and the critic on
    /// the autodiff device, so the predicted rewards and values carry the gradient back
    /// through the imagined states to every action. Only the actor's parameters take a step
    /// from it; the continue predictions enter as constants.
    fn imagine_differentiable(&mut self, start: RssmState) -> Imagined {
        let dev = self.device.clone();
        let (h, n) = (self.cfg.horizon_h, start.h.dims()[0]);
        let mut states = vec![start];
        for t in 0..h {
            // The actor reads the state without its gradient (RLlib's and DreamerV2's): the
            // returns reach each action through the dynamics, not through the actor's input.
            let (mean, std) = self.actor.normal(states[t].features().detach());
            let k = mean.dims()[1];
            let eps: Vec<f32> = (0..n * k).map(|_| self.rng.normal() as f32).collect();
            let a = mean + std * tensor2(&eps, n, k, &dev);
            let next = self
                .world_model
                .rssm
                .imagine(states[t].clone(), a, &mut self.rng);
            states.push(next);
        }
        let feats = Tensor::cat(states.iter().map(|s| s.features()).collect(), 0);
        let reward = self
            .two_hot
            .decode(self.world_model.reward.forward(feats.clone()));
        let value = self.two_hot.decode(self.critic.logits(feats.clone()));
        let cont = host(sigmoid(
            self.world_model
                .cont
                .forward(feats.clone().detach())
                .squeeze_dim::<1>(1),
        ));
        Imagined {
            feats: feats.detach(),
            // Not read back: the actor's gradient comes through the returns.
            actions: Vec::new(),
            rewards: host(reward.clone().detach()),
            cont,
            values: host(value.clone().detach()),
            reward_t: Some(reward.reshape([h + 1, n])),
            value_t: Some(value.reshape([h + 1, n])),
        }
    }

    /// Imagines `horizon_H` steps from each of `start`'s states with the actor (actions drawn
    /// from its policy), then one critic step (λ-returns and the slow critic as targets) and,
    /// if `train_actor`, one actor step (REINFORCE with the scaled advantages and the entropy
    /// bonus). `terminated` marks start states that end an episode (nothing follows them).
    pub fn train_behavior(
        &mut self,
        start: RssmState,
        terminated: &[f32],
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let dev = self.device.clone();
        let (h, n) = (self.cfg.horizon_h, start.h.dims()[0]);
        let (g, l) = (self.cfg.gamma, self.cfg.gae_lambda);
        let dynamics = self.cfg.train_actor
            && self.actor.is_continuous()
            && self.cfg.continuous_actor_gradient == ContinuousActorGradient::Dynamics;
        let imagined = if dynamics {
            self.imagine_differentiable(start.detach())
        } else {
            self.imagine(start)
        };
        let Imagined {
            feats,
            actions,
            rewards,
            mut cont,
            values,
            reward_t,
            value_t,
        } = imagined;
        // The start state's continue flag is the replayed one.
        for (c, d) in cont.iter_mut().zip(terminated) {
            *c = 1.0 - d;
        }
        let as_tensor = |v: &[f32]| tensor2(v, h + 1, n, &dev);
        let c = as_tensor(&cont);
        // With dynamics backpropagation the λ-returns keep their gradient (through the
        // predicted rewards and values into the imagined states and actions); the critic's
        // targets and the statistics are their values.
        let returns_t = match (reward_t, value_t) {
            (Some(r), Some(v)) => Some(lambda_returns(r, c, v, g, l)),
            _ => None,
        };
        let returns = match &returns_t {
            Some(rt) => host(rt.clone().detach()),
            None => host(lambda_returns(
                as_tensor(&rewards),
                as_tensor(&cont),
                as_tensor(&values),
                g,
                l,
            )),
        };
        // Reach weights: w_0 = c_0, w_t = w_{t−1}·γ·c_t.
        let mut weight = cont[..n].to_vec();
        for t in 1..h {
            let next: Vec<f32> = (0..n)
                .map(|i| weight[(t - 1) * n + i] * g as f32 * cont[t * n + i])
                .collect();
            weight.extend(next);
        }
        let scale = self.return_scale.update(&returns);
        let rows = h * n;
        let feats_h = feats.narrow(0, 0, rows);
        let weight_host = weight;
        let weight = tensor1(weight_host.clone(), &dev);

        let ema = self.critic_ema.valid().logits(feats_h.clone().inner());
        let ema_values = self.two_hot.decode_host(&host(ema));
        let logits = self.critic.logits(feats_h.clone());
        // Both cross-entropies and their gradient in one host pass over the `[H·N, 255]`
        // logits (equal weights: the regularizer's weight is 1); the step back-propagates
        // that gradient through `Σ logits ⊙ sg(gradient)`.
        const _: () = assert!(loss::CRITIC_EMA_REGULARIZER == 1.0);
        let per_row: Vec<f32> = weight_host.iter().map(|w| w / rows as f32).collect();
        let bins = self.two_hot.len();
        let lh = host(logits.clone().inner());
        let (ce, grad) = self
            .two_hot
            .ce_and_grad(&lh, &[&returns, &ema_values], &per_row);
        let [return_ce, ema_ce] = [&ce[0], &ce[1]].map(|v| tensor1(v.clone(), &dev));
        let critic_total = loss::critic_loss(return_ce, ema_ce, weight.clone()).mean();
        let critic_loss = host(critic_total.inner())[0] as f64;
        let critic_surrogate = (logits * tensor2(&grad, rows, bins, &dev)).sum();

        // The taken actions' log-probabilities only for REINFORCE (dynamics backpropagation
        // differentiates the returns instead).
        let taken = || tensor2(&actions, rows, actions.len() / rows.max(1), &dev);
        let (log_prob, entropy) = match self.actor.is_continuous() {
            false => {
                let probs = self.actor.probs(feats_h);
                let log_probs = probs.clone().log();
                let log_prob = (log_probs.clone() * taken()).sum_dims_squeeze::<1, _>(&[1]);
                (
                    Some(log_prob),
                    -(probs * log_probs).sum_dims_squeeze::<1, _>(&[1]),
                )
            }
            true => {
                let (mean, std) = self.actor.normal(feats_h);
                let log_std = std.log();
                let log_prob = returns_t
                    .is_none()
                    .then(|| diag_gaussian_log_prob(mean, log_std.clone(), taken()));
                (log_prob, diag_gaussian_entropy(log_std))
            }
        };
        let mean_entropy = host(entropy.clone().mean().inner())[0] as f64;
        let eta = self.cfg.entropy_scale;
        let actor_total = match (returns_t, log_prob) {
            (Some(rt), _) => {
                let scaled = rt.reshape([rows]).div_scalar(scale);
                loss::actor_loss_dynamics(scaled, entropy, eta, weight).mean()
            }
            (None, log_prob) => {
                let log_prob = log_prob.expect("REINFORCE computes the log-probabilities");
                let adv: Vec<f32> = (0..rows)
                    .map(|i| (returns[i] - values[i]) / scale as f32)
                    .collect();
                loss::actor_loss(log_prob, tensor1(adv, &dev), entropy, eta, weight).mean()
            }
        };
        let actor_loss = host(actor_total.clone().inner())[0] as f64;
        rl_training_core::algorithm::check_losses(
            progress.num_timesteps,
            &[("losses/critic", critic_loss), ("losses/actor", actor_loss)],
        )?;

        let grads = flat_grads(&self.critic, critic_surrogate.backward(), &dev);
        let lr = self.cfg.critic_lr;
        self.critic = self.critic_opt.step_flat(lr, self.critic.clone(), grads).0;
        self.critic_ema = polyak(self.critic_ema.clone(), &self.critic, CRITIC_EMA_RATE);
        let mut m = Metrics::new();
        if self.cfg.train_actor {
            let grads = flat_grads(&self.actor, actor_total.backward(), &dev);
            let lr = self.cfg.actor_lr;
            self.actor = self.actor_opt.step_flat(lr, self.actor.clone(), grads).0;
            m.insert("losses/actor".into(), actor_loss);
            m.insert("losses/entropy".into(), mean_entropy);
        }
        let mean = |v: &[f32]| v.iter().map(|x| *x as f64).sum::<f64>() / v.len().max(1) as f64;
        m.insert("losses/critic".into(), critic_loss);
        m.insert("dreamer/return_scale".into(), scale);
        m.insert("dreamer/imagined_return".into(), mean(&returns));
        m.insert("dreamer/imagined_value".into(), mean(&values[..rows]));
        m.insert("dreamer/imagined_reward".into(), mean(&rewards[n..]));
        m.insert("dreamer/imagined_continue".into(), mean(&cont[n..]));
        Ok(m)
    }

    /// The actor.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The critic.
    pub fn critic(&self) -> &Critic {
        &self.critic
    }
}

/// The learner's entry in `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LearnerEntry {
    /// Steps of the world model's, actor's and critic's optimizers.
    optimizer_steps: [u64; 3],
    /// Latent samples and imagined actions.
    rng: Rng,
    /// The return scale's EMAs.
    return_scale: ReturnScale,
}

/// The weights' prefixes in `model.safetensors` (the acting side needs the first two).
const WORLD_MODEL: &str = "world_model.";
const ACTOR: &str = "actor.";
const CRITIC: &str = "critic.";
const CRITIC_EMA: &str = "critic_ema.";

impl Learner for DreamerV3Learner {
    type Batch = SequenceBatch;

    /// One update on a replayed batch (RLlib's learner step): the world model's step, then,
    /// if `train_critic`, the critic's and actor's in imagination from every posterior state.
    fn update(&mut self, batch: &SequenceBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let (mut m, states) = self.train_world_model(batch, progress)?;
        if self.cfg.train_critic {
            m.extend(self.train_behavior(states, &batch.is_terminated, progress)?);
        }
        Ok(m)
    }

    /// World model, actor and critic (the slow critic is learner state).
    fn weights(&self) -> TensorMap {
        let mut w = TensorMap::default();
        w.extend_prefixed(WORLD_MODEL, module_tensors(&self.world_model));
        w.extend_prefixed(ACTOR, module_tensors(&self.actor));
        w.extend_prefixed(CRITIC, module_tensors(&self.critic));
        w
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        let mut w = weights.clone();
        let dev = &self.device;
        let file = "weights";
        let wm = w.split_off_prefix(WORLD_MODEL);
        self.world_model = load_module_tensors(self.world_model.clone(), &wm, file, dev)?;
        let actor = w.split_off_prefix(ACTOR);
        self.actor = load_module_tensors(self.actor.clone(), &actor, file, dev)?;
        let critic = w.split_off_prefix(CRITIC);
        self.critic = load_module_tensors(self.critic.clone(), &critic, file, dev)?;
        Ok(())
    }

    /// `model.safetensors` (the weights and the slow critic), `optimizer.safetensors` (the
    /// three Adams' moments), and the steps, generator and return scale in `state.json`.
    fn save_state(&self) -> LearnerState {
        let mut model = self.weights();
        model.extend_prefixed(CRITIC_EMA, module_tensors(&self.critic_ema));
        let mut opt = TensorMap::default();
        let optimizer_steps = [
            self.wm_opt.save("world_model", &mut opt),
            self.actor_opt.save("actor", &mut opt),
            self.critic_opt.save("critic", &mut opt),
        ];
        let mut state = LearnerState::default();
        state.file("model.safetensors", model.to_bytes());
        state.file("optimizer.safetensors", opt.to_bytes());
        let entry = LearnerEntry {
            optimizer_steps,
            rng: self.rng.clone(),
            return_scale: self.return_scale.clone(),
        };
        state.insert("dreamer", entry);
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let e: LearnerEntry = state_entry(ck, entries, "dreamer")?;
        let dev = self.device.clone();
        let path = ck.path_of("model.safetensors");
        let mut model = TensorMap::from_bytes(ck.file("model.safetensors")?, &path)?;
        let ema = model.split_off_prefix(CRITIC_EMA);
        self.critic_ema = load_module_tensors(self.critic_ema.clone(), &ema, &path, &dev)?;
        self.set_weights(&model)?;
        let path = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &path)?;
        let [w, a, c] = e.optimizer_steps;
        let n_wm = num_params(&self.world_model);
        self.wm_opt
            .load("world_model", &mut opt, w, n_wm, &path, &dev)?;
        let n_actor = num_params(&self.actor);
        self.actor_opt
            .load("actor", &mut opt, a, n_actor, &path, &dev)?;
        let n_critic = num_params(&self.critic);
        self.critic_opt
            .load("critic", &mut opt, c, n_critic, &path, &dev)?;
        self.rng = e.rng;
        self.return_scale = e.return_scale;
        Ok(())
    }
}

/// How the actor picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Sampled (collection, imagination, stochastic `predict`).
    Sample,
    /// The policy's mode (deterministic `predict`).
    Mode,
}

/// An imagined trajectory, time-major `[(H + 1)·N]` rows: the model states (no gradient),
/// the actions taken from rows `0..H` (REINFORCE only), and the world model's and critic's predictions; for
/// dynamics backpropagation also the rewards and values `[H + 1, N]` with their gradient.
struct Imagined {
    feats: Tensor<2>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    cont: Vec<f32>,
    values: Vec<f32>,
    reward_t: Option<Tensor<2>>,
    value_t: Option<Tensor<2>>,
}

/// Actions for each row of `features` on the host, drawn with `rng`: one-hot rows for
/// discrete actions; for Box actions the normal's sample (or mean), in the policy's [−1, 1]
/// scale (samples may leave it; the env side clips).
pub fn draw_actions(actor: &Actor, features: Tensor<2>, rng: &mut Rng, pick: Pick) -> Vec<f32> {
    if actor.is_continuous() {
        let (mean, std) = actor.normal(features);
        let (mean, std) = (host(mean), host(std));
        match pick {
            Pick::Sample => mean
                .iter()
                .zip(&std)
                .map(|(m, s)| m + s * rng.normal() as f32)
                .collect(),
            Pick::Mode => mean,
        }
    } else {
        let probs = actor.probs(features);
        let k = probs.dims()[1];
        let p = host(probs);
        match pick {
            Pick::Sample => draw_one_hot(&p, k, rng),
            Pick::Mode => argmax_one_hot(&p, k),
        }
    }
}
