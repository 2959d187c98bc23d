//! The multi-agent on-policy shell: one [`MultiAgentVecEnv`], a policy per id of the run's
//! `multi_agent:` table, and for every learned policy its own [`PolicyLearner`] fed with the
//! rows of the agents mapped to it: an [`OnPolicyLearner`] (PPO, A2C, Recurrent PPO) sees a
//! [`RolloutBuffer`] as in a single-agent run, an actor-learner one (IMPALA, APPO, through
//! [`ActorLearnerPolicy`]) a [`RunnerBatch`] of per-agent chains as if a runner had sent it.
//! No algorithm holds a copy of this code.
//!
//! One iteration: `n_steps` vector-env steps. At each, the agents to act are grouped by
//! policy; each learned policy's inference copy gives their actions, values and log-probs in
//! one batch (heuristics act per agent). Every acting agent opens a row; its rewards add up
//! in the row until the agent acts again (the row's bootstrap is then the new value, and the
//! next row follows it), its episode ends (terminated: no bootstrap; truncated: γ·V of the
//! true final observation, added to the reward as the single-agent collector does), or the
//! rollout ends (bootstrap from the value of its current observation). An agent waiting for
//! its turn at the rollout's end keeps its open row for the next one. GAE runs over each
//! agent's chain of rows; each learned policy's rows become one buffer (one column, chain after
//! chain), and its learner learns from it.
//!
//! Metrics: `charts/episodic_return` (the sum over agents), `agents/<id>/episodic_return`,
//! `policies/<id>/episodic_return` (the sum over that policy's agents) and each learner's
//! metrics under `policies/<id>/`.

use crate::actor_learner::{ActorLearner, RunnerBatch};
use crate::agent::{BuildContext, OnPolicyConfig, OnPolicyLearner, PolicyFor, RolloutSettings};
use crate::policy::ActorCritic;
use crate::rollout::{RolloutPolicy, tensor2};
use rl_training_core::algorithm::{LearnerState, Progress};
use rl_training_core::batch::{flatten_batch, host};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::logger::{Metrics, MetricsMean};
use rl_training_core::multi_agent::{
    AgentId, AgentMap, FrozenMaker, MultiAgentAlgorithm, MultiAgentCheckpoint, MultiAgentCore,
    MultiAgentEnv, MultiAgentEnvMaker, MultiAgentEpisode, MultiAgentEval, learned_policy,
    policy_field,
};
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// A policy the run's algorithm learns (or, when not in `policies_to_train`, keeps as
/// initialized).
pub struct LearnedPolicy<L> {
    /// The learner (its policy network acts).
    pub learner: L,
    /// Whether it learns.
    pub train: bool,
    /// Discount and GAE λ of its config.
    settings: RolloutSettings,
    obs_space: Space,
    act_space: Space,
    /// With a centralized critic, how many features its input has after the agent's own
    /// observation (every agent's observation); 0 without.
    critic_extra: usize,
    /// Floats of recurrent state per agent (0: feed-forward).
    state_dim: usize,
}

/// What the multi-agent shell needs of the learner of one policy. Every on-policy learner
/// (PPO, A2C, Recurrent PPO) is one as it is; an actor-learner one (IMPALA, APPO) through
/// [`ActorLearnerPolicy`]. Methods are named apart from [`OnPolicyLearner`]'s and
/// [`Learner`]'s, which the on-policy learners also implement.
pub trait PolicyLearner: Sized {
    /// The hyperparameters (`algo_kwargs` with the policy's overrides).
    type Config: AlgoConfig;
    /// The policy network the shell acts with.
    type Policy: Module + RolloutPolicy + Sync;
    /// The algorithm's name in configs and checkpoints.
    const NAME: &'static str;

    /// Rollout length, discount, GAE λ and gSDE of a config.
    fn rollout_of(cfg: &Self::Config) -> RolloutSettings;
    /// Rejects action spaces the algorithm does not handle.
    fn accepts_action_space(space: &Space) -> Result<(), String>;
    /// A fresh policy for the spaces, from `rng`; with `critic_extra > 0` its critic reads
    /// that many features after the observation (MAPPO's centralized critic).
    fn new_policy(
        cfg: &Self::Config,
        obs_space: &Space,
        critic_extra: usize,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self::Policy, String>;
    /// A learner for a fresh `policy`.
    fn build_learner(
        cfg: Self::Config,
        policy: Self::Policy,
        ctx: &BuildContext,
    ) -> Result<Self, RlError>;
    /// The policy network the agents of this policy act with.
    fn acting_policy(&self) -> &Self::Policy;
    /// Learns from the policy's rows of one rollout, laid out as chains (one per agent and
    /// env, advantages and returns already by GAE).
    fn learn(&mut self, rows: RunnerBatch, progress: &Progress) -> Result<Metrics, RlError>;
    /// What a checkpoint keeps of the learner.
    fn policy_state(&self) -> LearnerState;
    /// Restores what [`policy_state`](Self::policy_state) saved.
    fn load_policy_state(
        &mut self,
        ck: &Checkpoint,
        entries: &Map<String, Value>,
    ) -> Result<(), RlError>;
}

impl<L: OnPolicyLearner> PolicyLearner for L {
    type Config = <L as OnPolicyLearner>::Config;
    type Policy = <L as OnPolicyLearner>::Policy;
    const NAME: &'static str = <L as OnPolicyLearner>::NAME;

