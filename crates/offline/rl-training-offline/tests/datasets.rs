//! Dataset round trips, Python-written files, and the errors of bad files.

use rl_training_core::algorithm::{Algorithm, RlError, RunStatus};
use rl_training_core::logger::Metrics;
use rl_training_core::{Env, Rng, Space};
use rl_training_offline::parquet_io::DEFAULT_ROWS_PER_GROUP;
use rl_training_offline::*;
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-offline-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A fixed policy: pushes the cart toward the pole's lean (CartPole) or a linear torque.
struct Fixed {
    status: RunStatus,
}

impl Algorithm for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }
    fn status(&self) -> &RunStatus {
        &self.status
    }
    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.status
    }
    fn train(&mut self) -> Result<Metrics, RlError> {
        Ok(Metrics::new())
    }
    fn predict(&mut self, obs: &[f32], _: bool) -> Result<Vec<f32>, RlError> {
        Ok(match &self.status.act_space {
            Space::Discrete { .. } => vec![(obs[2] + obs[3] > 0.0) as u8 as f32],
            _ => vec![(-2.0 * obs[2]).clamp(-2.0, 2.0)],
        })
    }
    fn save(&self, _: &Path) -> Result<(), RlError> {
        Ok(())
    }
}

fn recorded(env_id: &str, episodes: usize, epsilon: f64) -> (Transitions, DatasetSpec) {
    recorded_seeded(env_id, episodes, epsilon, 7)
}

fn recorded_seeded(
    env_id: &str,
    episodes: usize,
    epsilon: f64,
    seed: u64,
) -> (Transitions, DatasetSpec) {
    let mut env = rl_training_envs::make(env_id, &Default::default()).unwrap();
    let (o, a) = (env.observation_space().clone(), env.action_space().clone());
    let mut algo = Fixed {
        status: RunStatus::new(0, o.clone(), a.clone()),
    };
    let opts = RecordOptions {
        episodes,
        epsilon,
        seed,
        ..Default::default()
    };
    let d = record(&mut algo, env.as_mut(), &opts).unwrap();
    (d, DatasetSpec::from_spaces(&o, &a))
}

#[test]
fn record_then_parquet_round_trip_is_exact() {
    for env in ["CartPole-v1", "Pendulum-v1"] {
        let (d, spec) = recorded(env, 6, 0.3);
        assert_eq!(d.num_episodes(), 6);
        let p = tmp(&format!("{env}.parquet"));
        // Small row groups so episodes straddle them.
        write_parquet(&p, &d, &spec, 97).unwrap();
        let ds = ParquetDataset::open(&p).unwrap();
        assert!(ds.num_row_groups() > 2, "{}", ds.num_row_groups());
        assert_eq!(ds.spec(), &spec);
        assert_eq!(ds.read_all().unwrap(), d);
        assert!(!p.with_extension("parquet.tmp").exists());
    }
}

#[test]
fn record_then_npz_round_trip_is_exact() {
    for env in ["CartPole-v1", "Pendulum-v1"] {
        let (d, spec) = recorded(env, 4, 0.5);
        let p = tmp(&format!("{env}.npz"));
        write_npz(&p, &d, &spec).unwrap();
        let (back, s) = read_npz(&p).unwrap();
        assert_eq!(back, d);
        assert_eq!(s.obs_shape, spec.obs_shape);
        assert_eq!(s.act_shape, spec.act_shape);
        assert_eq!(s.discrete_actions, spec.discrete_actions);
    }
}

#[test]
fn epsilon_mixes_random_actions_and_ends_are_true_final_observations() {
    let (clean, _) = recorded("CartPole-v1", 3, 0.0);
    let (noisy, _) = recorded("CartPole-v1", 3, 1.0);
    // The fixed policy balances for a while; uniformly random actions fall within ~20 steps.
    assert!(clean.len() > 3 * 40, "{}", clean.len());
    assert!(noisy.len() < clean.len(), "{} {}", noisy.len(), clean.len());
    // Within an episode each new_obs is the next row's obs.
    for i in 0..clean.len() - 1 {
        if clean.eps_id[i] == clean.eps_id[i + 1] {
            assert_eq!(
                clean.new_obs[i * 4..i * 4 + 4],
                clean.obs[(i + 1) * 4..(i + 1) * 4 + 4]
            );
        }
    }
}

