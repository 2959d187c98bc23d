//! Training replays collection: on the first minibatch of an update (before any gradient
//! step) the sequence pass from the stored states gives back the collected log-probabilities
//! and values, so the ratio is exactly 1 (KL 0) — it would not be if a state were carried
//! over an episode start, a sequence began from the wrong stored state, or padding leaked.

use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;
use rl_training_recurrent_ppo::RecurrentPpo;

fn check(sets: &[&str]) {
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    // One epoch, one minibatch holding the whole rollout: the update's metrics are those of
    // the unchanged policy.
    sets.extend(["algo_kwargs.n_epochs=1", "algo_kwargs.batch_size=100000"].map(String::from));
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "recurrent_ppo_cartpole_novel.yaml",
        &sets,
    );
    let mut alg = RecurrentPpo::new(&run, &testing::training_env, &Device::flex()).unwrap();
    for it in 0..3 {
        let m = alg.train().unwrap();
        let (kl, cf) = (m["losses/approx_kl"], m["losses/clipfrac"]);
        let seqs = m["charts/sequences"];
        assert!(kl.abs() < 1e-6, "{sets:?} iteration {it}: approx_kl {kl}");
        assert_eq!(cf, 0.0, "{sets:?} iteration {it}");
        assert!(seqs > 8.0, "episodes should cut sequences: {seqs}");
    }
}

#[test]
fn sequence_pass_reproduces_collected_log_probs() {
    check(&["algo_kwargs.sequence_length=32"]);
    check(&["algo_kwargs.sequence_length=5"]);
    check(&[
        "algo_kwargs.shared_lstm=true",
        "algo_kwargs.enable_critic_lstm=false",
    ]);
    check(&[
        "algo_kwargs.n_lstm_layers=2",
        "algo_kwargs.sequence_length=7",
    ]);
}
