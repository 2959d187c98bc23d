//! rl-training-gail: adversarial imitation — GAIL (Ho & Ermon 2016) and AIRL (Fu, Luo, Levine 2018) —
//! with PPO (`rl-training-ppo`'s learner, unchanged) as the policy optimizer, as the `imitation`
//! library does. Every rollout: `n_disc_updates` discriminator steps on `disc_batch_size`
//! expert rows (from `expert_data_path`) against as many rollout rows, with a gradient penalty
//! on interpolates; the rollout's rewards are replaced by the discriminator's (GAIL
//! `−log(1 − D)`, AIRL `f − entropy_weight · log π`), keeping the truncation bootstrap;
//! advantages are recomputed; then PPO updates. Discrete and continuous actions.
#![warn(missing_docs)]

pub mod config;
pub mod loss;
pub mod model;

pub use config::{GailConfig, RewardType};
pub use model::{DiscInput, Discriminator};

use rl_training_core::algorithm::{
    Learner, LearnerState, Progress, RlError, check_losses, state_entry,
};
use rl_training_core::batch::{flatten_batch, host, tensor1, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{TensorMap, flat_grads, module_tensors, num_params};
use rl_training_core::wrappers::RunningMeanStd;
use rl_training_core::{Rng, Space};
use rl_training_offline::{Dataset, Transitions};
use rl_training_on_policy::{ActorCritic, BuildContext, OnPolicyAgent, OnPolicyLearner};
use rl_training_ppo::PpoLearner;
use serde_json::{Map, Value};
use std::path::Path;

/// A GAIL / AIRL agent: the shared on-policy agent around [`GailLearner`].
pub type Gail = OnPolicyAgent<GailLearner>;

/// Expert rows in the encodings the discriminator takes.
struct Expert {
    n: usize,
    /// `[n × obs]` flat observations.
    obs: Vec<f32>,
    /// `[n × (obs + act)]`.
    obs_act: Vec<f32>,
    /// `[n × obs]` flat next observations.
    next_obs: Vec<f32>,
    /// `[n]` 1 where the step terminated.
    terminated: Vec<f32>,
    /// `[n × act_dim]` raw actions (for log π).
    actions: Vec<f32>,
}

/// PPO's learner with the discriminator that relabels its rollouts' rewards.
pub struct GailLearner {
    cfg: GailConfig,
    ppo: PpoLearner,
    disc: Discriminator,
    opt_disc: FlatOptimizer,
    expert: Expert,
    act_space: Space,
    device: Device,
    rng_disc: Rng,
    /// Running statistics of the discriminator's observation inputs (`disc_normalize_input`).
    obs_rms: Option<RunningMeanStd>,
    /// Running statistics of the learned reward (`normalize_reward`).
    reward_rms: Option<RunningMeanStd>,
}

/// Flat observations and flat (one-hot) actions side by side, per row (only the observations
/// for a state-only reward).
fn obs_act(
    obs_flat: &[f32],
    act_raw: &[f32],
    d_obs: usize,
    act_space: &Space,
    state_only: bool,
) -> Vec<f32> {
    if state_only {
        return obs_flat.to_vec();
    }
    let ad = act_space.raw_dim().max(1);
    let n = obs_flat.len() / d_obs.max(1);
    let mut out = Vec::with_capacity(n * (d_obs + act_space.flat_dim()));
    for i in 0..n {
        out.extend_from_slice(&obs_flat[i * d_obs..(i + 1) * d_obs]);
        // The action the policy sampled, not the one the env clipped it to: log π is of this
        // action, and a Gaussian whose mean has left the bounds must still look unlike the
        // expert (clipped, every such action equals the bound, and the reward stops moving it).
        act_space.flatten(&act_raw[i * ad..(i + 1) * ad], &mut out);
    }
    out
}

fn load_expert(
    path: &str,
    env: &str,
    obs_space: &Space,
    act_space: &Space,
) -> Result<Transitions, RlError> {
    let mut ds = Dataset::open(Path::new(path))?;
    ds.fit(env, obs_space, act_space)?;
    let d = ds.read_all()?;
    if d.is_empty() {
        return Err(RlError::Config(rl_training_core::config::ConfigError::new(
            path,
            "no expert rows",
        )));
    }
    Ok(d)
}

impl GailLearner {
    /// The discriminator.
    pub fn discriminator(&self) -> &Discriminator {
        &self.disc
    }

    /// PPO's learner.
    pub fn ppo(&self) -> &PpoLearner {
        &self.ppo
    }

    /// Normalizes the leading `od` values of each `w`-wide row with the observation
    /// statistics, if kept.
    fn normalize(&self, rows: &mut [f32], od: usize, w: usize) {
        if let Some(rms) = &self.obs_rms {
            for row in rows.chunks_mut(w) {
                rms.normalize(&mut row[..od]);
            }
        }
    }

    /// Observations, flat actions (or observations only) and next observations, normalized.
    fn inputs(
        &self,
        mut obs: Vec<f32>,
        mut oa: Vec<f32>,
        mut next: Vec<f32>,
        od: usize,
    ) -> [Vec<f32>; 3] {
        let w = oa.len() / (obs.len() / od.max(1)).max(1);
        self.normalize(&mut obs, od, od);
        self.normalize(&mut next, od, od);
        self.normalize(&mut oa, od, w.max(1));
        [obs, oa, next]
    }

    /// Discriminator inputs for rows `idx` of the rollout.
    fn rollout_input(&self, buf: &RolloutBuffer, idx: &[usize], dev: &Device) -> DiscInput {
        let (od, ad) = (buf.obs_dim, buf.act_dim);
        let obs = RolloutBuffer::gather(&buf.obs, od, idx);
        let acts = RolloutBuffer::gather(&buf.actions, ad, idx);
        let oa = obs_act(
            &obs,
            &acts,
            od,
            &self.act_space,
            self.cfg.adversarial.state_only,
        );
        let next = RolloutBuffer::gather(&buf.next_obs, od, idx);
        let b = idx.len();
        let gamma = self.cfg.ppo.gamma as f32;
        let n = buf.n_envs;
        // A step terminated where the next step starts an episode and nothing was bootstrapped.
        let discount: Vec<f32> = idx
            .iter()
            .map(|&i| {
                let next_start = if i + n < buf.len() {
                    buf.episode_starts[i + n]
                } else {
                    buf.last_dones[i % n]
                };
                let terminated = next_start > 0.0 && buf.bootstraps[i] == 0.0;
                if terminated { 0.0 } else { gamma }
            })
            .collect();
        let w = oa.len() / b.max(1);
        let [obs, oa, next] = self.inputs(obs, oa, next, od);
        DiscInput {
            obs_act: tensor2(oa, b, w, dev),
            obs: tensor2(obs, b, od, dev),
            next_obs: tensor2(next, b, od, dev),
            discount: tensor1(discount, dev),
            log_pi: tensor1(idx.iter().map(|&i| buf.log_probs[i]).collect(), dev),
        }
    }

    /// Discriminator inputs for expert rows `idx`, with log π under the current policy.
    fn expert_input(&self, idx: &[usize], dev: &Device) -> DiscInput {
        let e = &self.expert;
        let od = e.obs.len() / e.n;
        let wa = e.obs_act.len() / e.n;
        let ad = e.actions.len() / e.n;
        let b = idx.len();
        let obs = RolloutBuffer::gather(&e.obs, od, idx);
        let acts = RolloutBuffer::gather(&e.actions, ad, idx);
        let infer = dev.clone().inner();
        let (lp, _) = self.ppo.policy().valid().log_prob_entropy(
            tensor2(obs.clone(), b, od, &infer),
            tensor2(acts, b, ad, &infer),
        );
        let gamma = self.cfg.ppo.gamma as f32;
        let [obs, oa, next] = self.inputs(
            obs,
            RolloutBuffer::gather(&e.obs_act, wa, idx),
            RolloutBuffer::gather(&e.next_obs, od, idx),
            od,
        );
        DiscInput {
            obs_act: tensor2(oa, b, wa, dev),
            obs: tensor2(obs, b, od, dev),
            next_obs: tensor2(next, b, od, dev),
            discount: tensor1(
                idx.iter()
                    .map(|&i| gamma * (1.0 - e.terminated[i]))
                    .collect(),
                dev,
            ),
            log_pi: tensor1(host(lp), dev),
        }
    }

    /// `n_disc_updates` discriminator steps; returns (loss, penalty, expert accuracy, policy
    /// accuracy) of the last.
    fn train_discriminator(&mut self, buf: &RolloutBuffer) -> Result<[f64; 4], RlError> {
        let a = self.cfg.adversarial.clone();
        let dev = self.device.clone();
        let b = a.disc_batch_size;
        let mut out = [0.0; 4];
        for _ in 0..a.n_disc_updates {
            let pi_idx: Vec<usize> = (0..b)
                .map(|_| self.rng_disc.below(buf.len() as u64) as usize)
                .collect();
            let ex_idx: Vec<usize> = (0..b)
                .map(|_| self.rng_disc.below(self.expert.n as u64) as usize)
                .collect();
            if let Some(rms) = &mut self.obs_rms {
                // imitation's RunningNorm: the statistics follow the rows the
                // discriminator trains on, expert and policy alike.
                let od = buf.obs_dim;
                let mut rows = RolloutBuffer::gather(&self.expert.obs, od, &ex_idx);
                rows.extend(RolloutBuffer::gather(&buf.obs, od, &pi_idx));
                rms.update_batch(&rows);
            }
            let xe = self.expert_input(&ex_idx, &dev);
            let xp = self.rollout_input(buf, &pi_idx, &dev);
            let le = self.disc.logits(&xe);
            let lp = self.disc.logits(&xp);
            let (he, hp) = (host(le.clone().inner()), host(lp.clone().inner()));
            let mut total = loss::disc_loss(le, lp);
            let lv = host(total.clone().inner())[0] as f64;
            let mut gp = 0.0;
            if a.gradient_penalty_coef > 0.0 {
                // On g's input, at random interpolates of expert and policy rows.
                let w = self.expert.obs_act.len() / self.expert.n;
                let (e, p) = (host(xe.obs_act.inner()), host(xp.obs_act.inner()));
                let x: Vec<f32> = (0..b)
                    .flat_map(|r| {
                        let t = self.rng_disc.uniform() as f32;
                        let (e, p) = (&e[r * w..(r + 1) * w], &p[r * w..(r + 1) * w]);
                        e.iter()
                            .zip(p)
                            .map(move |(e, p)| t * e + (1.0 - t) * p)
                            .collect::<Vec<_>>()
                    })
                    .collect();
                let eps = 1e-2f32;
                let base = self.disc.g_values(tensor2(x.clone(), b, w, &dev));
                let diffs = (0..2)
                    .map(|_| {
                        let mut moved = x.clone();
                        for r in 0..b {
                            let u: Vec<f32> =
                                (0..w).map(|_| self.rng_disc.normal() as f32).collect();
                            let norm = u.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                            for (k, v) in u.iter().enumerate() {
                                moved[r * w + k] += eps * v / norm;
                            }
                        }
                        (self.disc.g_values(tensor2(moved, b, w, &dev)) - base.clone())
                            .div_scalar(eps as f64)
                    })
                    .collect();
                let pen = loss::gradient_penalty(diffs, w);
                gp = host(pen.clone().inner())[0] as f64;
                total = total + pen.mul_scalar(a.gradient_penalty_coef);
            }
            check_losses(
                0,
                &[("losses/disc_loss", lv), ("losses/gradient_penalty", gp)],
            )?;
            let g = flat_grads(&self.disc, total.backward(), &dev);
            self.disc = self
                .opt_disc
                .step_flat(a.disc_learning_rate, self.disc.clone(), g)
                .0;
            let acc = |v: &[f32], expert: bool| {
                v.iter().filter(|&&l| (l > 0.0) == expert).count() as f64 / v.len().max(1) as f64
            };
            out = [lv, gp, acc(&he, true), acc(&hp, false)];
        }
        Ok(out)
    }

    /// Replaces the rollout's rewards with the discriminator's (normalized if asked;
    /// bootstraps kept) and recomputes advantages; returns the mean learned reward.
    fn relabel(&mut self, buf: &mut RolloutBuffer) -> f64 {
        let dev = self.device.clone().inner();
        let idx: Vec<usize> = (0..buf.len()).collect();
        let disc = self.disc.valid();
        let mut rewards = Vec::with_capacity(buf.len());
        for chunk in idx.chunks(4096) {
            let x = self.rollout_input(buf, chunk, &dev);
            let r = match self.cfg.adversarial.reward_type {
                RewardType::Gail => loss::gail_reward(&host(disc.logits(&x))),
                RewardType::Airl => {
                    let w = self.cfg.adversarial.entropy_weight;
                    host(disc.f(&x) - x.log_pi.clone().mul_scalar(w))
                }
            };
            rewards.extend(r);
        }
        let mean = rewards.iter().map(|&r| r as f64).sum::<f64>() / rewards.len().max(1) as f64;
        if let Some(rms) = &mut self.reward_rms {
            rms.update_batch(&rewards);
            for r in rewards.chunks_mut(1) {
                rms.normalize(r);
            }
        }
        for (i, r) in rewards.into_iter().enumerate() {
            buf.rewards[i] = r + buf.bootstraps[i];
        }
        buf.recompute_returns_and_advantage(
            self.cfg.ppo.gamma as f32,
            self.cfg.ppo.gae_lambda as f32,
        );
        mean
    }
}

impl Learner for GailLearner {
    type Batch = RolloutBuffer;

    /// Discriminator steps, relabelled rewards and advantages, then one PPO update.
    /// The rollout is relabelled in a copy: the shell's buffer keeps the env's rewards.
    fn update(&mut self, batch: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        let [dl, gp, ea, pa] = self.train_discriminator(batch)?;
        let env_reward = batch.rewards.iter().map(|&r| r as f64).sum::<f64>() / batch.len() as f64;
        let mut relabelled = batch.clone();
        let mean_r = self.relabel(&mut relabelled);
        let mut m = self.ppo.update(&relabelled, progress)?;
        m.insert("losses/disc_loss".into(), dl);
        m.insert("losses/gradient_penalty".into(), gp);
        m.insert("disc/expert_accuracy".into(), ea);
        m.insert("disc/policy_accuracy".into(), pa);
        m.insert("disc/learned_reward".into(), mean_r);
        m.insert("disc/env_reward".into(), env_reward);
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        self.ppo.weights()
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        self.ppo.set_weights(weights)
    }

    /// PPO's state, the discriminator, its optimizer and generator, the running statistics.
    fn save_state(&self) -> LearnerState {
        let mut state = self.ppo.save_state();
        let mut opt = TensorMap::default();
        let steps = self.opt_disc.save("disc", &mut opt);
        state.file(
            "discriminator.safetensors",
            module_tensors(&self.disc).to_bytes(),
        );
        state.file("disc_optimizer.safetensors", opt.to_bytes());
        state.insert("disc_optimizer_steps", steps);
        state.insert("rng_disc", &self.rng_disc);
        for (key, rms) in [
            ("disc_obs_rms", &self.obs_rms),
            ("reward_rms", &self.reward_rms),
        ] {
            if let Some(rms) = rms {
                state.insert(key, rms);
            }
        }
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, state: &Map<String, Value>) -> Result<(), RlError> {
        self.ppo.load_state(ck, state)?;
        let dev = self.device.clone();
        self.disc = read_module(ck, "discriminator.safetensors", self.disc.clone(), &dev)?;
        let file = ck.path_of("disc_optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("disc_optimizer.safetensors")?, &file)?;
        let steps: u64 = state_entry(ck, state, "disc_optimizer_steps")?;
        let np = num_params(&self.disc);
        self.opt_disc
            .load("disc", &mut opt, steps, np, &file, &dev)?;
        self.rng_disc = state_entry(ck, state, "rng_disc")?;
        let path = ck.path_of("state.json");
        let dims = [
            self.obs_rms.as_ref().map(|r| r.mean.len()),
            self.reward_rms.as_ref().map(|r| r.mean.len()),
        ];
        for ((key, rms), dim) in [
            ("disc_obs_rms", &mut self.obs_rms),
            ("reward_rms", &mut self.reward_rms),
        ]
        .into_iter()
        .zip(dims)
        {
            if let Some(rms) = rms {
                let saved: RunningMeanStd = state
                    .get(key)
                    .cloned()
                    .and_then(|v| serde_json::from_value(v).ok())
                    .filter(|r: &RunningMeanStd| {
                        Some(r.mean.len()) == dim && r.var.len() == r.mean.len()
                    })
                    .ok_or_else(|| {
                        RlError::Config(rl_training_core::config::ConfigError::new(
                            format!("{path}: {key}"),
                            format!("missing or not {} running statistics", dim.unwrap_or(0)),
                        ))
                    })?;
                *rms = saved;
            }
        }
        Ok(())
    }
}

impl OnPolicyLearner for GailLearner {
    type Config = GailConfig;
    type Policy = ActorCritic;
    const NAME: &'static str = "gail";

    fn build(cfg: GailConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        let (run, device) = (ctx.run, ctx.device.clone());
        // The discriminator's reward replaces the rollout's rewards, a curiosity bonus with them.
        run.refuse_curiosity(
            "GAIL and AIRL replace the rollout's rewards with the discriminator's",
        )
        .map_err(RlError::Config)?;
        let (obs_space, act_space) = (ctx.spaces.0, ctx.spaces.1.clone());
        let data = load_expert(
            &cfg.adversarial.expert_data_path,
            &run.env_id,
            obs_space,
            &act_space,
        )?;
        let d_obs = obs_space.flat_dim();
        let (mut obs, mut next) = (Vec::new(), Vec::new());
        flatten_batch(obs_space, &data.obs, &mut obs);
        flatten_batch(obs_space, &data.new_obs, &mut next);
        let expert = Expert {
            n: data.len(),
            obs_act: obs_act(
                &obs,
                &data.actions,
                d_obs,
                &act_space,
                cfg.adversarial.state_only,
            ),
            obs,
            next_obs: next,
            terminated: data.terminated.iter().map(|&t| t as u8 as f32).collect(),
            actions: data.actions.clone(),
        };
        let mut rng = Rng::for_stream(run.seed, "discriminator");
        let disc = Discriminator::new(
            cfg.adversarial.reward_type,
            d_obs,
            if cfg.adversarial.state_only {
                0
            } else {
                act_space.flat_dim()
            },
            &cfg.adversarial.disc_net_arch,
            &mut rng,
            &device,
        );
        let ppo = PpoLearner::build(cfg.ppo.clone(), policy, ctx)?;
        Ok(Self {
            obs_rms: cfg
                .adversarial
                .disc_normalize_input
                .then(|| RunningMeanStd::new(d_obs)),
            reward_rms: cfg
                .adversarial
                .normalize_reward
                .then(|| RunningMeanStd::new(1)),
            opt_disc: FlatOptimizer::new(OptimizerKind::adam(1e-8), None),
            rng_disc: rng,
            cfg,
            ppo,
            disc,
            expert,
            act_space,
            device,
        })
    }

    fn config(&self) -> &GailConfig {
        &self.cfg
    }

    fn policy(&self) -> &ActorCritic {
        self.ppo.policy()
    }
}
