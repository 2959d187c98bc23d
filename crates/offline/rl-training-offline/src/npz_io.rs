//! NPZ datasets as the seed's `expert_data_path`: flat transitions, `N` rows each, in arrays
//! `obs [N, *obs_shape]`, `acts [N, *act_shape]`, `next_obs [N, *obs_shape]`, `rews [N]`,
//! `dones [N]` (terminated), optional `truncated [N]` and `eps_id [N]`. Any numeric dtype
//! reads; integer `acts` are discrete actions. An NPZ file is read whole.

use crate::dataset::{DatasetError, DatasetSpec, Transitions};
use ndarray::{ArrayD, IxDyn};
use ndarray_npy::{NpzReader, NpzWriter, ReadNpyError, ReadNpzError};
use std::fs::File;
use std::path::Path;

/// One array as f32 values with its shape, and whether its dtype was an integer or bool.
struct Loaded {
    values: Vec<f32>,
    shape: Vec<usize>,
    integer: bool,
}

fn wrong_type(e: &ReadNpzError) -> bool {
    matches!(e, ReadNpzError::Npy(ReadNpyError::WrongDescriptor(_)))
}

fn read_array(
    npz: &mut NpzReader<File>,
    name: &str,
    file: &str,
) -> Result<Option<Loaded>, DatasetError> {
    let names = npz.names().map_err(|e| {
        DatasetError::corrupt(file, None, format!("not a readable NPZ archive: {e}"))
    })?;
    if !names.iter().any(|n| n == name) {
        return Ok(None);
    }
    let bad = |e: ReadNpzError| DatasetError::column(file, name, format!("unreadable: {e}"));
    macro_rules! attempt {
        ($t:ty, $integer:expr, $conv:expr) => {
            match npz.by_name::<ndarray::OwnedRepr<$t>, IxDyn>(name) {
                Ok(a) => {
                    let a: ArrayD<$t> = a;
                    let shape = a.shape().to_vec();
                    let values = a.iter().map($conv).collect();
                    return Ok(Some(Loaded {
                        values,
                        shape,
                        integer: $integer,
                    }));
                }
                Err(e) if wrong_type(&e) => {}
                Err(e) => return Err(bad(e)),
            }
        };
    }
    attempt!(f32, false, |&v: &f32| v);
    attempt!(f64, false, |&v: &f64| v as f32);
    attempt!(i64, true, |&v: &i64| v as f32);
    attempt!(i32, true, |&v: &i32| v as f32);
    attempt!(i16, true, |&v: &i16| v as f32);
    attempt!(i8, true, |&v: &i8| v as f32);
    attempt!(u64, true, |&v: &u64| v as f32);
    attempt!(u32, true, |&v: &u32| v as f32);
    attempt!(u16, true, |&v: &u16| v as f32);
    attempt!(u8, true, |&v: &u8| v as f32);
    attempt!(bool, true, |&v: &bool| v as u8 as f32);
    Err(DatasetError::column(
        file,
        name,
        "dtype is not a real, integer or bool type",
    ))
}

