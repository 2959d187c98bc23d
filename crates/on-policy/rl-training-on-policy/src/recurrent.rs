//! Recurrent actor-critic (sb3-contrib's `RecurrentActorCriticPolicy`): an LSTM over the
//! observations for the actor, a second one for the critic (or the actor's, detached, when
//! `shared_lstm`), then the MLP trunks and heads of an [`ActorCritic`] on the LSTM outputs.
//!
//! Two ways through it: [`RolloutPolicy::step`] advances the recurrent states by one env
//! step (collection, `predict`), resetting them where an episode starts;
//! [`forward_sequences`](RecurrentActorCritic::forward_sequences) runs whole padded sequences
//! from stored initial states (training). Both run the LSTMs fused
//! ([`rl_training_core::recurrent::lstm_forward`]: burn's `Lstm` modules, one gate product per step).
//! An LSTM forward starts from one state per sequence, so sequences are cut at episode starts
//! ([`rl_training_core::sequences`]) rather than reset inside.

use crate::policy::{ActorCritic, PolicyKwargs, PolicyOutput, SdeNoise};
use crate::rollout::{RolloutPolicy, reset_rows};
use rl_training_core::batch::{host, tensor2};
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::nn::{Initializer, Lstm, LstmConfig, LstmState};
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::distributions::DistKind;
use rl_training_core::params::{num_params, set_flat};
use rl_training_core::{Rng, Space};

/// An LSTM initialized as torch's `nn.LSTM`: every weight and bias `U(-1/√H, 1/√H)`, drawn
/// from `rng` (never burn's global generator).
pub fn lstm_torch_default(d_input: usize, d_hidden: usize, rng: &mut Rng, device: &Device) -> Lstm {
    let lstm = LstmConfig::new(d_input, d_hidden, true)
        .with_initializer(Initializer::Zeros)
        .init(device);
    let k = 1.0 / (d_hidden as f64).sqrt();
    let values: Vec<f32> = (0..num_params(&lstm))
        .map(|_| rng.uniform_range(-k, k) as f32)
        .collect();
    let n = values.len();
    set_flat(
        lstm,
        Tensor::from_data(TensorData::new(values, [n]), &device.clone().inner()),
    )
}

/// The recurrent actor-critic. Each env's recurrent state is one flat row: for every actor
/// LSTM layer its cell then hidden state (`hidden` floats each), then the same for the
/// critic's layers when it has its own LSTM.
#[derive(Module, Debug)]
pub struct RecurrentActorCritic {
    /// The actor's LSTM layers.
    pub lstm_pi: Vec<Lstm>,
    /// The critic's LSTM layers (empty: the critic reads the actor's LSTM output, detached).
    pub lstm_vf: Vec<Lstm>,
    /// MLP trunks and heads on the LSTM outputs.
    pub ac: ActorCritic,
    /// LSTM units.
    #[module(skip)]
    pub hidden: usize,
}

