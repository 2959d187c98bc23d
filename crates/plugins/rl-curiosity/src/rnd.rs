//! Random network distillation (Burda et al. 2018; CleanRL's `ppo_rnd_envpool.py`): a fixed
//! random target net and a predictor trained to match it on normalized next observations.
//! The prediction error is the intrinsic reward, divided by the running standard deviation
//! of its discounted, non-episodic sum; the learner sees `ext_coef · r + int_coef · r_int`.

use crate::config::RndConfig;
use crate::loss::{forward_error, masked_mean};
use crate::{Transitions, load_optimizer, save_optimizer};
use rl_core::algorithm::{LearnerState, Progress, check_losses, state_entry};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::burn::module::Module;
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::Checkpoint;
use rl_core::config::ConfigError;
use rl_core::logger::Metrics;
use rl_core::nn::{Mlp, MlpConfig};
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, load_module_tensors, module_tensors, num_params};
use rl_core::wrappers::RunningMeanStd;
use rl_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The RND module: target and predictor nets, the predictor's Adam, the generator of
/// minibatches and update masks, and the running statistics.
#[derive(Debug)]
pub struct Rnd {
    cfg: RndConfig,
    target: Mlp,
    predictor: Mlp,
    opt: FlatOptimizer,
    rng: Rng,
    stats: RndStats,
    obs_dim: usize,
    device: Device,
}

/// What RND keeps between batches besides the nets (a `curiosity` entry in `state.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RndStats {
    /// Of the next observations (the nets' inputs).
    obs_rms: RunningMeanStd,
    /// Of the discounted intrinsic returns (rollouts) or of the intrinsic rewards (replayed
    /// batches).
    reward_rms: RunningMeanStd,
    /// Each env's running discounted intrinsic return (CleanRL's `RewardForwardFilter`).
    filter: Vec<f64>,
}

/// The `curiosity` entry of `state.json`.
#[derive(Debug, Serialize, Deserialize)]
struct RndEntry {
    optimizer_steps: u64,
    rng: Rng,
    #[serde(flatten)]
    stats: RndStats,
}

