//! GAE, distributions and Huber against stable-baselines3 / torch recordings
//! (`RL_RETURNS_REFERENCE`, `RL_DISTS_REFERENCE`; defaults under `<workspace>/testdata/reference`).
//! f32 results must match to max(1e-5 absolute, 1e-5 relative).

use burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::buffers::compute_gae;
use rl_training_core::distributions as d;
use rl_training_core::losses;
use serde_json::Value;
use std::path::PathBuf;

fn ref_file(var: &str, name: &str) -> Value {
    let p: PathBuf = rl_training_core::testing::reference_path(
        var,
        &format!("testdata/reference/{name}"),
        env!("CARGO_MANIFEST_DIR"),
    );
    let s =
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (set {var})", p.display()));
    serde_json::from_str(&s).unwrap()
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) => s.parse::<f64>().unwrap_or(match s.as_str() {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => f64::NAN,
        }),
        Value::Bool(b) => *b as u8 as f64,
        _ => panic!("not a number {v}"),
    }
}

fn flat(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        x => vec![num(x) as f32],
    }
}

fn dims2(v: &Value) -> [usize; 2] {
    let a = v.as_array().unwrap();
    [a.len(), a[0].as_array().map_or(1, |r| r.len())]
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5f32.max(1e-5 * w.abs());
        assert!((g - w).abs() <= tol, "{what}[{i}]: got {g}, want {w}");
    }
}

fn dev() -> Device {
    Device::flex()
}

fn t2(v: &Value) -> Tensor<2> {
    let s = dims2(v);
    Tensor::from_data(TensorData::new(flat(v), s), &dev())
}

fn host(t: Tensor<1>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().unwrap()
}

#[test]
fn gae_matches_sb3() {
    let r = ref_file("RL_RETURNS_REFERENCE", "returns_ref.json");
    let gae = &r["gae"];
    let gamma = num(&gae["gamma"]) as f32;
    for case in gae["cases"].as_array().unwrap() {
        let i = &case["inputs"];
        let (rew, val, st) = (
            flat(&i["rewards"]),
            flat(&i["values"]),
            flat(&i["episode_starts"]),
        );
        let (lv, ld) = (flat(&i["last_values"]), flat(&i["last_dones"]));
        for res in case["results"].as_array().unwrap() {
            let lam = num(&res["gae_lambda"]) as f32;
            let (mut adv, mut ret) = (vec![0.0; rew.len()], vec![0.0; rew.len()]);
            compute_gae(&rew, &val, &st, &lv, &ld, gamma, lam, &mut adv, &mut ret);
            close(
                &adv,
                &flat(&res["advantages"]),
                &format!("gae case {} lambda {lam} advantages", case["case"]),
            );
            close(
                &ret,
                &flat(&res["returns"]),
                &format!("gae case {} lambda {lam} returns", case["case"]),
            );
        }
    }
}

#[test]
fn categorical_matches_torch() {
    let r = ref_file("RL_DISTS_REFERENCE", "dists_ref.json");
    for c in r["categorical"]["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let logits = t2(&c["logits"]);
        let acts: Vec<i64> = flat(&c["actions"]).iter().map(|&a| a as i64).collect();
        let n = acts.len();
        let a =
            Tensor::<1, burn::tensor::Int>::from_data(TensorData::new(acts.clone(), [n]), &dev());
        let want = &c["f32"];
        close(
            &host(d::categorical_log_prob(logits.clone(), a)),
            &flat(&want["log_prob"]),
            &format!("{name} log_prob"),
        );
        close(
            &host(d::categorical_entropy(logits.clone())),
            &flat(&want["entropy"]),
            &format!("{name} entropy"),
        );
        // Host-side log-prob used during rollouts agrees too.
        let kind = d::DistKind::Categorical {
            n: dims2(&c["logits"])[1],
            start: 0,
        };
        let lg = flat(&c["logits"]);
        let lp = flat(&want["log_prob"]);
        let k = dims2(&c["logits"])[1];
        for b in 0..n {
            // Deterministic sampling picks the argmax; check its log-prob against log_softmax.
            let mut out = Vec::new();
            let got = kind.sample(
                &lg[b * k..(b + 1) * k],
                &[],
                &mut rl_training_core::Rng::seed_from(0),
                true,
                &mut out,
            );
            let ls = flat(&want["log_softmax"]);
            close(
                &got,
                &[ls[b * k + out[0] as usize]],
                &format!("{name} host log_prob row {b}"),
            );
            let _ = lp[b];
        }
    }
}