    fn rollout_of(cfg: &Self::Config) -> RolloutSettings {
        cfg.rollout_settings()
    }
    fn accepts_action_space(space: &Space) -> Result<(), String> {
        L::check_action_space(space)
    }
    fn new_policy(
        cfg: &Self::Config,
        obs_space: &Space,
        critic_extra: usize,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self::Policy, String> {
        if critic_extra > 0 {
            <Self::Policy as PolicyFor<Self::Config>>::centralized_for_config(
                cfg,
                obs_space,
                critic_extra,
                act_space,
                rng,
                device,
            )
        } else {
            L::make_policy(cfg, obs_space, act_space, rng, device)
        }
    }
    fn build_learner(
        cfg: Self::Config,
        policy: Self::Policy,
        ctx: &BuildContext,
    ) -> Result<Self, RlError> {
        L::build(cfg, policy, ctx)
    }
    fn acting_policy(&self) -> &Self::Policy {
        OnPolicyLearner::policy(self)
    }
    /// One update on the rows as a rollout (GAE's advantages; the chains do not matter).
    fn learn(&mut self, rows: RunnerBatch, progress: &Progress) -> Result<Metrics, RlError> {
        self.update(&rows.buffer, progress)
    }
    fn policy_state(&self) -> LearnerState {
        self.save_state()
    }
    fn load_policy_state(
        &mut self,
        ck: &Checkpoint,
        entries: &Map<String, Value>,
    ) -> Result<(), RlError> {
        self.load_state(ck, entries)
    }
}

/// An actor-learner algorithm's learner (IMPALA, APPO) as the learner of one policy of a
/// multi-agent run. The shell is its env runner: it collects `n_envs` envs in the learner's
/// thread with the latest weights (lockstep, policy lag 0), and each rollout's rows of the
/// policy arrive as one batch of chains that the learner schedules (IMPALA's replay, APPO's
/// circular buffer) and updates on as if a runner had sent it; V-trace traces each chain
/// from its own bootstrap. The runner keys (`num_env_runners`, the queue, `lockstep`) do not
/// apply; `num_envs_per_env_runner` is refused (the run's `n_envs` sets the envs).
pub struct ActorLearnerPolicy<A>(pub A);

impl<A: ActorLearner> PolicyLearner for ActorLearnerPolicy<A> {
    type Config = A::Config;
    type Policy = ActorCritic;
    const NAME: &'static str = A::NAME;

