//! Recurrent actor-critic (sb3-contrib's `RecurrentActorCriticPolicy`): an LSTM over the
//! observations for the actor, a second one for the critic (or the actor's, detached, when
//! `shared_lstm`), then the MLP trunks and heads of an [`ActorCritic`] on the LSTM outputs.
//!
//! Two ways through it: [`RecurrentActorCritic::step`] advances the recurrent states by one env
//! step (collection), resetting them where an episode starts; [`forward_sequences`]
//! (RecurrentActorCritic::forward_sequences) runs whole padded sequences from stored initial
//! states (training). burn's `Lstm::forward` starts from one state per sequence, so sequences
//! are cut at episode starts ([`rl_core::sequences`]) rather than reset inside.

use crate::policy::{ActorCritic, PolicyKwargs};
use rl_core::batch::{host, tensor2};
use rl_core::burn;
use rl_core::burn::module::Module;
use rl_core::burn::nn::{Initializer, Lstm, LstmConfig, LstmState};
use rl_core::burn::tensor::{Device, Tensor, TensorData};
use rl_core::params::{num_params, set_flat};
use rl_core::{Rng, Space};

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

/// Recurrent states of a batch of envs or sequences, host side: `[n × hidden]` each.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLstmState {
    /// Actor LSTM `(cell, hidden)`.
    pub pi: (Vec<f32>, Vec<f32>),
    /// Critic LSTM `(cell, hidden)` (empty without a critic LSTM).
    pub vf: (Vec<f32>, Vec<f32>),
}

impl HostLstmState {
    /// Zero states for `n` rows of `hidden` units (`critic`: with a critic LSTM).
    pub fn zeros(n: usize, hidden: usize, critic: bool) -> Self {
        let z = vec![0.0; n * hidden];
        let vf = if critic {
            (z.clone(), z.clone())
        } else {
            Default::default()
        };
        Self {
            pi: (z.clone(), z),
            vf,
        }
    }

    /// Rows `rows` (in that order) of these states.
    pub fn gather(&self, rows: &[usize], hidden: usize) -> Self {
        let g = |v: &[f32]| -> Vec<f32> {
            if v.is_empty() {
                return Vec::new();
            }
            rows.iter()
                .flat_map(|&r| v[r * hidden..(r + 1) * hidden].iter().copied())
                .collect()
        };
        Self {
            pi: (g(&self.pi.0), g(&self.pi.1)),
            vf: (g(&self.vf.0), g(&self.vf.1)),
        }
    }
}

/// What one recurrent pass gives.
pub struct RecurrentOutput {
    /// Logits or means `[N, param_dim]`.
    pub params: Tensor<2>,
    /// Gaussian `log_std` (`[1, dim]`, or `[N, dim]` with gSDE).
    pub log_std: Option<Tensor<2>>,
    /// Value estimates `[N]`.
    pub values: Tensor<1>,
}

/// The recurrent actor-critic.
#[derive(Module, Debug)]
pub struct RecurrentActorCritic {
    /// The actor's LSTM.
    pub lstm_pi: Lstm,
    /// The critic's LSTM (None: the critic reads the actor's LSTM output, detached).
    pub lstm_vf: Option<Lstm>,
    /// MLP trunks and heads on the LSTM outputs.
    pub ac: ActorCritic,
    /// LSTM units.
    #[module(skip)]
    pub hidden: usize,
}

