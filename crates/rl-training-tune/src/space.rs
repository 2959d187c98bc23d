//! Search spaces inside an ordinary run YAML (Ray Tune's forms), and the trial configs they
//! expand to.
//!
//! Anywhere a value can stand, a one-key table names a domain:
//! `{grid_search: [a, b]}`, `{choice: [...]}`, `{uniform: [lo, hi]}`, `{loguniform: [lo, hi]}`,
//! `{randint: [lo, hi]}` (integers, `hi` excluded, as Tune's) and `{quniform: [lo, hi, q]}`
//! (a uniform draw rounded to a multiple of `q`). Grids combine as a cartesian product (axes in
//! the order of their dotted paths, the last varying fastest) and every grid point is repeated
//! `num_samples` times, each repeat with fresh draws of the other domains.

use rl_training_core::Rng;
use rl_training_core::config::ConfigError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The keys that make a one-key table a domain.
pub const DOMAIN_KEYS: [&str; 6] = [
    "grid_search",
    "choice",
    "uniform",
    "loguniform",
    "randint",
    "quniform",
];

/// One dimension of a search space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Domain {
    /// Every value, in order (a grid axis).
    Grid(Vec<Value>),
    /// One of the values, uniformly.
    Choice(Vec<Value>),
    /// A float uniform in `[lo, hi)`.
    Uniform {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// A float whose logarithm is uniform in `[ln lo, ln hi)`.
    LogUniform {
        /// Lower bound (above 0).
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// An integer in `lo..hi` (`hi` excluded).
    RandInt {
        /// Lowest value.
        lo: i64,
        /// One past the highest value.
        hi: i64,
    },
    /// A uniform draw in `[lo, hi]` rounded to a multiple of `q`.
    QUniform {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
        /// Quantum.
        q: f64,
    },
}

impl Domain {
    /// Parses the domain `key: arg` found at `path`.
    pub(crate) fn parse(key: &str, arg: &Value, path: &str) -> Result<Domain, ConfigError> {
        let err = |m: String| Err(ConfigError::new(path, m));
        let list = |what: &str| -> Result<Vec<Value>, ConfigError> {
            match arg.as_array() {
                Some(v) if !v.is_empty() => Ok(v.clone()),
                Some(_) => Err(ConfigError::new(path, format!("{key}: {what} is empty"))),
                None => Err(ConfigError::new(
                    path,
                    format!("{key}: expected a list of {what}, got {arg}"),
                )),
            }
        };
        let numbers = |n: usize| -> Result<Vec<f64>, ConfigError> {
            let v = arg.as_array().filter(|v| v.len() == n);
            let nums: Option<Vec<f64>> =
                v.and_then(|v| v.iter().map(Value::as_f64).collect::<Option<_>>());
            nums.filter(|v| v.iter().all(|x| x.is_finite()))
                .ok_or_else(|| {
                    let form = if n == 2 { "[lo, hi]" } else { "[lo, hi, q]" };
                    ConfigError::new(
                        path,
                        format!("{key}: expected {form} (finite numbers), got {arg}"),
                    )
                })
        };
        match key {
            "grid_search" => Ok(Domain::Grid(list("values")?)),
            "choice" => Ok(Domain::Choice(list("values")?)),
            "uniform" | "loguniform" => {
                let b = numbers(2)?;
                let (lo, hi) = (b[0], b[1]);
                if lo > hi {
                    return err(format!("{key}: lo {lo} > hi {hi}"));
                }
                if key == "uniform" {
                    Ok(Domain::Uniform { lo, hi })
                } else if lo <= 0.0 {
                    err(format!("loguniform: lo must be above 0, got {lo}"))
                } else {
                    Ok(Domain::LogUniform { lo, hi })
                }
            }
            "randint" => {
                let b = numbers(2)?;
                if b.iter().any(|x| x.fract() != 0.0) {
                    return err(format!("randint: expected integers [lo, hi], got {arg}"));
                }
                let (lo, hi) = (b[0] as i64, b[1] as i64);
                if lo >= hi {
                    return err(format!(
                        "randint: lo {lo} must be below hi {hi} (hi is excluded)"
                    ));
                }
                Ok(Domain::RandInt { lo, hi })
            }
            "quniform" => {
                let b = numbers(3)?;
                let (lo, hi, q) = (b[0], b[1], b[2]);
                if lo > hi {
                    return err(format!("quniform: lo {lo} > hi {hi}"));
                }
                if !(q > 0.0) {
                    return err(format!("quniform: q must be above 0, got {q}"));
                }
                Ok(Domain::QUniform { lo, hi, q })
            }
            other => err(format!(
                "unknown search space {other:?}; one of {DOMAIN_KEYS:?}"
            )),
        }
    }

    /// A draw (not for a grid axis, which is enumerated).
    pub fn sample(&self, rng: &mut Rng) -> Value {
        match self {
            Domain::Grid(v) | Domain::Choice(v) => v[rng.below(v.len() as u64) as usize].clone(),
            Domain::Uniform { lo, hi } => float(rng.uniform_range(*lo, *hi)),
            Domain::LogUniform { lo, hi } => float(rng.uniform_range(lo.ln(), hi.ln()).exp()),
            Domain::RandInt { lo, hi } => Value::from(lo + rng.below((hi - lo) as u64) as i64),
            Domain::QUniform { lo, hi, q } => {
                let x = (rng.uniform_range(*lo, *hi) / q).round() * q;
                // Integral bounds and quantum give integers (`n_steps`, `batch_size`).
                if [*lo, *hi, *q].iter().all(|v| v.fract() == 0.0) {
                    Value::from(x as i64)
                } else {
                    float(x)
                }
            }
        }
    }
}

fn float(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// One dimension: where it stands in the config and its domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dimension {
    /// Dotted path (`algo_kwargs.learning_rate`; list items as `net_arch.0`).
    pub path: String,
    /// The domain.
    pub domain: Domain,
}

/// A run config with its search space taken out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSpace {
    /// The config, each domain replaced by `null`.
    pub base: Value,
    /// The domains, in the order they appear.
    pub dims: Vec<Dimension>,
}