    /// The runners' rollout: `n_steps`, γ and the behaviour GAE λ (1 for IMPALA).
    fn rollout_of(cfg: &A::Config) -> RolloutSettings {
        let r = A::settings(cfg).runner;
        RolloutSettings::new(r.n_steps, r.gamma, r.gae_lambda, false, -1)
    }
    fn accepts_action_space(_space: &Space) -> Result<(), String> {
        Ok(())
    }
    fn new_policy(
        cfg: &A::Config,
        obs_space: &Space,
        critic_extra: usize,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<ActorCritic, String> {
        let kw = A::policy_kwargs(cfg);
        if critic_extra > 0 {
            ActorCritic::centralized(obs_space, critic_extra, act_space, kw, rng, device)
        } else {
            A::make_policy(cfg, (obs_space, act_space), rng, device).map_err(|e| e.to_string())
        }
    }
    fn build_learner(
        cfg: A::Config,
        policy: ActorCritic,
        ctx: &BuildContext,
    ) -> Result<Self, RlError> {
        if A::settings(&cfg).runner.num_envs != 1 {
            return Err(ConfigError::new(
                "algo_kwargs.num_envs_per_env_runner",
                "a multi-agent run steps its n_envs envs itself: set n_envs instead",
            )
            .into());
        }
        A::build(cfg, policy, ctx).map(Self)
    }
    fn acting_policy(&self) -> &ActorCritic {
        self.0.policy()
    }
    /// The updates on the batches the learner schedules now that `rows` arrived (metrics:
    /// their means), then the learner's iteration metrics.
    fn learn(&mut self, rows: RunnerBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let mut updates = MetricsMean::default();
        for b in self.0.schedule(rows) {
            updates.add(self.0.update(&b, progress)?);
        }
        let mut m = updates.mean();
        self.0.iteration_metrics(progress, &mut m);
        Ok(m)
    }
    fn policy_state(&self) -> LearnerState {
        self.0.save_state()
    }
    fn load_policy_state(
        &mut self,
        ck: &Checkpoint,
        entries: &Map<String, Value>,
    ) -> Result<(), RlError> {
        self.0.load_state(ck, entries)
    }
}

/// One agent step waiting for its bootstrap, or done.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    obs: Vec<f32>,
    action: Vec<f32>,
    reward: f32,
    value: f32,
    log_prob: f32,
    episode_start: bool,
    /// γ·V(final observation) folded into `reward` at a truncation.
    boot: f32,
    /// The value GAE bootstraps from after this row (0 at an episode's end).
    next_value: f32,
    /// The next row of this agent's chain follows this one.
    successor: bool,
    /// A recurrent policy's state this step started from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    state: Vec<f32>,
    /// Cut by the rollout's end: the learner input whose value `next_value` is (V-trace
    /// recomputes that value with the learner's policy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cut_input: Vec<f32>,
}

/// Each agent's rows of one env: the closed chain of this rollout and the open row.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct AgentRows {
    closed: Vec<Row>,
    open: Option<Row>,
    /// The agent's next action starts an episode.
    starting: bool,
    /// A recurrent policy's state after the agent's last step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    state: Vec<f32>,
}

/// The shell's part of a checkpoint's `state.json` (beside the core's and the learners').
#[derive(Serialize, Deserialize)]
struct ShellState {
    rng_policy: Rng,
    /// Open rows carried to the next rollout (turn-based games) and episode-start flags.
    rows: Vec<AgentMap<AgentRows>>,
}

/// The multi-agent shell around learners of type `L`.
pub struct MultiAgentOnPolicy<L: PolicyLearner> {
    core: MultiAgentCore,
    learned: BTreeMap<String, LearnedPolicy<L>>,
    rows: Vec<AgentMap<AgentRows>>,
    n_steps: usize,
    rng_policy: Rng,
    infer: Device,
    /// Every agent and its observation space, in `possible_agents` order (what a
    /// centralized critic reads).
    agent_obs_spaces: Vec<(AgentId, Space)>,
}

impl<L: PolicyLearner> MultiAgentOnPolicy<L> {
    /// Builds the run: `run.multi_agent` (default: one shared policy) resolved against the env,
    /// one learner per learned policy with the run's `algo_kwargs` and the policy's overrides,
    /// heuristics for the frozen ones.
    pub fn new(
        run: &RunConfig,
        make_env: MultiAgentEnvMaker<'_>,
        make_frozen: FrozenMaker<'_>,
        device: &Device,
    ) -> Result<Self, RlError> {
        let core = MultiAgentCore::new(run, make_env, make_frozen)?;
        let autodiff = device.clone().autodiff();
        let mut learned = BTreeMap::new();
        let mut n_steps = None;
        let possible = core.possible();
        let agent_obs_spaces = possible
            .iter()
            .map(|a| Ok((a.clone(), core.envs.observation_space(a)?.clone())))
            .collect::<Result<Vec<_>, RlError>>()?;
        let centralized = run
            .multi_agent
            .as_ref()
            .is_some_and(|m| m.centralized_critic);
        let critic_extra = if centralized {
            agent_obs_spaces.iter().map(|(_, s)| s.flat_dim()).sum()
        } else {
            0
        };
        for id in core.learned_ids() {
            let cfg = L::Config::from_kwargs(&core.policy_kwargs(&id))
                .map_err(|e| policy_field(&id, e))?;
            let settings = L::rollout_of(&cfg);
            let field = |k: &str| format!("multi_agent.policies.{id}.{k}");
            if settings.sde_sample_freq.is_some() {
                return Err(ConfigError::new(
                    field("algo_kwargs.use_sde"),
                    "gSDE is not supported in multi-agent runs yet",
                )
                .into());
            }
            match n_steps {
                None => n_steps = Some(settings.n_steps),
                Some(n) if n != settings.n_steps => {
                    return Err(ConfigError::new(
                        field("algo_kwargs.n_steps"),
                        format!(
                            "every policy collects the same rollout: n_steps {} vs {n}",
                            settings.n_steps
                        ),
                    )
                    .into());
                }
                Some(_) => {}
            }
            let (obs_space, act_space) = core.spaces_of(&id)?;
            L::accepts_action_space(&act_space)
                .map_err(|e| ConfigError::new(field("algorithm"), e))?;
            let prun = core.policy_run(&id);
            let mut init = Rng::for_stream(prun.seed, "init");
            let policy = L::new_policy(
                &cfg,
                &obs_space,
                critic_extra,
                &act_space,
                &mut init,
                &autodiff,
            )
            .map_err(|e| {
                let f = if centralized {
                    format!("multi_agent.centralized_critic (policy {id})")
                } else {
                    format!("multi_agent.policies.{id}")
                };
                ConfigError::new(f, e)
            })?;
            let state_dim = policy.state_dim();
            let ctx = BuildContext {
                device: autodiff.clone(),
                run: &prun,
                spaces: (&obs_space, &act_space),
            };
            let learner = L::build_learner(cfg, policy, &ctx).map_err(|e| match e {
                RlError::Config(c) => policy_field(&id, c).into(),
                e => e,
            })?;
            let train = core.map.to_train.contains(&id);
            learned.insert(
                id,
                LearnedPolicy {
                    learner,
                    train,
                    settings,
                    obs_space,
                    act_space,
                    critic_extra,
                    state_dim,
                },
            );
        }
        let rows = (0..core.envs.num_envs())
            .map(|_| {
                possible
                    .iter()
                    .map(|a| {
                        let fresh = AgentRows {
                            starting: true,
                            ..AgentRows::default()
                        };
                        (a.clone(), fresh)
                    })
                    .collect()
            })
            .collect();
        Ok(Self {
            core,
            learned,
            rows,
            // The rollout length when every policy is a heuristic: one step.
            n_steps: n_steps.unwrap_or(1),
            rng_policy: Rng::for_stream(run.seed, "policy"),
            infer: device.clone(),
            agent_obs_spaces,
        })
    }
}

/// GAE over one agent's chain of rows (in order): advantages and returns per row.
fn chain_gae(rows: &[Row], gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
    let mut adv = vec![0.0f32; rows.len()];
    let mut next = 0.0f32;
    for (i, r) in rows.iter().enumerate().rev() {
        let carry = if r.successor { next } else { 0.0 };
        let delta = r.reward + gamma * r.next_value - r.value;
        adv[i] = delta + gamma * lambda * carry;
        next = adv[i];
    }
    let ret = adv.iter().zip(rows).map(|(a, r)| a + r.value).collect();
    (adv, ret)
}

/// What a learned agent did at a step, for its row.
#[derive(Clone)]
struct Acted {
    value: f32,
    log_prob: f32,
    /// The raw sample (Box actions not clipped).
    action: Vec<f32>,
    /// What the learner reads (the observation, with a centralized critic's extra).
    input: Vec<f32>,
    /// A recurrent policy's state before the step.
    state: Vec<f32>,
}

/// What a policy's inference copy gives for a batch of agents.
struct Acting {
    actions: Vec<f32>,
    values: Vec<f32>,
    log_probs: Vec<f32>,
}

/// Actions, values and log-probs for `n` learner inputs; a recurrent policy advances `state`
/// (`[n × state_dim]`, already zero where episodes start).
fn act_batch(
    policy: &(impl RolloutPolicy + Module),
    flat: Vec<f32>,
    n: usize,
    state: &mut [f32],
    device: &Device,
    rng: &mut Rng,
) -> Acting {
    let d = flat.len() / n.max(1);
    let out = policy.step(tensor2(flat, n, d, device), state, &vec![0.0; n]);
    let params = host(out.params);
    let values = host(out.values);
    let log_std = out.log_std.map(host).unwrap_or_default();
    let mut actions = Vec::new();
    let log_probs = policy
        .dist()
        .sample(&params, &log_std, rng, false, &mut actions);
    Acting {
        actions,
        values,
        log_probs,
    }
}

/// Values of `n` learner inputs, a recurrent policy continuing from `state`.
fn values_of(
    policy: &(impl RolloutPolicy + Module),
    flat: Vec<f32>,
    n: usize,
    state: &[f32],
    device: &Device,
) -> Vec<f32> {
    let d = flat.len() / n.max(1);
    policy.values_from(tensor2(flat, n, d, device), state, &vec![0.0; n])
}

/// Actions for `n` raw observations of `lp`'s agents, clipped to the action bounds (a
/// centralized critic's input is not needed: the actor reads the observation alone); a
/// recurrent policy advances `state`.
fn actor_actions<L: PolicyLearner>(
    lp: &LearnedPolicy<L>,
    raw: &[f32],
    n: usize,
    state: &mut [f32],
    device: &Device,
    rng: &mut Rng,
    deterministic: bool,
) -> Vec<f32> {
    let mut flat = Vec::new();
    flatten_batch(&lp.obs_space, raw, &mut flat);
    let d = lp.obs_space.flat_dim();
    let mut a = lp.learner.acting_policy().valid().sample_actions(
        tensor2(flat, n, d, device),
        state,
        &vec![0.0; n],
        rng,
        deterministic,
    );
    lp.act_space.clip_to_bounds(&mut a);
    a
}

fn flat_obs(space: &Space, raw: &[f32]) -> Vec<f32> {
    let mut flat = Vec::new();
    flatten_batch(space, raw, &mut flat);
    flat
}

impl<L: PolicyLearner> MultiAgentOnPolicy<L> {
    /// The learned policies by id.
    pub fn learned(&self) -> &BTreeMap<String, LearnedPolicy<L>> {
        &self.learned
    }