impl RecurrentActorCritic {
    /// A policy for `obs_space` (flattened) and `action_space` with `hidden` LSTM units and a
    /// critic LSTM unless `shared_lstm`; the MLP part as [`ActorCritic`] with `kw`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        obs_space: &Space,
        action_space: &Space,
        kw: &PolicyKwargs,
        hidden: usize,
        shared_lstm: bool,
        use_sde: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let d_in = obs_space.flat_dim();
        let lstm_pi = lstm_torch_default(d_in, hidden, rng, device);
        let lstm_vf = (!shared_lstm).then(|| lstm_torch_default(d_in, hidden, rng, device));
        let latent = Space::boxed(vec![-1.0; hidden], vec![1.0; hidden]);
        let ac = ActorCritic::with_sde(&latent, action_space, kw, use_sde, rng, device)?;
        Ok(Self {
            lstm_pi,
            lstm_vf,
            ac,
            hidden,
        })
    }

    fn state(&self, s: &(Vec<f32>, Vec<f32>), n: usize, device: &Device) -> Option<LstmState<2>> {
        (!s.0.is_empty()).then(|| {
            LstmState::new(
                tensor2(s.0.clone(), n, self.hidden, device),
                tensor2(s.1.clone(), n, self.hidden, device),
            )
        })
    }

    /// The heads on the LSTM outputs `[N, hidden]` (`h_vf`: the critic's; None = the
    /// actor's, detached).
    fn heads(&self, h_pi: Tensor<2>, h_vf: Option<Tensor<2>>) -> RecurrentOutput {
        let latent_pi = self.ac.pi.forward(h_pi.clone());
        let h_vf = h_vf.unwrap_or_else(|| h_pi.detach());
        let latent_vf = match &self.ac.vf {
            Some(vf) => vf.forward(h_vf),
            None => self.ac.pi.forward(h_vf),
        };
        RecurrentOutput {
            log_std: self.ac.dist_log_std(&latent_pi),
            params: self.ac.action_net.forward(latent_pi),
            values: self.ac.value_net.forward(latent_vf).squeeze_dim::<1>(1),
        }
    }

    /// One env step for `n` envs: resets the states where `episode_starts` is 1, advances
    /// them with `obs` `[n, obs_dim]`, and returns the outputs and the new states.
    pub fn step(
        &self,
        obs: Tensor<2>,
        state: &HostLstmState,
        episode_starts: &[f32],
    ) -> (RecurrentOutput, HostLstmState) {
        let device = obs.device();
        let [n, d] = obs.dims();
        let h = self.hidden;
        // A new episode starts from the zero state, whatever the previous one left.
        let keep = |v: &[f32]| -> Vec<f32> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| x * (1.0 - episode_starts[i / h]))
                .collect()
        };
        let reset = |s: &(Vec<f32>, Vec<f32>)| (keep(&s.0), keep(&s.1));
        let (spi, svf) = (reset(&state.pi), reset(&state.vf));
        let x = obs.reshape([n, 1, d]);
        let (out_pi, st_pi) = self
            .lstm_pi
            .forward(x.clone(), self.state(&spi, n, &device));
        let (out_vf, st_vf) = match &self.lstm_vf {
            Some(l) => {
                let (o, s) = l.forward(x, self.state(&svf, n, &device));
                (Some(o.reshape([n, h])), Some(s))
            }
            None => (None, None),
        };
        let out = self.heads(out_pi.reshape([n, h]), out_vf);
        let to_host = |s: LstmState<2>| (host(s.cell), host(s.hidden));
        let next = HostLstmState {
            pi: to_host(st_pi),
            vf: st_vf.map(to_host).unwrap_or_default(),
        };
        (out, next)
    }

    /// Whole sequences `[S, T, obs_dim]` from initial states `init` (`S` rows); outputs for
    /// all `S × T` steps, sequence-major (padded steps included: mask them in the loss).
    pub fn forward_sequences(&self, obs: Tensor<3>, init: &HostLstmState) -> RecurrentOutput {
        let device = obs.device();
        let [s, t, _] = obs.dims();
        let h = self.hidden;
        let (out_pi, _) = self
            .lstm_pi
            .forward(obs.clone(), self.state(&init.pi, s, &device));
        let out_vf = self.lstm_vf.as_ref().map(|l| {
            l.forward(obs, self.state(&init.vf, s, &device))
                .0
                .reshape([s * t, h])
        });
        self.heads(out_pi.reshape([s * t, h]), out_vf)
    }
}

/// `Σ mask·x / Σ mask`: the mean over real (unpadded) steps.
pub fn masked_mean(x: Tensor<1>, mask: Tensor<1>) -> Tensor<1> {
    let n = mask.clone().sum();
    (x * mask).sum() / n.clamp_min(1.0)
}