impl SearchSpace {
    /// Finds the domains in a config tree (the `tune:` section already removed).
    pub fn parse(config: &Value) -> Result<SearchSpace, ConfigError> {
        let mut dims = Vec::new();
        let mut base = config.clone();
        walk(&mut base, "", &mut dims)?;
        Ok(SearchSpace { base, dims })
    }

    /// Grid points: the cartesian product of the grid axes (the last axis varies fastest); one
    /// empty point when there is no grid.
    pub fn grid(&self) -> Vec<Vec<(usize, Value)>> {
        let mut points: Vec<Vec<(usize, Value)>> = vec![Vec::new()];
        for (i, d) in self.dims.iter().enumerate() {
            if let Domain::Grid(values) = &d.domain {
                points = points
                    .into_iter()
                    .flat_map(|p| {
                        values.iter().map(move |v| {
                            let mut q = p.clone();
                            q.push((i, v.clone()));
                            q
                        })
                    })
                    .collect();
            }
        }
        points
    }

    /// Trials in Tune's order: `num_samples` passes over the grid, the other domains drawn
    /// from `rng` for each trial. Each trial is `(its config, its parameters by path)`.
    pub fn variants(&self, num_samples: usize, rng: &mut Rng) -> Vec<Variant> {
        let grid = self.grid();
        let mut out = Vec::with_capacity(num_samples * grid.len());
        for _ in 0..num_samples {
            for point in &grid {
                let mut values: Vec<Option<Value>> = vec![None; self.dims.len()];
                for (i, v) in point {
                    values[*i] = Some(v.clone());
                }
                let params: Vec<(String, Value)> = self
                    .dims
                    .iter()
                    .zip(values)
                    .map(|(d, v)| (d.path.clone(), v.unwrap_or_else(|| d.domain.sample(rng))))
                    .collect();
                out.push(self.with(&params));
            }
        }
        out
    }

    /// The config with `params` put at their paths.
    pub fn with(&self, params: &[(String, Value)]) -> Variant {
        let mut config = self.base.clone();
        for (path, v) in params {
            if let Some(slot) = config.pointer_mut(&json_pointer(path)) {
                *slot = v.clone();
            }
        }
        Variant {
            config,
            params: params.to_vec(),
        }
    }
}

