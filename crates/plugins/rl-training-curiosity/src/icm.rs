//! The intrinsic curiosity module (Pathak et al. 2017, RLlib's `IntrinsicCuriosityModel`):
//! networks, Adam, the minibatch generator.

use crate::config::IcmConfig;
use crate::loss::{ActionParts, forward_error, icm_loss, inverse_loss};
use crate::model::IcmModel;
use crate::{Transitions, add_bonus, gather, load_optimizer, save_optimizer};
use rl_training_core::algorithm::{LearnerState, Progress, check_losses, state_entry};
use rl_training_core::batch::{host, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::config::ConfigError;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{flat_grads, module_tensors, num_params};
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The intrinsic curiosity module: networks, Adam, the minibatch generator.
#[derive(Debug)]
pub struct Icm {
    cfg: IcmConfig,
    model: IcmModel,
    opt: FlatOptimizer,
    rng: Rng,
    act_space: Space,
    parts: ActionParts,
    obs_dim: usize,
    act_dim: usize,
    device: Device,
}

/// The `curiosity` entry of `state.json`.
#[derive(Debug, Serialize, Deserialize)]
struct IcmEntry {
    optimizer_steps: u64,
    rng: Rng,
}

impl Icm {
    /// A fresh module for the spaces (Discrete, MultiDiscrete or Box actions).
    pub fn new(
        cfg: IcmConfig,
        obs_space: &Space,
        act_space: &Space,
        seed: u64,
        device: &Device,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let parts = match act_space {
            Space::Discrete { n, .. } => ActionParts::Categorical(vec![(0, *n)]),
            Space::MultiDiscrete { nvec } => {
                let mut lo = 0;
                ActionParts::Categorical(
                    nvec.iter()
                        .map(|&n| {
                            lo += n;
                            (lo - n, lo)
                        })
                        .collect(),
                )
            }
            Space::Box { .. } => ActionParts::Continuous,
            other => {
                return Err(ConfigError::new(
                    "curiosity.type",
                    format!(
                        "ICM needs Discrete, MultiDiscrete or Box actions, the env has {}",
                        other.describe()
                    ),
                ));
            }
        };
        let (obs_dim, act_dim) = (obs_space.flat_dim(), act_space.flat_dim());
        let mut init = Rng::for_stream(seed, "curiosity_init");
        let model = IcmModel::new(&cfg, obs_dim, act_dim, &mut init, device);
        let opt = FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.grad_clip);
        Ok(Self {
            rng: Rng::for_stream(seed, "curiosity_batch"),
            cfg,
            model,
            opt,
            act_space: act_space.clone(),
            parts,
            obs_dim,
            act_dim,
            device: device.clone(),
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &IcmConfig {
        &self.cfg
    }

    /// The networks.
    pub fn model(&self) -> &IcmModel {
        &self.model
    }

    /// Replaces the networks (tests set hand-made weights).
    pub fn set_model(&mut self, model: IcmModel) {
        self.model = model;
    }

    /// Encoded actions `[rows × act_dim]`: one-hot discrete parts, Box values as they are.
    fn encode_actions(&self, raw: &[f32], rows: usize) -> Vec<f32> {
        let d = raw.len() / rows.max(1);
        let mut out = Vec::with_capacity(rows * self.act_dim);
        for r in 0..rows {
            self.act_space.flatten(&raw[r * d..(r + 1) * d], &mut out);
        }
        out
    }

    /// The bonus of the current module added to `rewards`, then `epochs` passes of training
    /// (`None`: `num_epochs`).
    pub fn relabel(
        &mut self,
        t: &Transitions,
        rewards: &mut [f32],
        epochs: Option<usize>,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let actions = self.encode_actions(t.actions, t.n);
        let bonus = self.bonus(t, &actions, progress);
        let epochs = epochs.unwrap_or(self.cfg.num_epochs);
        let mut m = self.train_encoded(t, &actions, epochs, progress)?;
        add_bonus(rewards, &bonus, &mut m);
        Ok(m)
    }

    /// `η · ½‖φ̂(s′) − φ(s′)‖²` of each transition, with the module's inference copy and η
    /// where training stands (`progress`).
    pub fn rewards(&self, t: &Transitions, progress: &Progress) -> Vec<f32> {
        self.bonus(t, &self.encode_actions(t.actions, t.n), progress)
    }

    /// [`rewards`](Self::rewards) with the actions already encoded.
    fn bonus(&self, t: &Transitions, actions: &[f32], progress: &Progress) -> Vec<f32> {
        if t.n == 0 {
            return Vec::new();
        }
        let model = self.model.valid();
        let dev = self.device.clone().inner();
        let (n, od, ad) = (t.n, self.obs_dim, self.act_dim);
        let out = model.forward(
            tensor2(t.obs.to_vec(), n, od, &dev),
            tensor2(t.next_obs.to_vec(), n, od, &dev),
            tensor2(actions.to_vec(), n, ad, &dev),
        );
        let eta = self.cfg.intrinsic_reward_coeff.at(progress) as f32;
        host(forward_error(out.predicted_next_phi, out.next_phi))
            .into_iter()
            .map(|e| eta * e)
            .collect()
    }

    /// `epochs` passes over `t` in shuffled minibatches of `minibatch_size`, one Adam step
    /// each; returns the mean forward, inverse and total losses.
    pub fn train(
        &mut self,
        t: &Transitions,
        epochs: usize,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let actions = self.encode_actions(t.actions, t.n);
        self.train_encoded(t, &actions, epochs, progress)
    }

    /// [`train`](Self::train) with the actions already encoded.
    fn train_encoded(
        &mut self,
        t: &Transitions,
        actions: &[f32],
        epochs: usize,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let (n, od, ad) = (t.n, self.obs_dim, self.act_dim);
        let mb = self.cfg.minibatch_size.min(n.max(1));
        let beta = self.cfg.forward_loss_weight;
        let (mut fwd_sum, mut inv_sum, mut steps) = (0.0, 0.0, 0usize);
        let dev = self.device.clone();
        for _ in 0..epochs {
            let perm = self.rng.permutation(n);
            for rows in perm.chunks(mb) {
                let k = rows.len();
                let obs = tensor2(gather(t.obs, od, rows), k, od, &dev);
                let next = tensor2(gather(t.next_obs, od, rows), k, od, &dev);
                let act = tensor2(gather(actions, ad, rows), k, ad, &dev);
                let out = self.model.forward(obs, next, act.clone());
                let target = match self.cfg.detach_forward_target {
                    true => out.next_phi.clone().detach(),
                    false => out.next_phi.clone(),
                };
                let fwd = forward_error(out.predicted_next_phi, target).mean();
                let inv = inverse_loss(self.model.inverse(out.phi, out.next_phi), act, &self.parts);
                let (fv, iv) = (
                    host(fwd.clone().inner())[0] as f64,
                    host(inv.clone().inner())[0] as f64,
                );
                check_losses(
                    progress.num_timesteps,
                    &[("losses/icm_forward", fv), ("losses/icm_inverse", iv)],
                )?;
                let total = icm_loss(inv, fwd, beta);
                let g = flat_grads(&self.model, total.backward(), &dev);
                self.model = self.opt.step_flat(self.cfg.lr, self.model.clone(), g).0;
                fwd_sum += fv;
                inv_sum += iv;
                steps += 1;
            }
        }
        let s = steps.max(1) as f64;
        let mut m = Metrics::new();
        m.insert("losses/icm_forward".into(), fwd_sum / s);
        m.insert("losses/icm_inverse".into(), inv_sum / s);
        m.insert(
            "losses/icm_loss".into(),
            ((1.0 - beta) * inv_sum + beta * fwd_sum) / s,
        );
        Ok(m)
    }

    /// The networks, Adam's state and the generator.
    pub fn save_state(&self) -> LearnerState {
        let mut state = LearnerState::default();
        let optimizer_steps = save_optimizer(&self.opt, &mut state);
        let rng = self.rng.clone();
        state.insert(
            "curiosity",
            IcmEntry {
                optimizer_steps,
                rng,
            },
        );
        state.file(
            "curiosity.safetensors",
            module_tensors(&self.model).to_bytes(),
        );
        state
    }

    /// Restores [`save_state`](Self::save_state).
    pub fn load_state(
        &mut self,
        ck: &Checkpoint,
        entries: &Map<String, Value>,
    ) -> Result<(), RlError> {
        let e: IcmEntry = state_entry(ck, entries, "curiosity")?;
        let file = "curiosity.safetensors";
        self.model = read_module(ck, file, self.model.clone(), &self.device)?;
        let n = num_params(&self.model);
        load_optimizer(ck, &mut self.opt, e.optimizer_steps, n, &self.device)?;
        self.rng = e.rng;
        Ok(())
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use crate::{Curiosity, CuriosityConfig};
    use rl_training_core::params::set_module_tensors;
    use rl_training_core::replay::{NStep, Replay, ReplayConfig, TransitionBatch};

    /// An ICM with φ = identity on 2-d observations and zero forward and inverse nets, so
    /// φ̂(s′) = 0 and the inverse net's logits are 0.
    fn hand_made() -> Icm {
        let cfg = IcmConfig {
            feature_dim: 2,
            feature_net_hiddens: vec![],
            inverse_net_hiddens: vec![],
            forward_net_hiddens: vec![],
            intrinsic_reward_coeff: 0.05.into(),
            forward_loss_weight: 0.2,
            ..IcmConfig::default()
        };
        let device = Device::flex().autodiff();
        let obs = Space::uniform_box(-10.0, 10.0, &[2]);
        let act = Space::Discrete { n: 2, start: 0 };
        let mut icm = Icm::new(cfg, &obs, &act, 0, &device).unwrap();
        let mut w = module_tensors(icm.model());
        for (name, (_, data)) in w.0.iter_mut() {
            data.fill(0.0);
            if name.starts_with("feature_net") && name.ends_with("weight") {
                data[0] = 1.0;
                data[3] = 1.0;
            }
        }
        let mut model = icm.model().clone();
        set_module_tensors(&mut model, &w, &device).unwrap();
        icm.set_model(model);
        icm
    }

    #[test]
    fn reward_and_losses_on_a_hand_computed_batch() {
        let mut icm = hand_made();
        let t = Transitions {
            obs: &[1.0, 0.0, 0.0, 0.0],
            actions: &[1.0, 0.0],
            next_obs: &[3.0, 4.0, 0.0, 2.0],
            n: 2,
            envs: None,
        };
        // η · ½‖φ(s′) − 0‖²: 0.05 · 12.5 and 0.05 · 2.
        let r = icm.rewards(&t, &Progress::default());
        assert!(
            (r[0] - 0.625).abs() < 1e-6 && (r[1] - 0.1).abs() < 1e-6,
            "{r:?}"
        );
        // One minibatch of both rows: forward = mean(12.5, 2), inverse = ln 2 (zero logits).
        let m = icm.train(&t, 1, &Progress::default()).unwrap();
        let (fwd, inv) = (7.25, 2f64.ln());
        assert!((m["losses/icm_forward"] - fwd).abs() < 1e-5, "{m:?}");
        assert!((m["losses/icm_inverse"] - inv).abs() < 1e-5, "{m:?}");
        assert!(
            (m["losses/icm_loss"] - (0.8 * inv + 0.2 * fwd)).abs() < 1e-5,
            "{m:?}"
        );
        // The step moved φ̂ toward φ(s′): the same transitions are less surprising.
        let after = icm.rewards(&t, &Progress::default());
        assert!(after[0] < r[0], "{after:?} vs {r:?}");
    }

    #[test]
    fn a_detached_forward_target_leaves_the_features_to_the_inverse_loss() {
        // β = 1: only the forward loss. The hand-made forward net is zero, so φ(s) gets no
        // gradient through it; φ(s′) gets one as the target unless it is detached.
        let t = Transitions {
            obs: &[1.0, 0.0],
            actions: &[1.0],
            next_obs: &[3.0, 4.0],
            n: 1,
            envs: None,
        };
        let features = |icm: &Icm| module_tensors(&icm.model().feature_net);
        for (detach, moves) in [(false, true), (true, false)] {
            let mut icm = hand_made();
            icm.cfg.forward_loss_weight = 1.0;
            icm.cfg.detach_forward_target = detach;
            let before = features(&icm);
            icm.train(&t, 1, &Progress::default()).unwrap();
            assert_eq!(features(&icm) != before, moves, "detach {detach}");
        }
    }

    #[test]
    fn relabelled_batches_add_the_bonus_to_the_rewards_only() {
        let mut icm = Curiosity::Icm(hand_made());
        let mut b = TransitionBatch {
            indices: vec![0],
            obs: vec![1.0, 0.0],
            actions: vec![0.0],
            rewards: vec![1.0],
            next_obs: vec![3.0, 4.0],
            terminated: vec![0.0],
            truncated: vec![0.0],
            discounts: vec![0.99],
            weights: vec![1.0],
            lengths: vec![1],
        };
        // One-step rows: the replay is not read.
        let empty = Replay::new(ReplayConfig {
            capacity: 1,
            n_envs: 1,
            obs_dim: 2,
            act_dim: 1,
            n_step: NStep::Fixed(1),
            prioritized: None,
        });
        let m = icm
            .relabel_transitions(&mut b, &empty, 0.99, &Progress::default())
            .unwrap();
        assert!((b.rewards[0] - 1.625).abs() < 1e-6, "{:?}", b.rewards);
        assert!((m["curiosity/intrinsic_reward_mean"] - 0.625).abs() < 1e-6);
        // Recomputed with the current module: the same transition now earns less.
        let mut again = b.clone();
        again.rewards = vec![1.0];
        icm.relabel_transitions(&mut again, &empty, 0.99, &Progress::default())
            .unwrap();
        assert!(again.rewards[0] < 1.625, "{:?}", again.rewards);
    }

    #[test]
    fn an_n_step_row_earns_the_discounted_bonuses_of_its_steps() {
        use rl_training_core::replay::TransitionRef;
        // φ = identity, φ̂ = 0: each step's bonus is η · ½‖s′‖².
        let mut icm = Curiosity::Icm(hand_made());
        let mut replay = Replay::new(ReplayConfig {
            capacity: 8,
            n_envs: 1,
            obs_dim: 2,
            act_dim: 1,
            n_step: NStep::Fixed(2),
            prioritized: None,
        });
        let states = [[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 0.0]];
        for w in states.windows(2) {
            replay.add_one(TransitionRef {
                obs: &w[0],
                action: &[1.0],
                reward: 1.0,
                next_obs: &w[1],
                terminated: false,
                truncated: false,
            });
        }
        let g = 0.5;
        let mut b = replay.gather(vec![0], vec![1.0], g, &mut Rng::seed_from(0));
        assert_eq!((b.rewards[0], b.lengths[0]), (1.5, 2));
        // The row jumps from (0, 0) to (0, 2); its steps earn η/2 · 1 and η/2 · 4.
        let m = icm
            .relabel_transitions(&mut b, &replay, g, &Progress::default())
            .unwrap();
        let bonus = 0.05 * 0.5 * 1.0 + g * 0.05 * 0.5 * 4.0;
        assert!(
            (b.rewards[0] - (1.5 + bonus)).abs() < 1e-6,
            "{:?}",
            b.rewards
        );
        assert!((m["curiosity/intrinsic_reward_mean"] - 0.05 * 0.5 * 2.5).abs() < 1e-6);
    }

    #[test]
    fn the_coefficient_follows_its_schedule() {
        let mut icm = hand_made();
        icm.cfg.intrinsic_reward_coeff =
            rl_training_core::schedule::Schedule::parse(&serde_json::json!([
                [0, 0.05],
                [100, 0.0]
            ]))
            .unwrap();
        let t = Transitions {
            obs: &[1.0, 0.0],
            actions: &[1.0],
            next_obs: &[3.0, 4.0],
            n: 1,
            envs: None,
        };
        let at = |n: u64| {
            let p = Progress {
                num_timesteps: n,
                ..Progress::default()
            };
            icm.rewards(&t, &p)[0]
        };
        // ½‖(3, 4)‖² = 12.5.
        assert!((at(0) - 0.625).abs() < 1e-6 && (at(50) - 0.3125).abs() < 1e-6);
        assert_eq!(at(100), 0.0);
        let e = CuriosityConfig::from_value(
            &serde_json::json!({"type": "icm", "intrinsic_reward_coeff": [[0, 0.1], [10, -1.0]]}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("curiosity.intrinsic_reward_coeff"), "{e}");
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = CuriosityConfig::from_value(&serde_json::json!({"type": "icm", "lr": -1.0}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("curiosity.lr"), "{e}");
        let e = CuriosityConfig::from_value(&serde_json::json!({"type": "icm", "feature_dimm": 3}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("feature_dimm"), "{e}");
        let e = CuriosityConfig::from_value(&serde_json::json!({"type": "count"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("icm"), "{e}");
        let ok =
            CuriosityConfig::from_value(&serde_json::json!({"type": "icm", "learning_rate": 1e-3}))
                .unwrap();
        let CuriosityConfig::Icm(c) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(
            (c.lr, c.feature_dim, c.forward_loss_weight),
            (1e-3, 288, 0.2)
        );
    }
}