/// The fixture's values (see tests/fixtures/make_fixtures.py).
fn python_rows() -> Vec<(i64, i64, f32, bool, bool)> {
    let mut out = Vec::new();
    let mut i = 0;
    for (e, n) in [4, 3, 5].into_iter().enumerate() {
        for t in 0..n {
            let last = t == n - 1;
            out.push((
                e as i64,
                t as i64,
                0.1 * i as f32,
                last && e != 1,
                last && e == 1,
            ));
            i += 1;
        }
    }
    out
}

fn check_python_parquet(p: &Path) {
    let ds = ParquetDataset::open(p).unwrap();
    assert_eq!(ds.num_row_groups(), 2);
    assert_eq!(ds.spec().obs_shape, vec![4]);
    assert!(ds.spec().discrete_actions);
    assert!(ds.spec().act_shape.is_empty());
    let d = ds.read_all().unwrap();
    assert_eq!(d.len(), 12);
    for (i, (e, t, r, term, trunc)) in python_rows().into_iter().enumerate() {
        assert_eq!((d.eps_id[i], d.t[i]), (e, t));
        assert!((d.rewards[i] - r).abs() < 1e-6);
        assert_eq!((d.terminated[i], d.truncated[i]), (term, trunc));
        assert_eq!(d.actions[i], (i % 2) as f32);
        for k in 0..4 {
            assert_eq!(d.obs[i * 4 + k], i as f32 + 0.5 * k as f32);
            assert_eq!(d.new_obs[i * 4 + k], i as f32 + 0.5 * k as f32 + 0.25);
        }
    }
    let cartpole = rl_training_envs::make("CartPole-v1", &Default::default()).unwrap();
    let mut full = Dataset::open(p).unwrap();
    full.fit(
        "CartPole-v1",
        cartpole.observation_space(),
        cartpole.action_space(),
    )
    .unwrap();
}

