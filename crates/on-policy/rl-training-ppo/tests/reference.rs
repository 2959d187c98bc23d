//! The PPO loss terms against stable-baselines3's formulas recorded in `RL_DISTS_REFERENCE`
//! (default `<workspace>/testdata/reference/dists_ref.json`), f32 to max(1e-5 abs, 1e-5 rel).

use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_ppo::loss;
use serde_json::Value;
use std::path::PathBuf;

fn reference() -> Value {
    let p: PathBuf = rl_training_core::testing::reference_path(
        "RL_DISTS_REFERENCE",
        "testdata/reference/dists_ref.json",
        env!("CARGO_MANIFEST_DIR"),
    );
    serde_json::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

fn v(x: &Value) -> Vec<f32> {
    match x {
        Value::Array(a) => a.iter().map(|e| e.as_f64().unwrap() as f32).collect(),
        n => vec![n.as_f64().unwrap() as f32],
    }
}

fn t(x: &[f32]) -> Tensor<1> {
    Tensor::from_data(TensorData::new(x.to_vec(), [x.len()]), &Device::flex())
}

fn host(x: Tensor<1>) -> Vec<f32> {
    x.into_data().try_into_vec::<f32>().unwrap()
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5f32.max(1e-5 * w.abs()),
            "{what}[{i}]: got {g} want {w}"
        );
    }
}

#[test]
fn ppo_clip_terms_match_sb3() {
    let r = reference();
    let p = &r["ppo_clip"];
    let clip = p["clip_range"].as_f64().unwrap();
    let i = &p["inputs"];
    let (lp, old, adv) = (
        v(&i["log_prob"]),
        v(&i["old_log_prob"]),
        v(&i["advantages"]),
    );
    let w = &p["f32"];
    // Raw advantages.
    let (pl, ratio) = loss::clipped_surrogate(t(&lp), t(&old), t(&adv), clip);
    close(&host(ratio.clone()), &v(&w["ratio"]), "ratio");
    close(
        &host(pl),
        &v(&w["raw_advantages"]["policy_loss"]),
        "policy_loss raw",
    );
    let cf = loss::clip_fraction(&host(ratio), clip);
    close(
        &[cf as f32],
        &v(&w["raw_advantages"]["clip_fraction"]),
        "clip_fraction raw",
    );
    // SB3's normalized advantages.
    let nadv = loss::normalize_advantages(&adv);
    close(
        &nadv,
        &v(&w["normalized_advantages"]["advantages"]),
        "normalized advantages",
    );
    let (pl, _) = loss::clipped_surrogate(t(&lp), t(&old), t(&nadv), clip);
    close(
        &host(pl),
        &v(&w["normalized_advantages"]["policy_loss"]),
        "policy_loss normalized",
    );
    close(
        &[loss::approx_kl(&lp, &old) as f32],
        &v(&w["approx_kl"]),
        "approx_kl",
    );
    // Value losses.
    let (val, oldv, ret) = (v(&i["values"]), v(&i["old_values"]), v(&i["returns"]));
    close(
        &host(loss::value_loss(t(&val), t(&oldv), t(&ret), None)),
        &v(&w["value_loss_unclipped"]),
        "value loss",
    );
    close(
        &host(loss::value_loss(t(&val), t(&oldv), t(&ret), Some(0.2))),
        &v(&w["value_loss_sb3_clipped_vf_0.2"]),
        "clipped value loss",
    );
}