    /// Agent steps so far (actions taken by all agents).
    pub fn agent_steps(&self) -> u64 {
        self.core.agent_steps
    }
    /// The run configuration.
    pub fn run_config(&self) -> &RunConfig {
        &self.core.run
    }

    /// What agent `a`'s learner reads when the agents see `obs` (one env's observations):
    /// its own observation flattened, and with a centralized critic every agent's after it.
    fn learner_input(&self, lp: &LearnedPolicy<L>, a: &str, obs: &AgentMap<Vec<f32>>) -> Vec<f32> {
        let mut input = flat_obs(&lp.obs_space, &obs[a]);
        if lp.critic_extra > 0 {
            for (b, space) in &self.agent_obs_spaces {
                match obs.get(b) {
                    Some(o) => space.flatten(o, &mut input),
                    None => input.extend(std::iter::repeat_n(0.0, space.flat_dim())),
                }
            }
        }
        input
    }

    /// The learner inputs of `who` (env, agent) of policy `lp`, from each env's observations
    /// `obs(i)`, one after the other.
    fn learner_inputs<'o>(
        &self,
        lp: &LearnedPolicy<L>,
        who: &[(usize, AgentId)],
        obs: impl Fn(usize) -> &'o AgentMap<Vec<f32>>,
    ) -> Vec<Vec<f32>> {
        who.iter()
            .map(|(i, a)| self.learner_input(lp, a, obs(*i)))
            .collect()
    }