impl RecurrentActorCritic {
    /// A policy for `obs_space` (flattened) and `action_space` with `layers` LSTM layers of
    /// `hidden` units, and a critic LSTM unless `shared_lstm`; the MLP part as
    /// [`ActorCritic`] with `kw`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        obs_space: &Space,
        action_space: &Space,
        kw: &PolicyKwargs,
        hidden: usize,
        layers: usize,
        shared_lstm: bool,
        use_sde: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let d_in = obs_space.flat_dim();
        let stack = |rng: &mut Rng| -> Vec<Lstm> {
            (0..layers.max(1))
                .map(|l| {
                    lstm_torch_default(if l == 0 { d_in } else { hidden }, hidden, rng, device)
                })
                .collect()
        };
        let lstm_pi = stack(rng);
        let lstm_vf = if shared_lstm { Vec::new() } else { stack(rng) };
        let latent = Space::boxed(vec![-1.0; hidden], vec![1.0; hidden]);
        let ac = ActorCritic::with_sde(&latent, action_space, kw, use_sde, rng, device)?;
        Ok(Self {
            lstm_pi,
            lstm_vf,
            ac,
            hidden,
        })
    }

    /// Floats of state per env in the actor's stack.
    fn pi_dim(&self) -> usize {
        2 * self.hidden * self.lstm_pi.len()
    }

    /// Runs the layers `stack` over `x` `[n, T, d]` from the states in columns
    /// `offset..` of `state` `[n, state_dim]`; returns the last layer's outputs
    /// `[n·T, hidden]` and the final `(cell, hidden)` of every layer.
    fn run_stack(
        &self,
        stack: &[Lstm],
        mut x: Tensor<3>,
        state: &Tensor<2>,
        offset: usize,
    ) -> (Tensor<2>, Vec<Tensor<2>>) {
        let h = self.hidden;
        let [n, t, _] = x.dims();
        let mut finals = Vec::with_capacity(2 * stack.len());
        for (l, lstm) in stack.iter().enumerate() {
            let o = offset + 2 * l * h;
            let init = LstmState::new(
                state.clone().narrow(1, o, h),
                state.clone().narrow(1, o + h, h),
            );
            let (out, st) = rl_training_core::recurrent::lstm_forward(lstm, x, init);
            finals.push(st.cell);
            finals.push(st.hidden);
            x = out;
        }
        (x.reshape([n * t, h]), finals)
    }

    /// The actor's outputs `(params, log_std, latent)` on its LSTM output `h_pi`.
    fn actor_heads(&self, h_pi: Tensor<2>) -> (Tensor<2>, Option<Tensor<2>>, Tensor<2>) {
        let latent_pi = self.ac.pi.forward(h_pi);
        let log_std = self.ac.dist_log_std(&latent_pi);
        (self.ac.action_head(latent_pi.clone()), log_std, latent_pi)
    }

    /// Values `[N]` from the critic's LSTM output (or the actor's, detached).
    fn critic_head(&self, h_vf: Tensor<2>) -> Tensor<1> {
        let latent_vf = match &self.ac.vf {
            Some(vf) => vf.forward(h_vf),
            None => self.ac.pi.forward(h_vf),
        };
        self.ac.value_head(latent_vf).squeeze_dim::<1>(1)
    }

    /// The critic's LSTM output for `x` (the actor's, detached, without a critic LSTM).
    fn critic_lstm(&self, x: Tensor<3>, state: &Tensor<2>) -> (Tensor<2>, Vec<Tensor<2>>) {
        if self.lstm_vf.is_empty() {
            (
                self.run_stack(&self.lstm_pi, x, state, 0).0.detach(),
                Vec::new(),
            )
        } else {
            self.run_stack(&self.lstm_vf, x, state, self.pi_dim())
        }
    }

    /// Actor outputs for whole sequences `[S, T, obs_dim]` from initial states `init`
    /// (`[S × state_dim]`): `(params, log_std)` for all `S × T` steps, sequence-major.
    pub fn actor_sequences(&self, obs: Tensor<3>, init: &[f32]) -> (Tensor<2>, Option<Tensor<2>>) {
        let st = self.state_tensor(init, obs.dims()[0], &obs.device());
        let (h_pi, _) = self.run_stack(&self.lstm_pi, obs, &st, 0);
        let (params, log_std, _) = self.actor_heads(h_pi);
        (params, log_std)
    }

    /// Values `[S·T]` for whole sequences, as [`actor_sequences`](Self::actor_sequences).
    pub fn critic_sequences(&self, obs: Tensor<3>, init: &[f32]) -> Tensor<1> {
        let st = self.state_tensor(init, obs.dims()[0], &obs.device());
        self.critic_head(self.critic_lstm(obs, &st).0)
    }

    /// Both outputs for whole sequences (padded steps included: mask them in the loss).
    pub fn forward_sequences(&self, obs: Tensor<3>, init: &[f32]) -> PolicyOutput {
        let st = self.state_tensor(init, obs.dims()[0], &obs.device());
        let (h_pi, _) = self.run_stack(&self.lstm_pi, obs.clone(), &st, 0);
        let h_vf = if self.lstm_vf.is_empty() {
            h_pi.clone().detach()
        } else {
            self.run_stack(&self.lstm_vf, obs, &st, self.pi_dim()).0
        };
        self.outputs(h_pi, h_vf)
    }

    /// Both heads on the LSTM outputs.
    fn outputs(&self, h_pi: Tensor<2>, h_vf: Tensor<2>) -> PolicyOutput {
        let (params, log_std, latent) = self.actor_heads(h_pi);
        PolicyOutput {
            params,
            log_std,
            values: self.critic_head(h_vf),
            latent_sde: self.ac.sde.map(|_| latent.detach()),
        }
    }

    fn state_tensor(&self, state: &[f32], n: usize, device: &Device) -> Tensor<2> {
        tensor2(state.to_vec(), n, RolloutPolicy::state_dim(self), device)
    }
}

impl RolloutPolicy for RecurrentActorCritic {
    fn state_dim(&self) -> usize {
        2 * self.hidden * (self.lstm_pi.len() + self.lstm_vf.len())
    }

    fn step(&self, obs: Tensor<2>, state: &mut [f32], episode_starts: &[f32]) -> PolicyOutput {
        let device = obs.device();
        let [n, d] = obs.dims();
        // A new episode starts from the zero state, whatever the previous one left.
        reset_rows(state, episode_starts, RolloutPolicy::state_dim(self));
        let st = self.state_tensor(state, n, &device);
        let x = obs.reshape([n, 1, d]);
        let (h_pi, mut finals) = self.run_stack(&self.lstm_pi, x.clone(), &st, 0);
        let h_vf = if self.lstm_vf.is_empty() {
            h_pi.clone().detach()
        } else {
            let (h, f) = self.run_stack(&self.lstm_vf, x, &st, self.pi_dim());
            finals.extend(f);
            h
        };
        state.copy_from_slice(&host(Tensor::cat(finals, 1)));
        self.outputs(h_pi, h_vf)
    }

    fn values_from(&self, obs: Tensor<2>, state: &[f32], episode_starts: &[f32]) -> Vec<f32> {
        let [n, d] = obs.dims();
        let mut state = state.to_vec();
        reset_rows(&mut state, episode_starts, RolloutPolicy::state_dim(self));
        let st = self.state_tensor(&state, n, &obs.device());
        host(self.critic_head(self.critic_lstm(obs.reshape([n, 1, d]), &st).0))
    }

    fn dist(&self) -> &DistKind {
        &self.ac.dist
    }

    fn sde_noise(&self, rows_times_dim: usize, rng: &mut Rng) -> Option<SdeNoise> {
        self.ac.sde_noise(rows_times_dim, rng)
    }
}

/// `Σ mask·x / Σ mask`: the mean over real (unpadded) steps.
pub fn masked_mean(x: Tensor<1>, mask: Tensor<1>) -> Tensor<1> {
    let n = mask.clone().sum();
    (x * mask).sum() / n.clamp_min(1.0)
}
