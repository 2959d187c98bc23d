//! Random network distillation (Burda et al. 2018; CleanRL's `ppo_rnd_envpool.py`): a fixed
//! random target net and a predictor trained to match it on normalized next observations.
//! The prediction error is the intrinsic reward, divided by the running standard deviation
//! of its discounted, non-episodic sum. On-policy, CleanRL's two value streams: an intrinsic
//! critic of the plugin's own learns the non-episodic intrinsic return, and the learner sees
//! the advantages `ext_coef · A_ext + int_coef · A_int` (its own critic keeps the env's
//! returns); on replayed batches the learner sees the reward `ext_coef · r + int_coef · r_int`.

use crate::config::RndConfig;
use crate::loss::{forward_error, masked_mean};
use crate::{Transitions, load_optimizer, save_optimizer};
use rl_training_core::algorithm::{LearnerState, Progress, check_losses, state_entry};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::buffers::{RolloutBuffer, compute_gae};
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::ConfigError;
use rl_training_core::logger::Metrics;
use rl_training_core::nn::{Mlp, MlpConfig};
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, load_module_tensors, module_tensors, num_params,
};
use rl_training_core::wrappers::RunningMeanStd;
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The nets RND trains (one Adam over both, as CleanRL's single optimizer).
#[derive(Module, Debug)]
struct Trained {
    /// Normalized next observation → the target's features.
    predictor: Mlp,
    /// Observation (network input) → the non-episodic intrinsic value.
    int_critic: Mlp,
}

/// The RND module: the fixed target, the predictor and the intrinsic critic, their Adam, the
/// generator of minibatches and update masks, and the running statistics.
#[derive(Debug)]
pub struct Rnd {
    cfg: RndConfig,
    target: Mlp,
    nets: Trained,
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
        // CleanRL's value heads: gain 0.01 on the output layer.
        let int_critic = MlpConfig {
            d_input: obs_dim,
            hidden: cfg.int_value_net_hiddens.clone(),
            d_output: Some(1),
            activation: cfg.activation,
            output_gain: 0.01,
            hidden_gain: 2f64.sqrt(),
        }
        .init(&mut init, device);
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
            nets: Trained {
                predictor,
                int_critic,
            },
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
        let (p, t) = (self.nets.predictor.valid(), self.target.valid());
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
        let epochs = epochs.unwrap_or(self.cfg.num_epochs);
        let mut m = self.train(&norm, t.n, epochs, None, progress)?;
        let mean = bonus.iter().map(|&b| (int * b) as f64).sum::<f64>() / t.n as f64;
        m.insert("curiosity/intrinsic_reward_mean".into(), mean);
        Ok(m)
    }

    /// On-policy, before GAE: the env's rewards give the learner's returns and advantages
    /// (`gamma`, `gae_lambda`); the normalized prediction errors, with the intrinsic critic's
    /// values, give non-episodic intrinsic advantages (`int_gamma`, `gae_lambda`: the trace
    /// runs on across episode ends, as CleanRL's); the buffer's advantages become
    /// `ext_coef · A_ext + int_coef · A_int`. Then `num_epochs` passes train the predictor and
    /// the intrinsic critic (towards its returns `A_int + V_int`).
    pub fn relabel_rollout(
        &mut self,
        buf: &mut RolloutBuffer,
        gamma: f32,
        gae_lambda: f32,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let (n, envs, od) = (buf.rewards.len(), buf.n_envs, self.obs_dim);
        if n == 0 {
            return Ok(Metrics::new());
        }
        self.stats.obs_rms.update_batch(&buf.next_obs);
        let norm = self.normalized(&buf.next_obs);
        let mut bonus = self.errors(&norm, n);
        self.normalize_rewards(&mut bonus, Some(envs));
        buf.recompute_returns_and_advantage(gamma, gae_lambda);
        let values = self.int_values(&buf.obs, n);
        // The last step's next observation bootstraps the intrinsic stream, episode end or not.
        let last = self.int_values(&buf.next_obs[(n - envs) * od..], envs);
        let (mut adv, mut ret) = (vec![0.0; n], vec![0.0; n]);
        let (never, g_int) = (vec![0.0; n], self.cfg.int_gamma as f32);
        let zeros = &never[..envs];
        compute_gae(
            &bonus, &values, &never, &last, zeros, g_int, gae_lambda, &mut adv, &mut ret,
        );
        let (ext, int) = (self.cfg.ext_coef as f32, self.cfg.int_coef as f32);
        for (a, ai) in buf.advantages.iter_mut().zip(&adv) {
            *a = ext * *a + int * ai;
        }
        let targets = Some((&buf.obs[..], &ret[..]));
        let mut m = self.train(&norm, n, self.cfg.num_epochs, targets, progress)?;
        let mean = bonus.iter().map(|&b| (int * b) as f64).sum::<f64>() / n as f64;
        m.insert("curiosity/intrinsic_reward_mean".into(), mean);
        Ok(m)
    }

    /// The intrinsic critic's values of `n` observation rows.
    fn int_values(&self, obs: &[f32], n: usize) -> Vec<f32> {
        let dev = self.device.clone().inner();
        let x = tensor2(obs[..n * self.obs_dim].to_vec(), n, self.obs_dim, &dev);
        host(self.nets.int_critic.valid().forward(x))
    }

    /// `epochs` passes over the normalized observations in shuffled minibatches, each row
    /// kept for the predictor with probability `update_proportion`; with `values`
    /// (observations, intrinsic returns) the intrinsic critic regresses on every row of the
    /// minibatch too (`½·MSE`, CleanRL's). Returns the means of `losses/rnd` (and
    /// `losses/int_value`).
    fn train(
        &mut self,
        norm: &[f32],
        n: usize,
        epochs: usize,
        values: Option<(&[f32], &[f32])>,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let od = self.obs_dim;
        let mb = self.cfg.minibatch_size.min(n);
        let dev = self.device.clone();
        let (mut sum, mut sum_v, mut steps) = (0.0, 0.0, 0usize);
        for _ in 0..epochs {
            let perm = self.rng.permutation(n);
            for rows in perm.chunks(mb) {
                let k = rows.len();
                let mask: Vec<f32> = (0..k)
                    .map(|_| (self.rng.uniform() < self.cfg.update_proportion) as u8 as f32)
                    .collect();
                let x = tensor2(crate::gather(norm, od, rows), k, od, &dev);
                // The fixed target runs outside autodiff: a detached graph of its own would
                // never be walked by `backward` and would pile up in the autodiff state.
                let target = Tensor::from_inner(self.target.valid().forward(x.clone().inner()));
                let d = self.nets.predictor.forward(x) - target;
                let err = (d.clone() * d).mean_dim(1).squeeze_dim::<1>(1);
                let kept = mask.iter().sum::<f32>();
                let rnd_loss = masked_mean(err, tensor1(mask, &dev), kept);
                let lv = host(rnd_loss.clone().inner())[0] as f64;
                let (loss, vv) = match values {
                    Some((obs, returns)) => {
                        let x = tensor2(crate::gather(obs, od, rows), k, od, &dev);
                        let v = self.nets.int_critic.forward(x).squeeze_dim::<1>(1);
                        let d = v - tensor1(crate::gather(returns, 1, rows), &dev);
                        let value_loss = (d.clone() * d).mean() * 0.5;
                        let vv = host(value_loss.clone().inner())[0] as f64;
                        (rnd_loss + value_loss, vv)
                    }
                    None => (rnd_loss, 0.0),
                };
                let named = [("losses/rnd", lv), ("losses/int_value", vv)];
                check_losses(progress.num_timesteps, &named)?;
                let g = flat_grads(&self.nets, loss.backward(), &dev);
                self.nets = self.opt.step_flat(self.cfg.lr, self.nets.clone(), g).0;
                sum += lv;
                sum_v += vv;
                steps += 1;
            }
        }
        let mut m = Metrics::new();
        m.insert("losses/rnd".into(), sum / steps.max(1) as f64);
        if values.is_some() {
            m.insert("losses/int_value".into(), sum_v / steps.max(1) as f64);
        }
        Ok(m)
    }

    /// The nets (`curiosity.safetensors`), Adam's state, the generator and the statistics.
    pub fn save_state(&self) -> LearnerState {
        let mut nets = TensorMap::default();
        nets.extend_prefixed("target.", module_tensors(&self.target));
        nets.extend_prefixed("predictor.", module_tensors(&self.nets.predictor));
        nets.extend_prefixed("int_critic.", module_tensors(&self.nets.int_critic));
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
        let predictor = load_module_tensors(self.nets.predictor.clone(), &predictor, &file, dev)?;
        let critic = nets.split_off_prefix("int_critic.");
        let int_critic = load_module_tensors(self.nets.int_critic.clone(), &critic, &file, dev)?;
        self.nets = Trained {
            predictor,
            int_critic,
        };
        let n = num_params(&self.nets);
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
            int_value_net_hiddens: vec![8],
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

    #[test]
    fn on_policy_rnd_keeps_two_streams_and_the_intrinsic_one_runs_across_episode_ends() {
        let mut r = rnd();
        // 3 steps × 2 envs, time-major; env 0's episode ends after step 0 (step 1 starts one).
        let obs: Vec<f32> = (0..6)
            .flat_map(|i| [i as f32 * 0.5, 1.0 - i as f32])
            .collect();
        let next: Vec<f32> = (0..6)
            .flat_map(|i| [i as f32 * 0.5 + 0.3, -(i as f32)])
            .collect();
        let mut buf = RolloutBuffer::new(3, 2, 2, 1);
        let starts = [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]];
        for t in 0..3 {
            let o = &obs[t * 4..(t + 1) * 4];
            let rew = [t as f32, 0.5];
            let vals = [0.1 * t as f32, -0.2];
            buf.add(o, &[0.0, 1.0], &rew, &starts[t], &vals, &[0.0, 0.0]);
        }
        buf.next_obs = next.clone();
        buf.last_values = vec![0.3, 0.4];
        buf.last_dones = vec![0.0, 1.0];
        let (g, l) = (0.9f32, 0.8f32);
        // By hand, before the module trains: the env's stream as plain GAE, the intrinsic one
        // with no episode ends and the last next observation's value as its bootstrap.
        let mut ext = buf.clone();
        ext.recompute_returns_and_advantage(g, l);
        let bonus = r.clone_stats_for_test_rollout(&next);
        let v = r.int_values(&obs, 6);
        let v_last = r.int_values(&next[8..], 2);
        let gi = r.cfg.int_gamma as f32;
        let mut a_int = [0.0f32; 6];
        for e in 0..2 {
            let mut acc = 0.0;
            for t in (0..3).rev() {
                let i = t * 2 + e;
                let next_v = if t == 2 { v_last[e] } else { v[i + 2] };
                acc = bonus[i] + gi * next_v - v[i] + gi * l * acc;
                a_int[i] = acc;
            }
        }
        let m = r
            .relabel_rollout(&mut buf, g, l, &Progress::default())
            .unwrap();
        for i in 0..6 {
            let want = 2.0 * ext.advantages[i] + 1.0 * a_int[i];
            assert!((buf.advantages[i] - want).abs() < 1e-5, "row {i}: {buf:?}");
            // The learner's critic keeps the env's returns, and the rewards are the env's.
            assert_eq!(buf.returns[i], ext.returns[i]);
            assert_eq!(buf.rewards[i], ext.rewards[i]);
        }
        assert!(m["losses/int_value"] > 0.0 && m["losses/rnd"] > 0.0);
        // The intrinsic critic trained towards its returns A_int + V_int.
        let ret: Vec<f32> = (0..6).map(|i| a_int[i] + v[i]).collect();
        let err = |v: &[f32]| {
            v.iter()
                .zip(&ret)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f32>()
        };
        let before = err(&v);
        for _ in 0..30 {
            r.train(
                &r.normalized(&next),
                6,
                1,
                Some((&obs, &ret)),
                &Progress::default(),
            )
            .unwrap();
        }
        assert!(err(&r.int_values(&obs, 6)) < before * 0.5);
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

        /// The same for a 3-step, 2-env rollout's next observations.
        fn clone_stats_for_test_rollout(&self, next: &[f32]) -> Vec<f32> {
            let mut rms = self.stats.obs_rms.clone();
            rms.update_batch(next);
            let mut norm = next.to_vec();
            for row in norm.chunks_mut(2) {
                rms.normalize(row);
                row.iter_mut().for_each(|x| *x = x.clamp(-5.0, 5.0));
            }
            let e = self.errors(&norm, 6);
            let g = self.cfg.int_gamma as f32;
            let mut f = [0.0f32; 2];
            let returns: Vec<f32> = (0..6)
                .map(|i| {
                    f[i % 2] = f[i % 2] * g + e[i];
                    f[i % 2]
                })
                .collect();
            let mut rr = RunningMeanStd::new(1);
            rr.update_batch(&returns);
            let std = (rr.var[0] + 1e-8).sqrt() as f32;
            e.iter().map(|x| x / std).collect()
        }
    }
}