    /// The recurrent states `who` (env, agent) of policy `lp` continue from, one after the
    /// other: the state after each agent's last step, zero where its episode starts (empty
    /// for a feed-forward policy).
    fn current_states(&self, lp: &LearnedPolicy<L>, who: &[(usize, AgentId)]) -> Vec<f32> {
        let sd = lp.state_dim;
        let mut states = Vec::with_capacity(who.len() * sd);
        for (i, a) in who {
            let slot = &self.rows[*i][a];
            if slot.starting || slot.state.len() != sd {
                states.extend(std::iter::repeat_n(0.0, sd));
            } else {
                states.extend_from_slice(&slot.state);
            }
        }
        states
    }

    /// Chooses the actions of every agent to act in every env: learned policies in one batch
    /// each, heuristics per agent. Returns the env actions and what each learned agent did
    /// (for its row); recurrent agents keep the state they reach.
    #[allow(clippy::type_complexity)]
    fn choose(&mut self) -> Result<(Vec<AgentMap<Vec<f32>>>, Vec<AgentMap<Acted>>), RlError> {
        let n = self.core.envs.num_envs();
        let mut env_actions = vec![AgentMap::new(); n];
        let mut learned_rows = vec![AgentMap::new(); n];
        let mut reached = Vec::new();
        for (id, lp) in &self.learned {
            let (who, _) = self.core.to_act(id);
            if who.is_empty() {
                continue;
            }
            let inputs = self.learner_inputs(lp, &who, |i| &self.core.envs.obs()[i]);
            let start = self.current_states(lp, &who);
            let mut state = start.clone();
            let valid = lp.learner.acting_policy().valid();
            let out = act_batch(
                &valid,
                inputs.concat(),
                who.len(),
                &mut state,
                &self.infer,
                &mut self.rng_policy,
            );
            let (ad, sd) = (lp.act_space.raw_dim(), lp.state_dim);
            for (k, ((i, a), input)) in who.into_iter().zip(inputs).enumerate() {
                let action = out.actions[k * ad..(k + 1) * ad].to_vec();
                let mut clipped = action.clone();
                lp.act_space.clip_to_bounds(&mut clipped);
                env_actions[i].insert(a.clone(), clipped);
                if sd > 0 {
                    reached.push((i, a.clone(), state[k * sd..(k + 1) * sd].to_vec()));
                }
                learned_rows[i].insert(
                    a,
                    Acted {
                        value: out.values[k],
                        log_prob: out.log_probs[k],
                        action,
                        input,
                        state: start[k * sd..(k + 1) * sd].to_vec(),
                    },
                );
            }
        }
        for (i, a, state) in reached {
            self.rows[i]
                .get_mut(&a)
                .expect("every agent has rows")
                .state = state;
        }
        self.core.heuristic_actions(&mut env_actions)?;
        Ok((env_actions, learned_rows))
    }