#[test]
fn diag_gaussian_matches_torch() {
    let r = ref_file("RL_DISTS_REFERENCE", "dists_ref.json");
    for c in r["diag_gaussian"]["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let (m, ls, a) = (t2(&c["mean"]), t2(&c["log_std"]), t2(&c["actions"]));
        let want = &c["f32"];
        close(
            &host(d::diag_gaussian_log_prob(m.clone(), ls.clone(), a.clone())),
            &flat(&want["log_prob"]),
            &format!("{name} log_prob"),
        );
        let per = d::diag_gaussian_log_prob_per_dim(m.clone(), ls.clone(), a.clone());
        let dims = per.dims();
        close(
            &host(per.reshape([dims[0] * dims[1]])),
            &flat(&want["log_prob_per_dim"]),
            &format!("{name} log_prob_per_dim"),
        );
        close(
            &host(d::diag_gaussian_entropy(ls.clone())),
            &flat(&want["entropy"]),
            &format!("{name} entropy"),
        );
        // Host-side path (rollouts): log-prob of the mean.
        let kind = d::DistKind::DiagGaussian { dim: dims[1] };
        let (mh, lh) = (flat(&c["mean"]), flat(&c["log_std"]));
        for b in 0..dims[0] {
            let row = b * dims[1]..(b + 1) * dims[1];
            let mut out = Vec::new();
            let lp = kind.sample(
                &mh[row.clone()],
                &lh[row.clone()],
                &mut rl_training_core::Rng::seed_from(0),
                true,
                &mut out,
            );
            let mt = Tensor::<2>::from_data(
                TensorData::new(mh[row.clone()].to_vec(), [1, dims[1]]),
                &dev(),
            );
            let lt = Tensor::<2>::from_data(
                TensorData::new(lh[row.clone()].to_vec(), [1, dims[1]]),
                &dev(),
            );
            close(
                &lp,
                &host(d::diag_gaussian_log_prob(mt.clone(), lt, mt)),
                &format!("{name} host log_prob row {b}"),
            );
        }
    }
}

#[test]
fn squashed_gaussian_matches_sb3() {
    let r = ref_file("RL_DISTS_REFERENCE", "dists_ref.json");
    for c in r["squashed_gaussian"]["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let (m, ls, u) = (
            t2(&c["mean"]),
            t2(&c["log_std"]),
            t2(&c["gaussian_actions"]),
        );
        let want = &c["f32"];
        // log_prob from the pre-tanh sample (SB3's SAC path) is what must match, also when saturating.
        close(
            &host(d::squashed_gaussian_log_prob(m, ls, u)),
            &flat(&want["log_prob"]),
            &format!("{name} log_prob"),
        );
    }
}

#[test]
fn huber_and_smooth_l1_match_torch() {
    let r = ref_file("RL_DISTS_REFERENCE", "dists_ref.json");
    let h = &r["huber"];
    let pred = flat(&h["inputs"]["pred"]);
    let target = flat(&h["inputs"]["target"]);
    let n = pred.len();
    let p = Tensor::<1>::from_data(TensorData::new(pred, [n]), &dev());
    let t = Tensor::<1>::from_data(TensorData::new(target, [n]), &dev());
    let w = &h["f32"];
    close(
        &host(losses::smooth_l1(p.clone(), t.clone(), 1.0)),
        &flat(&w["smooth_l1_beta1_elementwise"]),
        "smooth_l1 beta 1",
    );
    close(
        &host(losses::smooth_l1(p.clone(), t.clone(), 1.0).mean()),
        &flat(&w["smooth_l1_beta1_mean"]),
        "smooth_l1 beta 1 mean",
    );
    close(
        &host(losses::smooth_l1(p.clone(), t.clone(), 2.0).mean()),
        &flat(&w["smooth_l1_beta2_mean"]),
        "smooth_l1 beta 2 mean",
    );
    close(
        &host(losses::huber(p.clone(), t.clone(), 1.0)),
        &flat(&w["huber_delta1_elementwise"]),
        "huber delta 1",
    );
    close(
        &host(losses::huber(p.clone(), t.clone(), 2.0)),
        &flat(&w["huber_delta2_elementwise"]),
        "huber delta 2",
    );
    close(
        &host(losses::huber(p.clone(), t.clone(), 2.0).mean()),
        &flat(&w["huber_delta2_mean"]),
        "huber delta 2 mean",
    );
    close(
        &host(losses::huber(p, t, 1.0).mean()),
        &flat(&w["huber_delta1_mean"]),
        "huber delta 1 mean",
    );
}