fn check_python_npz(p: &Path) {
    let (d, spec) = read_npz(p).unwrap();
    assert_eq!(spec.obs_shape, vec![4]);
    assert_eq!(spec.act_shape, vec![2]);
    assert!(!spec.discrete_actions);
    for (i, (e, t, r, term, trunc)) in python_rows().into_iter().enumerate() {
        assert_eq!((d.eps_id[i], d.t[i]), (e, t), "row {i}");
        assert!((d.rewards[i] - r).abs() < 1e-6);
        assert_eq!((d.terminated[i], d.truncated[i]), (term, trunc));
        assert!((d.actions[i * 2] - (i as f32).sin()).abs() < 1e-6);
        assert!((d.actions[i * 2 + 1] - (i as f32).cos()).abs() < 1e-6);
        assert_eq!(d.obs[i * 4 + 3], i as f32 + 1.5);
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn committed_python_fixtures_load_with_the_right_values() {
    check_python_parquet(&fixture("python_discrete.parquet"));
    check_python_npz(&fixture("python_continuous.npz"));
}

/// Regenerates the fixtures with pyarrow/numpy where they are installed (skipped, with a
/// note, where they are not: the committed files above are then what is checked).
#[test]
fn freshly_written_python_files_load_where_python_is_available() {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import numpy, pyarrow"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("python3 with numpy and pyarrow not found: checked the committed fixtures only");
        return;
    }
    let out = tmp("py");
    std::fs::create_dir_all(&out).unwrap();
    let st = std::process::Command::new("python3")
        .arg(fixture("make_fixtures.py"))
        .env("FIXTURE_OUT", &out)
        .status()
        .unwrap();
    assert!(st.success());
    check_python_parquet(&out.join("python_discrete.parquet"));
    check_python_npz(&out.join("python_continuous.npz"));
}

fn err_of<T: std::fmt::Debug>(r: Result<T, DatasetError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn truncated_and_corrupt_parquet_name_the_file_and_row_group() {
    let (d, spec) = recorded("CartPole-v1", 4, 0.0);
    let p = tmp("good.parquet");
    write_parquet(&p, &d, &spec, 100).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    // Truncated: the footer is gone.
    let cut = tmp("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = err_of(ParquetDataset::open(&cut));
    assert!(e.contains("cut.parquet"), "{e}");
    // Corrupt: the footer is intact, the data pages of the second row group are garbage.
    let ds = ParquetDataset::open(&p).unwrap();
    let bad = tmp("bad.parquet");
    let mut b = bytes.clone();
    let start = ds_group_offset(&p, 1);
    for x in &mut b[start..start + 200] {
        *x ^= 0x5a;
    }
    std::fs::write(&bad, &b).unwrap();
    let ds_bad = ParquetDataset::open(&bad).unwrap();
    ds_bad.read_row_group(0).unwrap();
    let e = err_of(ds_bad.read_row_group(1));
    assert!(
        e.contains("bad.parquet") && e.contains("row group 1"),
        "{e}"
    );
    assert_eq!(ds.read_row_group(1).unwrap(), d.slice(100..200));
    // Not Parquet at all.
    let junk = tmp("junk.parquet");
    std::fs::write(&junk, b"hello").unwrap();
    assert!(err_of(ParquetDataset::open(&junk)).contains("junk.parquet"));
    // Missing file.
    assert!(err_of(ParquetDataset::open(&tmp("none.parquet"))).contains("none.parquet"));
}

/// Byte offset of row group `g`'s first column chunk.
fn ds_group_offset(p: &Path, g: usize) -> usize {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let r = SerializedFileReader::new(std::fs::File::open(p).unwrap()).unwrap();
    let rg = r.metadata().row_group(g);
    let (start, _) = rg.column(0).byte_range();
    start as usize
}

#[test]
fn truncated_npz_and_bad_arrays_name_the_file_and_array() {
    let (d, spec) = recorded("CartPole-v1", 2, 0.0);
    let p = tmp("good.npz");
    write_npz(&p, &d, &spec).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let cut = tmp("cut.npz");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let e = err_of(read_npz(&cut));
    assert!(e.contains("cut.npz"), "{e}");
    // Arrays whose row counts disagree, and a missing array.
    let mut short = d.clone();
    short.rewards.pop();
    short.terminated.pop();
    short.truncated.pop();
    short.eps_id.pop();
    short.t.pop();
    let rows = tmp("rows.npz");
    write_npz_raw(&rows, &short, &spec);
    let e = err_of(read_npz(&rows));
    assert!(e.contains("rows.npz") && e.contains("rews"), "{e}");
}

/// Writes arrays with mismatched row counts (the writer itself would not).
fn write_npz_raw(p: &Path, d: &Transitions, _spec: &DatasetSpec) {
    use ndarray::{ArrayD, IxDyn};
    let f = std::fs::File::create(p).unwrap();
    let mut w = ndarray_npy::NpzWriter::new(f);
    let n_obs = d.obs.len() / 4;
    let obs = ArrayD::from_shape_vec(IxDyn(&[n_obs, 4]), d.obs.clone()).unwrap();
    w.add_array("obs", &obs).unwrap();
    w.add_array("next_obs", &obs).unwrap();
    let acts = ArrayD::from_shape_vec(
        IxDyn(&[n_obs]),
        d.actions.iter().map(|&a| a as i64).collect(),
    )
    .unwrap();
    w.add_array("acts", &acts).unwrap();
    let r = ArrayD::from_shape_vec(IxDyn(&[d.rewards.len()]), d.rewards.clone()).unwrap();
    w.add_array("rews", &r).unwrap();
    w.add_array("dones", &r).unwrap();
    w.finish().unwrap();
}

#[test]
fn data_that_does_not_fit_the_env_names_column_and_shapes() {
    let (d, spec) = recorded("CartPole-v1", 2, 0.0);
    let p = tmp("cp.parquet");
    write_parquet(&p, &d, &spec, DEFAULT_ROWS_PER_GROUP).unwrap();
    let pend = rl_training_envs::make("Pendulum-v1", &Default::default()).unwrap();
    let mut ds = Dataset::open(&p).unwrap();
    let e = err_of(ds.fit("Pendulum-v1", pend.observation_space(), pend.action_space()));
    assert!(
        e.contains("cp.parquet") && e.contains("obs") && e.contains("[4]") && e.contains("[3]"),
        "{e}"
    );
    // Right shapes, wrong action kind: CartPole-shaped observations with Box actions.
    let q = tmp("cp.npz");
    write_npz(&q, &d, &spec).unwrap();
    let mut ds = Dataset::open(&q).unwrap();
    let obs = Space::uniform_box(-1.0, 1.0, &[4]);
    let e = err_of(ds.fit("X", &obs, &Space::uniform_box(-1.0, 1.0, &[1])));
    assert!(
        e.contains("actions") && e.contains("[]") && e.contains("[1]"),
        "{e}"
    );
    // Discrete actions out of the env's range.
    let mut wide = d.clone();
    wide.actions[3] = 5.0;
    let r = tmp("wide.npz");
    write_npz(&r, &wide, &spec).unwrap();
    let cp = rl_training_envs::make("CartPole-v1", &Default::default()).unwrap();
    let mut ds = Dataset::open(&r).unwrap();
    let e = err_of(ds.fit("CartPole-v1", cp.observation_space(), cp.action_space()));
    assert!(e.contains("wide.npz") && e.contains("row 3"), "{e}");
    // Unknown extension.
    assert!(err_of(Dataset::open(&tmp("data.csv"))).contains("data.csv"));
}

#[test]
fn stream_draws_every_row_once_per_pass_with_a_small_window() {
    let (d, spec) = recorded("CartPole-v1", 8, 0.2);
    let p = tmp("stream.parquet");
    write_parquet(&p, &d, &spec, 53).unwrap();
    let returns = discounted_returns(&d, 0.9);
    let ds = Dataset::open(&p).unwrap();
    let mut s = BatchStream::new(ds, 100, Some(0.9), Rng::seed_from(3));
    let n = d.len();
    let mut seen = std::collections::HashMap::new();
    let mut drawn = 0;
    while drawn + 32 <= n {
        let b = s.next_batch(32).unwrap();
        assert!(s.window_rows() <= 100 + 53 + 600, "{}", s.window_rows());
        for k in 0..b.data.len() {
            let key = (b.data.eps_id[k], b.data.t[k]);
            let row = d
                .eps_id
                .iter()
                .zip(&d.t)
                .position(|(&e, &t)| (e, t) == key)
                .unwrap();
            // Returns across row-group boundaries match the whole-episode computation.
            assert!((b.returns[k] - returns[row]).abs() < 1e-4, "{key:?}");
            assert_eq!(b.data.obs[k * 4..k * 4 + 4], d.obs[row * 4..row * 4 + 4]);
            *seen.entry(key).or_insert(0) += 1;
        }
        drawn += 32;
    }
    assert_eq!(s.epochs(), 1);
    assert_eq!(seen.len(), drawn, "a row drawn twice within one pass");
    // Training goes on past the end of the data: a new pass starts.
    for _ in 0..(n / 32 + 2) {
        s.next_batch(32).unwrap();
    }
    assert!(s.epochs() >= 2, "{}", s.epochs());
}

#[test]
fn fast_forward_resumes_the_stream_exactly() {
    let (d, spec) = recorded("CartPole-v1", 5, 0.2);
    let p = tmp("ff.parquet");
    write_parquet(&p, &d, &spec, 41).unwrap();
    let open = || {
        BatchStream::new(
            Dataset::open(&p).unwrap(),
            60,
            Some(0.99),
            Rng::seed_from(9),
        )
    };
    let mut a = open();
    for _ in 0..23 {
        a.next_batch(16).unwrap();
    }
    a.next_batch(5).unwrap();
    let mut b = open();
    b.fast_forward(a.draws()).unwrap();
    for _ in 0..30 {
        let (x, y) = (a.next_batch(16).unwrap(), b.next_batch(16).unwrap());
        assert_eq!(x.data, y.data);
        assert_eq!(x.returns, y.returns);
    }
}

#[test]
fn several_files_read_as_one_dataset_without_joining_episodes_across_files() {
    // Two recordings whose episode ids both start at 0, with row groups that cut episodes.
    let (a, spec) = recorded_seeded("CartPole-v1", 5, 0.0, 11);
    let (b, _) = recorded_seeded("CartPole-v1", 6, 0.5, 12);
    let dir = tmp("multi");
    std::fs::create_dir_all(&dir).unwrap();
    let (pa, pb) = (dir.join("expert.parquet"), dir.join("noisy.parquet"));
    write_parquet(&pa, &a, &spec, 37).unwrap();
    write_parquet(&pb, &b, &spec, 41).unwrap();
    // Every row's return within its own file, keyed by (episode, t, observation bits).
    let key = |d: &Transitions, i: usize| {
        (
            d.eps_id[i],
            d.t[i],
            d.obs[i * 4..i * 4 + 4]
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
        )
    };
    let mut want = std::collections::HashMap::new();
    for d in [&a, &b] {
        let r = discounted_returns(d, 0.9);
        for i in 0..d.len() {
            assert!(
                want.insert(key(d, i), r[i]).is_none(),
                "rows must be distinguishable"
            );
        }
    }
    let ds = Dataset::open_all(&[pa.clone(), pb.clone()]).unwrap();
    assert_eq!(ds.num_rows(), a.len() + b.len());
    assert_eq!(ds.files().len(), 2);
    let n = ds.num_rows();
    let mut s = BatchStream::new(ds, 64, Some(0.9), Rng::seed_from(5));
    let mut seen = std::collections::HashSet::new();
    while seen.len() + 16 <= n {
        let bt = s.next_batch(16).unwrap();
        for k in 0..bt.data.len() {
            let kk = key(&bt.data, k);
            let r = want
                .get(&kk)
                .unwrap_or_else(|| panic!("row {kk:?} is in neither file"));
            // An episode ended by the first file is not continued by the second one's rows.
            assert!(
                (bt.returns[k] - r).abs() < 1e-4,
                "{kk:?}: {} vs {r}",
                bt.returns[k]
            );
            assert!(seen.insert(kk), "a row drawn twice within one pass");
        }
    }
    assert_eq!(s.epochs(), 1);

    // A directory is its data files by name; a glob matches by name; order is kept.
    let d = dir.to_str().unwrap().to_string();
    assert_eq!(
        resolve_inputs(std::slice::from_ref(&d)).unwrap(),
        vec![pa.clone(), pb.clone()]
    );
    let g = format!("{d}/*.parquet");
    assert_eq!(resolve_inputs(&[g]).unwrap(), vec![pa.clone(), pb.clone()]);
    let listed = resolve_inputs(&[pb.display().to_string(), pa.display().to_string()]).unwrap();
    assert_eq!(listed, vec![pb.clone(), pa.clone()]);
    // Names that match nothing, and files that disagree, are errors naming them.
    let none = format!("{d}/nothing_*.npz");
    assert!(err_of(resolve_inputs(std::slice::from_ref(&none))).contains(&none));
    let (p, pspec) = recorded("Pendulum-v1", 1, 0.0);
    let pp = dir.join("pendulum.parquet");
    write_parquet(&pp, &p, &pspec, 100).unwrap();
    let e = err_of(Dataset::open_all(&[pa.clone(), pp.clone()]));
    assert!(
        e.contains("pendulum.parquet") && e.contains("expert.parquet"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_the_fuzzer_found_give_errors_not_panics() {
    // Found by `cargo xtask fuzz` (parquet target): a footer whose column chunk has a negative
    // offset made the parquet crate panic in `byte_range`.
    let p = fixture("fuzz/negative_column_offset.parquet");
    let r = Dataset::open(&p).and_then(|ds| {
        let mut ds = ds;
        let env = rl_training_envs::make("Pendulum-v1", &Default::default()).unwrap();
        ds.fit("Pendulum-v1", env.observation_space(), env.action_space())?;
        ds.read_all()
    });
    let e = err_of(r);
    assert!(e.contains("negative_column_offset.parquet"), "{e}");
}

#[test]
fn a_footer_that_claims_more_rows_than_the_columns_hold_is_an_error() {
    // Found by `cargo xtask fuzz` (parquet target, a 10 s timeout): a 17-row CartPole file whose
    // row group claims 10^9 rows. Streamed by the claim, the few real rows cycled for ~3·10^7
    // batches; the read now checks the claim against the decoded columns.
    let p = fixture("fuzz/row_count_claim.parquet");
    let mut ds = Dataset::open(&p).unwrap();
    assert_eq!(ds.num_rows(), 1_000_000_000, "the footer's claim");
    let env = rl_training_envs::make("CartPole-v1", &Default::default()).unwrap();
    ds.fit("CartPole-v1", env.observation_space(), env.action_space())
        .unwrap();
    let e = err_of(ds.read_all());
    assert!(
        e.contains("row_count_claim.parquet")
            && e.contains("declares 1000000000 rows")
            && e.contains("hold 17"),
        "{e}"
    );
    let mut stream = BatchStream::new(ds, 64, Some(0.99), rl_training_core::Rng::seed_from(0));
    let e = err_of(stream.next_batch(32));
    assert!(e.contains("declares 1000000000 rows"), "{e}");
}