    /// After a vector step: rewards into the open rows, truncation bootstraps, rows of
    /// finished agents closed, episode starts flagged where envs were reset.
    fn after_step(&mut self, n: usize) -> Result<(), RlError> {
        // Truncated learned agents bootstrap from their true final observations.
        let mut truncated: BTreeMap<String, Vec<(usize, AgentId)>> = BTreeMap::new();
        for i in 0..n {
            let s = self.core.envs.last(i);
            for (a, r) in &s.rewards {
                if let Some(row) = self.rows[i].get_mut(a).and_then(|x| x.open.as_mut()) {
                    row.reward += *r as f32;
                }
            }
            for a in s.obs.keys() {
                let trunc = s.truncations.get(a).copied().unwrap_or(false)
                    && !s.terminations.get(a).copied().unwrap_or(false);
                let id = &self.core.map.agent_policy[a];
                if trunc && self.learned.contains_key(id) && self.rows[i][a].open.is_some() {
                    truncated
                        .entry(id.clone())
                        .or_default()
                        .push((i, a.clone()));
                }
            }
        }
        for (id, who) in truncated {
            let lp = &self.learned[&id];
            let inputs = self.learner_inputs(lp, &who, |i| &self.core.envs.last(i).obs);
            // A recurrent critic continues from the state this step left.
            let states: Vec<f32> = who
                .iter()
                .flat_map(|(i, a)| self.rows[*i][a].state.iter().copied())
                .collect();
            let v = values_of(
                &lp.learner.acting_policy().valid(),
                inputs.concat(),
                who.len(),
                &states,
                &self.infer,
            );
            let gamma = lp.settings.gamma as f32;
            for (k, (i, a)) in who.iter().enumerate() {
                let row = self.rows[*i]
                    .get_mut(a)
                    .and_then(|x| x.open.as_mut())
                    .expect("checked");
                row.boot = gamma * v[k];
                row.reward += row.boot;
            }
        }
        // Finished agents close their rows; an env that was reset starts new episodes.
        for i in 0..n {
            let s = self.core.envs.last(i);
            for a in s.obs.keys() {
                if s.done(a)
                    && let Some(slot) = self.rows[i].get_mut(a)
                {
                    if let Some(row) = slot.open.take() {
                        slot.closed.push(row);
                    }
                    slot.starting = true;
                }
            }
            if self.core.envs.ended(i) {
                for slot in self.rows[i].values_mut() {
                    slot.starting = true;
                }
            }
        }
        Ok(())
    }

    /// The closed rows of `id`'s agents as one buffer with advantages and returns, each
    /// agent's chain after the other, with where each chain goes on (None when it has no rows
    /// this rollout); the rows leave their chains.
    fn policy_rows(&mut self, id: &str) -> Option<RunnerBatch> {
        let lp = &self.learned[id];
        let (gamma, lambda) = (lp.settings.gamma as f32, lp.settings.gae_lambda as f32);
        let (od, ad) = (
            lp.obs_space.flat_dim() + lp.critic_extra,
            lp.act_space.raw_dim(),
        );
        let mut chains = Vec::new();
        for env_rows in &mut self.rows {
            for (a, slot) in env_rows.iter_mut() {
                if self.core.map.agent_policy[a] == id && !slot.closed.is_empty() {
                    // A waiting agent's chain goes on with its open row.
                    let goes_on = slot.closed.last().is_some_and(|r| r.successor);
                    let next = slot
                        .open
                        .as_ref()
                        .filter(|_| goes_on)
                        .map(|r| r.obs.clone());
                    chains.push((std::mem::take(&mut slot.closed), next));
                }
            }
        }
        let total: usize = chains.iter().map(|(c, _)| c.len()).sum();
        if total == 0 {
            return None;
        }
        let sd = lp.state_dim;
        let mut buf = RolloutBuffer::new(total, 1, od, ad);
        if sd > 0 {
            buf.set_state_dim(sd);
        }
        let (mut adv, mut ret) = (Vec::with_capacity(total), Vec::with_capacity(total));
        let (mut last_obs, mut last_dones) = (Vec::new(), Vec::new());
        for (chain, next) in &chains {
            let end = chain.last().expect("chains are not empty");
            // The chain goes on (its successor row, or the input it was cut at) or its
            // agent's episode ended there.
            let going_on = next
                .as_ref()
                .or_else(|| (!end.cut_input.is_empty()).then_some(&end.cut_input));
            match going_on {
                Some(input) => {
                    last_obs.extend_from_slice(input);
                    last_dones.push(0.0);
                }
                None => {
                    last_obs.extend(std::iter::repeat_n(0.0, od));
                    last_dones.push(1.0);
                }
            }
            let (a, r) = chain_gae(chain, gamma, lambda);
            adv.extend(a);
            ret.extend(r);
            for (k, row) in chain.iter().enumerate() {
                // A recurrent learner cuts sequences at episode starts and runs each from its
                // stored state: each chain (one agent's rows) starts sequences of its own.
                let start = row.episode_start || (sd > 0 && k == 0);
                if sd > 0 {
                    buf.add_states(&row.state);
                }
                buf.add(
                    &row.obs,
                    &row.action,
                    &[row.reward],
                    &[start as u8 as f32],
                    &[row.value],
                    &[row.log_prob],
                );
                buf.set_last_bootstraps(&[row.boot]);
            }
        }
        buf.advantages = adv;
        buf.returns = ret;
        buf.set_last_values(&[0.0], &[1.0]);
        Some(RunnerBatch {
            buffer: buf,
            last_obs,
            last_dones,
            chains: chains.iter().map(|(c, _)| c.len()).collect(),
            episodes: Vec::new(),
            seconds: 0.0,
        })
    }