/// Reads an NPZ dataset: its rows and the spec its arrays' shapes and dtypes declare (no
/// spaces: NPZ files do not record them).
pub fn read_npz(path: &Path) -> Result<(Transitions, DatasetSpec), DatasetError> {
    let file = path.display().to_string();
    let f = File::open(path).map_err(|e| DatasetError::io(&file, e))?;
    let mut npz = NpzReader::new(f).map_err(|e| {
        DatasetError::corrupt(&file, None, format!("not a readable NPZ archive: {e}"))
    })?;
    let mut required = |name: &str| -> Result<Loaded, DatasetError> {
        read_array(&mut npz, name, &file)?.ok_or_else(|| {
            DatasetError::column(
                &file,
                name,
                "missing (an NPZ dataset has obs, acts, next_obs, dones and usually rews)",
            )
        })
    };
    let obs = required("obs")?;
    let acts = required("acts")?;
    let next_obs = required("next_obs")?;
    let dones = required("dones")?;
    let rews = read_array(&mut npz, "rews", &file)?;
    let truncated = read_array(&mut npz, "truncated", &file)?;
    let eps_id = read_array(&mut npz, "eps_id", &file)?;
    let n = obs.shape.first().copied().unwrap_or(0);
    let check_rows = |name: &str, a: &Loaded, trailing: Option<&[usize]>| {
        if a.shape.first().copied() != Some(n) {
            return Err(DatasetError::column(
                &file,
                name,
                format!("shape {:?}: {n} rows expected (as obs)", a.shape),
            ));
        }
        if let Some(t) = trailing
            && a.shape[1..] != *t
        {
            return Err(DatasetError::Shape {
                file: file.clone(),
                column: name.to_string(),
                found: a.shape[1..].to_vec(),
                expected: t.to_vec(),
                what: "obs array".into(),
            });
        }
        Ok(())
    };
    let obs_shape = obs.shape.get(1..).unwrap_or_default().to_vec();
    check_rows("acts", &acts, None)?;
    check_rows("next_obs", &next_obs, Some(&obs_shape))?;
    if let Some(r) = &rews {
        check_rows("rews", r, Some(&[]))?;
    }
    check_rows("dones", &dones, Some(&[]))?;
    if let Some(t) = &truncated {
        check_rows("truncated", t, Some(&[]))?;
    }
    if let Some(e) = &eps_id {
        check_rows("eps_id", e, Some(&[]))?;
    }
    let spec = DatasetSpec {
        obs_shape: obs_shape.clone(),
        act_shape: acts.shape[1..].to_vec(),
        discrete_actions: acts.integer,
        observation_space: None,
        action_space: None,
        has_rewards: rews.is_some(),
    };
    let mut d = Transitions::new(spec.obs_dim(), spec.act_dim());
    d.obs = obs.values;
    d.actions = acts.values;
    d.new_obs = next_obs.values;
    d.rewards = rews.map_or_else(|| vec![0.0; n], |r| r.values);
    d.terminated = dones.values.iter().map(|&v| v != 0.0).collect();
    d.truncated = match truncated {
        Some(t) => t.values.iter().map(|&v| v != 0.0).collect(),
        None => vec![false; n],
    };
    // Without eps_id, episodes are the runs between ends.
    d.eps_id = match eps_id {
        Some(e) => e.values.iter().map(|&v| v as i64).collect(),
        None => {
            let mut id = 0;
            (0..n)
                .map(|i| {
                    let this = id;
                    if d.terminated[i] || d.truncated[i] {
                        id += 1;
                    }
                    this
                })
                .collect()
        }
    };
    d.t = Vec::with_capacity(n);
    for i in 0..n {
        let t = if i > 0
            && d.eps_id[i] == d.eps_id[i - 1]
            && !d.terminated[i - 1]
            && !d.truncated[i - 1]
        {
            d.t[i - 1] + 1
        } else {
            0
        };
        d.t.push(t);
    }
    d.check_values(&file, None)?;
    Ok((d, spec))
}

/// Writes `data` as an NPZ dataset (uncompressed, as `numpy.savez`) through a temporary file
/// renamed into place. Discrete actions are stored as int64, everything else as float32
/// (flags as bool).
pub fn write_npz(path: &Path, data: &Transitions, spec: &DatasetSpec) -> Result<(), DatasetError> {
    let file = path.display().to_string();
    let tmp = path.with_extension("npz.tmp");
    let n = data.len();
    let shaped = |v: &[f32], per_row: &[usize]| {
        let mut s = vec![n];
        s.extend_from_slice(per_row);
        ArrayD::from_shape_vec(IxDyn(&s), v.to_vec()).expect("widths match the spec")
    };
    let err = |e: ndarray_npy::WriteNpzError| DatasetError::corrupt(&file, None, e.to_string());
    let result = (|| {
        let f = File::create(&tmp).map_err(|e| DatasetError::io(&file, e))?;
        let mut w = NpzWriter::new(f);
        w.add_array("obs", &shaped(&data.obs, &spec.obs_shape))
            .map_err(err)?;
        if spec.discrete_actions {
            let a: Vec<i64> = data.actions.iter().map(|&v| v as i64).collect();
            let mut s = vec![n];
            s.extend_from_slice(&spec.act_shape);
            let a = ArrayD::from_shape_vec(IxDyn(&s), a).expect("widths match the spec");
            w.add_array("acts", &a).map_err(err)?;
        } else {
            w.add_array("acts", &shaped(&data.actions, &spec.act_shape))
                .map_err(err)?;
        }
        w.add_array("next_obs", &shaped(&data.new_obs, &spec.obs_shape))
            .map_err(err)?;
        if spec.has_rewards {
            w.add_array("rews", &shaped(&data.rewards, &[]))
                .map_err(err)?;
        }
        let flags = |v: &[bool]| ArrayD::from_shape_vec(IxDyn(&[n]), v.to_vec()).expect("n rows");
        w.add_array("dones", &flags(&data.terminated))
            .map_err(err)?;
        w.add_array("truncated", &flags(&data.truncated))
            .map_err(err)?;
        let ids = ArrayD::from_shape_vec(IxDyn(&[n]), data.eps_id.clone()).expect("n rows");
        w.add_array("eps_id", &ids).map_err(err)?;
        let f = w.finish().map_err(err)?;
        f.sync_all().map_err(|e| DatasetError::io(&file, e))?;
        std::fs::rename(&tmp, path).map_err(|e| DatasetError::io(&file, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