/// SB3's `NStepReplayBuffer`: a full buffer of 16 rows × 4 envs, every transition sampled.
#[test]
fn n_step_returns_match_sb3() {
    use rl_training_core::replay::{NStep, Replay, ReplayConfig};
    let r = ref_file("RL_RETURNS_REFERENCE", "returns_ref.json");
    let ns = &r["nstep"];
    let gamma = num(&ns["gamma"]) as f32;
    let (t, ne) = (
        ns["n_steps_buffer"].as_u64().unwrap() as usize,
        ns["n_envs"].as_u64().unwrap() as usize,
    );
    let rewards = flat(&ns["inputs"]["rewards"]);
    let term = flat(&ns["inputs"]["terminated"]);
    let trunc = flat(&ns["inputs"]["truncated"]);
    assert_eq!(rewards.len(), t * ne);
    let results = ns["results"].as_array().unwrap();
    assert!(results.len() >= 3, "expected n in {{1, 3, 5}}");
    for res in results {
        let n = res["n"].as_u64().unwrap() as usize;
        let mut b = Replay::new(ReplayConfig {
            capacity: t * ne,
            n_envs: ne,
            obs_dim: 1,
            act_dim: 1,
            n_step: NStep::Fixed(n),
            prioritized: None,
        });
        for row in 0..t {
            let s = row * ne..(row + 1) * ne;
            // next_obs carries the row index, so the bootstrap row can be read back.
            b.add(
                &vec![0.0; ne],
                &vec![0.0; ne],
                &rewards[s.clone()],
                &vec![row as f32; ne],
                &term[s.clone()]
                    .iter()
                    .map(|&x| x != 0.0)
                    .collect::<Vec<_>>(),
                &trunc[s].iter().map(|&x| x != 0.0).collect::<Vec<_>>(),
            );
        }
        assert_eq!(b.len(), t * ne);
        let mut rng = rl_training_core::Rng::seed_from(0);
        let s = b.gather((0..t * ne).collect(), vec![1.0; t * ne], gamma, &mut rng);
        close(
            &s.rewards,
            &flat(&res["nstep_return"]),
            &format!("n={n} nstep_return"),
        );
        close(
            &s.discounts,
            &flat(&res["bootstrap_discount"]),
            &format!("n={n} bootstrap_discount"),
        );
        assert_eq!(s.terminated, flat(&res["final_done"]), "n={n} final_done");
        assert_eq!(s.next_obs, flat(&res["last_index"]), "n={n} last_index");
    }
}

/// V-trace (IMPALA) against the recorded float64 reference, both truncation settings
/// (ρ̄, c̄) ∈ {(1, 1), (0.5, 1)}, to 1e-6.
#[test]
fn vtrace_matches_reference() {
    use rl_training_core::vtrace::{VTraceInput, vtrace};
    let r = ref_file("RL_RETURNS_REFERENCE", "returns_ref.json");
    let v = &r["vtrace"];
    let b = v["B"].as_u64().unwrap() as usize;
    let f64s = |x: &Value| -> Vec<f64> {
        match x {
            Value::Array(a) => a
                .iter()
                .flat_map(|e| match e {
                    Value::Array(row) => row.iter().map(num).collect::<Vec<_>>(),
                    x => vec![num(x)],
                })
                .collect(),
            x => vec![num(x)],
        }
    };
    let inp = &v["inputs"];
    let (log_rhos, discounts, rewards, values, boot) = (
        f64s(&inp["log_rhos"]),
        f64s(&inp["discounts"]),
        f64s(&inp["rewards"]),
        f64s(&inp["values"]),
        f64s(&inp["bootstrap_value"]),
    );
    assert_eq!(log_rhos.len(), v["T"].as_u64().unwrap() as usize * b);
    // log_rhos are target minus behaviour log-probabilities.
    let (tl, bl) = (f64s(&inp["target_logp"]), f64s(&inp["behaviour_logp"]));
    for i in 0..log_rhos.len() {
        assert!((tl[i] - bl[i] - log_rhos[i]).abs() < 1e-12);
    }
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for res in results {
        let (rho_bar, c_bar) = (num(&res["rho_bar"]), num(&res["c_bar"]));
        let pg_rho_bar = res.get("pg_rho_bar").map_or(rho_bar, num);
        let out = vtrace(
            &VTraceInput {
                log_rhos: &log_rhos,
                discounts: &discounts,
                rewards: &rewards,
                values: &values,
                bootstrap_value: &boot,
            },
            b,
            rho_bar,
            c_bar,
            pg_rho_bar,
        );
        for (name, got) in [
            ("vs", &out.vs),
            ("pg_advantages", &out.pg_advantages),
            ("clipped_rhos", &out.clipped_rhos),
            ("cs", &out.cs),
            ("deltas", &out.deltas),
        ] {
            let want = f64s(&res[name]);
            assert_eq!(got.len(), want.len(), "{name}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-6,
                    "rho_bar {rho_bar} c_bar {c_bar} {name}[{i}]: got {g}, want {w}"
                );
            }
        }
    }
}