    /// Loads a checkpoint written by [`save`](Self::save) and continues exactly where it
    /// stopped (`device` replaces the saved one).
    pub fn load(
        dir: &Path,
        make_env: MultiAgentEnvMaker<'_>,
        make_frozen: FrozenMaker<'_>,
        device: &Device,
    ) -> Result<Self, RlError> {
        let saved = MultiAgentCheckpoint::read(dir, L::NAME)?;
        let mut me = Self::new(&saved.run, make_env, make_frozen, device)?;
        let shell: ShellState = saved.shell()?;
        if shell.rows.len() != me.rows.len() {
            let m = format!(
                "saved for {} envs, the run has {}",
                shell.rows.len(),
                me.rows.len()
            );
            return Err(ConfigError::new(saved.ck.path_of("state.json"), m).into());
        }
        for (id, lp) in &mut me.learned {
            let (ck, entries) = saved.policy(id)?;
            lp.learner.load_policy_state(&ck, entries)?;
        }
        saved.restore_core(&mut me.core)?;
        me.rows = shell.rows;
        me.rng_policy = shell.rng_policy;
        Ok(me)
    }
}

impl<L: PolicyLearner> MultiAgentAlgorithm for MultiAgentOnPolicy<L> {
    fn name(&self) -> &str {
        L::NAME
    }
    fn core(&self) -> &MultiAgentCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut MultiAgentCore {
        &mut self.core
    }
    fn train(&mut self) -> Result<Metrics, RlError> {
        let started = Instant::now();
        let n = self.core.envs.num_envs();
        let mut episodes: Vec<MultiAgentEpisode> = Vec::new();
        for _ in 0..self.n_steps {
            let (actions, learned_rows) = self.choose()?;
            for (i, rows) in learned_rows.into_iter().enumerate() {
                for (a, acted) in rows {
                    let Acted {
                        value,
                        log_prob,
                        action,
                        input: obs,
                        state,
                    } = acted;
                    let slot = self.rows[i].get_mut(&a).expect("every agent has rows");
                    // The previous row of this agent bootstraps from this step's value.
                    if let Some(mut prev) = slot.open.take() {
                        prev.next_value = value;
                        prev.successor = true;
                        slot.closed.push(prev);
                    }
                    slot.open = Some(Row {
                        obs,
                        action,
                        reward: 0.0,
                        value,
                        log_prob,
                        episode_start: std::mem::take(&mut slot.starting),
                        boot: 0.0,
                        next_value: 0.0,
                        successor: false,
                        state,
                        cut_input: Vec::new(),
                    });
                }
            }
            self.core.step(&actions)?;
            self.after_step(n)?;
            episodes.extend(self.core.envs.drain_episodes());
        }
        // The rollout ends: agents about to act bootstrap from their current observations.
        let ids: Vec<String> = self.learned.keys().cloned().collect();
        for id in &ids {
            let (who, _) = self.core.to_act(id);
            let who: Vec<_> = who
                .into_iter()
                .filter(|(i, a)| self.rows[*i][a].open.is_some())
                .collect();
            if who.is_empty() {
                continue;
            }
            let lp = &self.learned[id];
            let inputs = self.learner_inputs(lp, &who, |i| &self.core.envs.obs()[i]);
            let states = self.current_states(lp, &who);
            let v = values_of(
                &lp.learner.acting_policy().valid(),
                inputs.concat(),
                who.len(),
                &states,
                &self.infer,
            );
            for (k, ((i, a), input)) in who.into_iter().zip(inputs).enumerate() {
                let slot = self.rows[i].get_mut(&a).expect("every agent has rows");
                let mut row = slot.open.take().expect("checked");
                row.next_value = v[k];
                row.cut_input = input;
                slot.closed.push(row);
            }
        }
        let rollout_seconds = started.elapsed().as_secs_f64();
        let mut m = Metrics::new();
        let progress = self.core.progress();
        for id in &ids {
            let rows = self.policy_rows(id);
            let lp = self.learned.get_mut(id).expect("a learned policy");
            let Some(rows) = rows else { continue };
            m.insert(format!("policies/{id}/rows"), rows.buffer.len() as f64);
            if !lp.train {
                continue;
            }
            for (k, v) in lp.learner.learn(rows, &progress)? {
                m.insert(format!("policies/{id}/{k}"), v);
            }
        }
        let steps = (self.n_steps * n) as u64;
        self.core
            .finish(&mut m, &episodes, steps, started, rollout_seconds)?;
        Ok(m)
    }
    fn predict(&mut self, id: &str, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let lp = learned_policy(&self.learned, id)?;
        if lp.state_dim > 0 {
            return Err(ConfigError::new(
                "policy",
                format!(
                    "{id:?} is recurrent: it acts with each agent's state, through evaluate (rl eval)"
                ),
            )
            .into());
        }
        let (_, n) =
            rl_training_core::agent::checked_flat_obs(&lp.obs_space, &self.core.run.env_id, obs)?;
        Ok(actor_actions(
            lp,
            obs,
            n,
            &mut [],
            &self.infer,
            &mut self.rng_policy,
            deterministic,
        ))
    }
    fn predict_with_state(
        &mut self,
        id: &str,
        obs: &[f32],
        state: &mut Vec<f32>,
        deterministic: bool,
    ) -> Result<Vec<f32>, RlError> {
        let lp = learned_policy(&self.learned, id)?;
        if lp.state_dim == 0 {
            return self.predict(id, obs, deterministic);
        }
        let (_, n) =
            rl_training_core::agent::checked_flat_obs(&lp.obs_space, &self.core.run.env_id, obs)?;
        if n != 1 {
            let m = format!("one agent's observation, got {n} rows");
            return Err(ConfigError::new("obs", m).into());
        }
        if state.len() != lp.state_dim {
            *state = vec![0.0; lp.state_dim];
        }
        Ok(actor_actions(
            lp,
            obs,
            1,
            state,
            &self.infer,
            &mut self.rng_policy,
            deterministic,
        ))
    }
    fn evaluate(
        &mut self,
        env: &mut dyn MultiAgentEnv,
        n_episodes: usize,
        deterministic: bool,
        seed: u64,
    ) -> Result<MultiAgentEval, RlError> {
        let (learned, infer) = (&self.learned, &self.infer);
        // Each agent's recurrent state, zero at its first step of an episode.
        let mut states: AgentMap<Vec<f32>> = AgentMap::new();
        self.core.evaluate(env, n_episodes, seed, |e| {
            let lp = &learned[e.policy];
            let state = states.entry(e.agent.to_string()).or_default();
            if e.first {
                *state = vec![0.0; lp.state_dim];
            }
            Ok(actor_actions(
                lp,
                e.obs,
                1,
                state,
                infer,
                e.rng,
                deterministic,
            ))
        })
    }
    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let policies = self
            .learned
            .iter()
            .map(|(id, lp)| (id.clone(), lp.learner.policy_state()))
            .collect();
        let shell = ShellState {
            rng_policy: self.rng_policy.clone(),
            rows: self.rows.clone(),
        };
        let shell = serde_json::to_value(shell).expect("serializable");
        self.core.save_checkpoint(dir, L::NAME, policies, shell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(reward: f32, value: f32, next_value: f32, successor: bool) -> Row {
        Row {
            obs: vec![],
            action: vec![],
            reward,
            value,
            log_prob: 0.0,
            episode_start: false,
            boot: 0.0,
            next_value,
            successor,
            state: vec![],
            cut_input: vec![],
        }
    }

    /// A chain of rows gets the advantages of the single-agent GAE over the same steps.
    #[test]
    fn chain_gae_equals_the_single_agent_gae() {
        let r = [1.0, 0.5, -0.2, 2.0, 0.3];
        let v = [0.4, 0.1, 0.7, -0.3, 0.9];
        let (g, l) = (0.98, 0.8);
        // Rows 0–2: one episode that terminates; rows 3–4: a new one, cut by the rollout's
        // end with V = 0.6 after it.
        let rows = vec![
            row(r[0], v[0], v[1], true),
            row(r[1], v[1], v[2], true),
            row(r[2], v[2], 0.0, false),
            row(r[3], v[3], v[4], true),
            row(r[4], v[4], 0.6, false),
        ];
        let (adv, ret) = chain_gae(&rows, g, l);
        let (mut a, mut rt) = (vec![0.0; 5], vec![0.0; 5]);
        let starts = [1.0, 0.0, 0.0, 1.0, 0.0];
        rl_training_core::buffers::compute_gae(
            &r,
            &v,
            &starts,
            &[0.6],
            &[0.0],
            g,
            l,
            &mut a,
            &mut rt,
        );
        for i in 0..5 {
            assert!(
                (adv[i] - a[i]).abs() < 1e-6,
                "row {i}: {} vs {}",
                adv[i],
                a[i]
            );
            assert!((ret[i] - rt[i]).abs() < 1e-6);
        }
        // By hand, the terminal row: δ = r − V.
        assert!((adv[2] - (r[2] - v[2])).abs() < 1e-7);
    }
}