/// One trial's config and the values its search space gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    /// The run config.
    pub config: Value,
    /// `(path, value)` for every dimension.
    pub params: Vec<(String, Value)>,
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn walk(v: &mut Value, path: &str, dims: &mut Vec<Dimension>) -> Result<(), ConfigError> {
    match v {
        Value::Object(map) => {
            if let Some(key) = map
                .keys()
                .find(|k| DOMAIN_KEYS.contains(&k.as_str()))
                .cloned()
            {
                if map.len() != 1 {
                    let others: Vec<&String> = map.keys().filter(|k| **k != key).collect();
                    return Err(ConfigError::new(
                        path,
                        format!(
                            "a search space is a table of one key ({key}), found also {others:?}"
                        ),
                    ));
                }
                let domain = Domain::parse(&key, &map[&key], path)?;
                dims.push(Dimension {
                    path: path.to_string(),
                    domain,
                });
                *v = Value::Null;
                return Ok(());
            }
            for (k, child) in map.iter_mut() {
                walk(child, &join(path, k), dims)?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                walk(child, &join(path, &i.to_string()), dims)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A dotted path (`algo_kwargs.lr`, list items by index) as a JSON pointer (`/algo_kwargs/lr`).
fn json_pointer(path: &str) -> String {
    path.split('.')
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The value at a dotted path.
pub fn pointer<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    v.pointer(&json_pointer(path))
}

/// A compact `k=v` rendering of a trial's parameters (the last path part as the name, floats
/// to 4 significant digits).
pub fn describe(params: &[(String, Value)]) -> String {
    params
        .iter()
        .map(|(p, v)| format!("{}={}", p.rsplit('.').next().unwrap_or(p), short(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value for the live table: floats to 4 significant digits, the rest as JSON.
fn short(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if v.is_f64() && x != 0.0 && !(1e-3..1e4).contains(&x.abs()) => format!("{x:.3e}"),
        Some(x) if v.is_f64() => {
            let s = format!("{x:.4}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        _ => v.to_string(),
    }
}

/// Sets the value at a dotted path: in place where it exists (list items too), else creating
/// tables on the way.
pub fn set_path(root: &mut Value, path: &str, v: Value) {
    if let Some(slot) = root.pointer_mut(&json_pointer(path)) {
        *slot = v;
        return;
    }
    let mut cur = root;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut().expect("a table");
        if parts.peek().is_none() {
            map.insert(p.to_string(), v);
            return;
        }
        cur = map
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn space(v: Value) -> SearchSpace {
        SearchSpace::parse(&v).unwrap()
    }

    #[test]
    fn grids_multiply_and_samples_repeat_them() {
        let s = space(json!({
            "algorithm": "ppo",
            "seed": {"grid_search": [0, 1, 2]},
            "algo_kwargs": {"learning_rate": {"grid_search": [1e-3, 1e-4]},
                            "ent_coef": {"uniform": [0.0, 0.1]}}
        }));
        assert_eq!(s.dims.len(), 3);
        let mut rng = Rng::seed_from(0);
        let v = s.variants(2, &mut rng);
        assert_eq!(v.len(), 2 * 3 * 2);
        // Tune's order: the grid, then the grid again. Axes come in the order of their paths
        // (`algo_kwargs.learning_rate` before `seed`); the last axis varies fastest.
        let key = |x: &Variant| {
            let c = &x.config;
            (c["algo_kwargs"]["learning_rate"].clone(), c["seed"].clone())
        };
        assert_eq!(key(&v[0]), (json!(1e-3), json!(0)));
        assert_eq!(key(&v[1]), (json!(1e-3), json!(1)));
        assert_eq!(key(&v[3]), (json!(1e-4), json!(0)));
        assert_eq!(key(&v[6]), key(&v[0]));
        // Every trial draws its own ent_coef.
        let draws: Vec<f64> = v
            .iter()
            .map(|x| x.config["algo_kwargs"]["ent_coef"].as_f64().unwrap())
            .collect();
        assert!(draws.iter().all(|x| (0.0..0.1).contains(x)));
        assert!(draws.windows(2).all(|w| w[0] != w[1]));
        let paths: Vec<&str> = v[0].params.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(
            paths,
            ["algo_kwargs.ent_coef", "algo_kwargs.learning_rate", "seed"]
        );
        assert_eq!(v[0].config["algorithm"], json!("ppo"));
        // No domain at all: one trial per sample.
        assert_eq!(space(json!({"seed": 1})).variants(3, &mut rng).len(), 3);
    }

    #[test]
    fn samplers_follow_their_distributions() {
        let mut rng = Rng::seed_from(7);
        let n = 20_000;
        let draw = |d: &Domain, rng: &mut Rng| -> Vec<f64> {
            (0..n).map(|_| d.sample(rng).as_f64().unwrap()).collect()
        };
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        // uniform [2, 6): mean 4, sd 4/√12; the standard error of the mean is ≈ 0.008.
        let u = draw(&Domain::Uniform { lo: 2.0, hi: 6.0 }, &mut rng);
        assert!(u.iter().all(|x| (2.0..6.0).contains(x)));
        assert!((mean(&u) - 4.0).abs() < 0.04, "{}", mean(&u));
        // loguniform [1e-4, 1e-1): log10 uniform on [-4, -1), each decade ≈ 1/3.
        let l = draw(&Domain::LogUniform { lo: 1e-4, hi: 1e-1 }, &mut rng);
        let logs: Vec<f64> = l.iter().map(|x| x.log10()).collect();
        assert!((mean(&logs) + 2.5).abs() < 0.03, "{}", mean(&logs));
        let below_1e3 = l.iter().filter(|&&x| x < 1e-3).count() as f64 / n as f64;
        assert!((below_1e3 - 1.0 / 3.0).abs() < 0.02, "{below_1e3}");
        // randint [3, 7): 3, 4, 5, 6 equally often (χ² with 3 dof below 16.3, p = 0.001).
        let r = draw(&Domain::RandInt { lo: 3, hi: 7 }, &mut rng);
        let mut counts = [0f64; 4];
        for x in &r {
            counts[(*x as usize) - 3] += 1.0;
        }
        let e = n as f64 / 4.0;
        let chi2: f64 = counts.iter().map(|c| (c - e) * (c - e) / e).sum();
        assert!(chi2 < 16.3, "{counts:?}");
        // quniform [0, 100, 25]: multiples of 25; the ends take half a bin each.
        let q = draw(
            &Domain::QUniform {
                lo: 0.0,
                hi: 100.0,
                q: 25.0,
            },
            &mut rng,
        );
        assert!(q.iter().all(|x| [0.0, 25.0, 50.0, 75.0, 100.0].contains(x)));
        let zeros = q.iter().filter(|&&x| x == 0.0).count() as f64 / n as f64;
        assert!((zeros - 0.125).abs() < 0.015, "{zeros}");
        assert!(
            Domain::QUniform {
                lo: 0.0,
                hi: 100.0,
                q: 25.0
            }
            .sample(&mut rng)
            .is_i64()
        );
        // choice: each value about a third of the time.
        let c = Domain::Choice(vec![json!("a"), json!("b"), json!("c")]);
        let a = (0..n).filter(|_| c.sample(&mut rng) == json!("a")).count() as f64 / n as f64;
        assert!((a - 1.0 / 3.0).abs() < 0.02, "{a}");
    }

    #[test]
    fn bad_spaces_name_their_path() {
        for (v, path, words) in [
            (
                json!({"algo_kwargs": {"lr": {"grid_search": []}}}),
                "algo_kwargs.lr",
                "empty",
            ),
            (json!({"a": {"uniform": [2, 1]}}), "a", "lo 2 > hi 1"),
            (json!({"a": {"loguniform": [0, 1]}}), "a", "above 0"),
            (json!({"a": {"randint": [1, 1]}}), "a", "below hi"),
            (json!({"a": {"randint": [1.5, 3]}}), "a", "integers"),
            (json!({"a": {"quniform": [0, 1]}}), "a", "[lo, hi, q]"),
            (json!({"a": {"uniform": "wide"}}), "a", "[lo, hi]"),
            (json!({"a": [1, {"choice": 3}]}), "a.1", "list"),
            (json!({"a": {"choice": [1], "b": 2}}), "a", "one key"),
        ] {
            let e = SearchSpace::parse(&v).unwrap_err();
            assert_eq!(e.field, path, "{v}: {e}");
            assert!(e.message.contains(words), "{v}: {e}");
        }
    }

    #[test]
    fn descriptions_are_short() {
        let p = |k: &str, v: Value| (k.to_string(), v);
        let d = describe(&[
            p("algo_kwargs.learning_rate", json!(0.00006368135493137322)),
            p("algo_kwargs.clip_range", json!(0.2)),
            p("seed", json!(3)),
            p("algo_kwargs.learning_rate", json!("lin_1e-3")),
        ]);
        assert_eq!(
            d,
            "learning_rate=6.368e-5 clip_range=0.2 seed=3 learning_rate=\"lin_1e-3\""
        );
    }

    #[test]
    fn paths_reach_into_lists() {
        let s = space(json!({"policy_kwargs": {"net_arch": [{"choice": [32, 64]}, 64]}}));
        assert_eq!(s.dims[0].path, "policy_kwargs.net_arch.0");
        let v = s.variants(1, &mut Rng::seed_from(1));
        let first = v[0].config["policy_kwargs"]["net_arch"][0].clone();
        assert!(first == json!(32) || first == json!(64));
        assert_eq!(
            pointer(&v[0].config, "policy_kwargs.net_arch.1"),
            Some(&json!(64))
        );
    }
}