impl Rnd {
    /// A fresh module for observations of `obs_space` (any action space).
    pub fn new(
        cfg: RndConfig,
        obs_space: &Space,
        seed: u64,
        device: &Device,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let obs_dim = obs_space.flat_dim();
        let mut init = Rng::for_stream(seed, "curiosity_init");
        // CleanRL's layer_init: orthogonal, gain √2 on every layer of both nets.
        let net = |hidden: &[usize]| MlpConfig {
            d_input: obs_dim,
            hidden: hidden.to_vec(),
            d_output: Some(cfg.feature_dim),
            activation: cfg.activation,
            output_gain: 2f64.sqrt(),
            hidden_gain: 2f64.sqrt(),
        };
        let target = net(&cfg.target_net_hiddens).init(&mut init, device);
        let predictor = net(&cfg.predictor_net_hiddens).init(&mut init, device);
        Ok(Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.grad_clip),
            rng: Rng::for_stream(seed, "curiosity_batch"),
            stats: RndStats {
                obs_rms: RunningMeanStd::new(obs_dim),
                reward_rms: RunningMeanStd::new(1),
                filter: Vec::new(),
            },
            cfg,
            target,
            predictor,
            obs_dim,
            device: device.clone(),
        })
    }

    /// Next observations normalized by the running statistics and clipped.
    fn normalized(&self, next_obs: &[f32]) -> Vec<f32> {
        let clip = self.cfg.obs_clip as f32;
        let mut out = next_obs.to_vec();
        for row in out.chunks_mut(self.obs_dim.max(1)) {
            self.stats.obs_rms.normalize(row);
            row.iter_mut().for_each(|x| *x = x.clamp(-clip, clip));
        }
        out
    }

    /// `½‖predictor(s′) − target(s′)‖²` per row of normalized next observations.
    fn errors(&self, norm: &[f32], n: usize) -> Vec<f32> {
        let dev = self.device.clone().inner();
        let x = tensor2(norm.to_vec(), n, self.obs_dim, &dev);
        let (p, t) = (self.predictor.valid(), self.target.valid());
        // The same ½‖·‖² per row as ICM's forward error.
        host(forward_error(p.forward(x.clone()), t.forward(x)))
    }

    /// Divides the errors by the running std of their discounted sum (per env, rows
    /// time-major, when `envs` is known; of the errors themselves otherwise).
    fn normalize_rewards(&mut self, errors: &mut [f32], envs: Option<usize>) {
        let s = &mut self.stats;
        match envs {
            Some(e) if e > 0 && errors.len().is_multiple_of(e) => {
                if s.filter.len() != e {
                    s.filter = vec![0.0; e];
                }
                let mut returns = Vec::with_capacity(errors.len());
                for (i, &r) in errors.iter().enumerate() {
                    let f = &mut s.filter[i % e];
                    *f = *f * self.cfg.int_gamma + r as f64;
                    returns.push(*f as f32);
                }
                s.reward_rms.update_batch(&returns);
            }
            _ => s.reward_rms.update_batch(errors),
        }
        let std = (s.reward_rms.var[0] + 1e-8).sqrt();
        errors
            .iter_mut()
            .for_each(|r| *r = (*r as f64 / std) as f32);
    }

    /// Updates the observation statistics with `t`'s next observations, sets each reward to
    /// `ext_coef · r + int_coef · r_int` (the normalized prediction error of the current
    /// predictor), then trains the predictor for `epochs` passes (`None`: `num_epochs`).
    pub fn relabel(
        &mut self,
        t: &Transitions,
        rewards: &mut [f32],
        epochs: Option<usize>,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        if t.n == 0 {
            return Ok(Metrics::new());
        }
        self.stats.obs_rms.update_batch(t.next_obs);
        let norm = self.normalized(t.next_obs);
        let mut bonus = self.errors(&norm, t.n);
        self.normalize_rewards(&mut bonus, t.envs);
        let (ext, int) = (self.cfg.ext_coef as f32, self.cfg.int_coef as f32);
        for (r, b) in rewards.iter_mut().zip(&bonus) {
            *r = ext * *r + int * b;
        }
        let mut m = self.train(&norm, t.n, epochs.unwrap_or(self.cfg.num_epochs), progress)?;
        let mean = bonus.iter().map(|&b| (int * b) as f64).sum::<f64>() / t.n as f64;
        m.insert("curiosity/intrinsic_reward_mean".into(), mean);
        Ok(m)
    }

    /// `epochs` passes over the normalized observations in shuffled minibatches, each row
    /// kept with probability `update_proportion`; returns the mean of `losses/rnd`.
    fn train(
        &mut self,
        norm: &[f32],
        n: usize,
        epochs: usize,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let od = self.obs_dim;
        let mb = self.cfg.minibatch_size.min(n);
        let dev = self.device.clone();
        let (mut sum, mut steps) = (0.0, 0usize);
        for _ in 0..epochs {
            let perm = self.rng.permutation(n);
            for rows in perm.chunks(mb) {
                let k = rows.len();
                let mask: Vec<f32> = (0..k)
                    .map(|_| (self.rng.uniform() < self.cfg.update_proportion) as u8 as f32)
                    .collect();
                let x = tensor2(crate::gather(norm, od, rows), k, od, &dev);
                let target = self.target.forward(x.clone()).detach();
                let d = self.predictor.forward(x) - target;
                let err = (d.clone() * d).mean_dim(1).squeeze_dim::<1>(1);
                let kept = mask.iter().sum::<f32>();
                let loss = masked_mean(err, tensor1(mask, &dev), kept);
                let lv = host(loss.clone().inner())[0] as f64;
                check_losses(progress.num_timesteps, &[("losses/rnd", lv)])?;
                let g = flat_grads(&self.predictor, loss.backward(), &dev);
                self.predictor = self.opt.step_flat(self.cfg.lr, self.predictor.clone(), g).0;
                sum += lv;
                steps += 1;
            }
        }
        let mut m = Metrics::new();
        m.insert("losses/rnd".into(), sum / steps.max(1) as f64);
        Ok(m)
    }

    /// Both nets (`curiosity.safetensors`), Adam's state, the generator and the statistics.
    pub fn save_state(&self) -> LearnerState {
        let mut nets = TensorMap::default();
        nets.extend_prefixed("target.", module_tensors(&self.target));
        nets.extend_prefixed("predictor.", module_tensors(&self.predictor));
        let mut state = LearnerState::default();
        let steps = save_optimizer(&self.opt, &mut state);
        let entry = RndEntry {
            optimizer_steps: steps,
            rng: self.rng.clone(),
            stats: self.stats.clone(),
        };
        state.insert("curiosity", entry);
        state.file("curiosity.safetensors", nets.to_bytes());
        state
    }

    /// Restores [`save_state`](Self::save_state).
    pub fn load_state(
        &mut self,
        ck: &Checkpoint,
        entries: &Map<String, Value>,
    ) -> Result<(), RlError> {
        let e: RndEntry = state_entry(ck, entries, "curiosity")?;
        let file = ck.path_of("curiosity.safetensors");
        let mut nets = TensorMap::from_bytes(ck.file("curiosity.safetensors")?, &file)?;
        let dev = &self.device;
        let target = nets.split_off_prefix("target.");
        self.target = load_module_tensors(self.target.clone(), &target, &file, dev)?;
        let predictor = nets.split_off_prefix("predictor.");
        self.predictor = load_module_tensors(self.predictor.clone(), &predictor, &file, dev)?;
        let n = num_params(&self.predictor);
        load_optimizer(ck, &mut self.opt, e.optimizer_steps, n, dev)?;
        if e.stats.obs_rms.mean.len() != self.obs_dim {
            return Err(RlError::Config(ConfigError::new(
                format!("{}: curiosity.obs_rms", ck.path_of("state.json")),
                format!(
                    "{} observation statistics, the env has {}",
                    e.stats.obs_rms.mean.len(),
                    self.obs_dim
                ),
            )));
        }
        self.rng = e.rng;
        self.stats = e.stats;
        Ok(())
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;

    fn rnd() -> Rnd {
        let cfg = RndConfig {
            feature_dim: 4,
            target_net_hiddens: vec![8],
            predictor_net_hiddens: vec![8],
            update_proportion: 1.0,
            lr: 1e-2,
            ..RndConfig::default()
        };
        let obs = Space::uniform_box(-10.0, 10.0, &[2]);
        Rnd::new(cfg, &obs, 0, &Device::flex().autodiff()).unwrap()
    }

    #[test]
    fn the_bonus_is_the_normalized_prediction_error_and_falls_with_training() {
        let mut r = rnd();
        let next = [1.0, 2.0, -1.0, 0.5, 3.0, -2.0, 0.0, 1.0];
        let t = Transitions {
            obs: &next,
            actions: &[0.0; 4],
            next_obs: &next,
            n: 4,
            envs: Some(2),
        };
        // What relabel must compute, by hand from the module's parts.
        let mut expect = r.clone_stats_for_test(&next);
        let mut rewards = vec![1.0; 4];
        let m = r
            .relabel(&t, &mut rewards, Some(1), &Progress::default())
            .unwrap();
        for (got, want) in rewards.iter().zip(expect.iter_mut()) {
            assert!(
                (got - (2.0 + *want)).abs() < 1e-5,
                "{rewards:?} vs 2 + {expect:?}"
            );
        }
        assert!(m["losses/rnd"] > 0.0);
        // The same observations again: the predictor has moved toward the target.
        let before: f32 = r.errors(&r.normalized(&next), 4).iter().sum();
        for _ in 0..50 {
            r.relabel(&t, &mut [0.0; 4], Some(1), &Progress::default())
                .unwrap();
        }
        let after: f32 = r.errors(&r.normalized(&next), 4).iter().sum();
        assert!(after < before * 0.5, "{before} → {after}");
    }

    impl Rnd {
        /// The normalized bonus relabel gives for `next` on a fresh module: statistics
        /// updated with `next`, errors of the normalized rows, divided by the std of the
        /// per-env discounted sums (2 envs, time-major).
        fn clone_stats_for_test(&self, next: &[f32]) -> Vec<f32> {
            let mut rms = self.stats.obs_rms.clone();
            rms.update_batch(next);
            let mut norm = next.to_vec();
            for row in norm.chunks_mut(2) {
                rms.normalize(row);
                row.iter_mut().for_each(|x| *x = x.clamp(-5.0, 5.0));
            }
            let e = self.errors(&norm, 4);
            let g = self.cfg.int_gamma as f32;
            let returns = [e[0], e[1], e[0] * g + e[2], e[1] * g + e[3]];
            let mut rr = RunningMeanStd::new(1);
            rr.update_batch(&returns);
            let std = (rr.var[0] + 1e-8).sqrt() as f32;
            e.iter().map(|x| x / std).collect()
        }
    }
}
