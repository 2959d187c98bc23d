//! Hyperparameter schedules: constants, SB3's `lin_<v>`, and RLlib's piecewise-linear lists.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A value that may change with training progress.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Always the same.
    Constant(f64),
    /// SB3's `lin_<v>`: `v * progress_remaining` (from `v` at the start to 0 at the end, and 0
    /// past the end, where SB3's would turn negative).
    Linear(f64),
    /// RLlib's `[[t, v], …]`: linear interpolation in env steps, held constant past the ends.
    Piecewise(Vec<(f64, f64)>),
}

impl Schedule {
    /// The value where training stands.
    pub fn at(&self, p: &crate::algorithm::Progress) -> f64 {
        self.value(p.num_timesteps, p.total_timesteps)
    }

    /// The value after `timestep` of `total` env steps.
    pub fn value(&self, timestep: u64, total: u64) -> f64 {
        match self {
            Schedule::Constant(v) => *v,
            Schedule::Linear(v) => {
                // Held at 0 past the end: the last rollout may overshoot `total` (it ends on a
                // multiple of the rollout size), where SB3's `progress_remaining` goes negative
                // and with it the learning rate and clip range of the last update.
                let remaining = (1.0 - timestep as f64 / total.max(1) as f64).max(0.0);
                v * remaining
            }
            Schedule::Piecewise(points) => {
                let t = timestep as f64;
                if t <= points[0].0 {
                    return points[0].1;
                }
                for w in points.windows(2) {
                    let ((t0, v0), (t1, v1)) = (w[0], w[1]);
                    if t < t1 {
                        return v0 + (t - t0) / (t1 - t0) * (v1 - v0);
                    }
                }
                points.last().expect("non-empty").1
            }
        }
    }

    /// The value at the start of training.
    pub fn initial(&self) -> f64 {
        self.value(0, 1)
    }

    /// The smallest and largest values the schedule takes over any run (for range checks).
    pub fn bounds(&self) -> (f64, f64) {
        match self {
            Schedule::Constant(v) => (*v, *v),
            Schedule::Linear(v) => (v.min(0.0), v.max(0.0)),
            Schedule::Piecewise(points) => points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, v)| {
                    (lo.min(v), hi.max(v))
                }),
        }
    }

    /// Parses `0.1`, `"0.1"`, `"lin_0.1"`, `"linear_0.1"` or `[[0, 1.0], [1000, 0.1]]`.
    pub fn parse(v: &serde_json::Value) -> Result<Self, String> {
        match v {
            serde_json::Value::Number(n) => n
                .as_f64()
                .map(Schedule::Constant)
                .ok_or_else(|| format!("{n} is not a number")),
            serde_json::Value::String(s) => {
                let s = s.trim();
                if let Some(rest) = s.strip_prefix("lin_").or_else(|| s.strip_prefix("linear_")) {
                    rest.parse::<f64>()
                        .map(Schedule::Linear)
                        .map_err(|_| format!("{s:?}: expected lin_<number>"))
                } else {
                    s.parse::<f64>().map(Schedule::Constant).map_err(|_| {
                        format!("{s:?}: expected a number, lin_<number> or [[t, v], …]")
                    })
                }
            }
            serde_json::Value::Array(items) => {
                let mut pts = Vec::new();
                for it in items {
                    match it.as_array().map(|p| p.as_slice()) {
                        Some([t, v]) => pts.push((
                            t.as_f64().ok_or("schedule point time must be a number")?,
                            v.as_f64().ok_or("schedule point value must be a number")?,
                        )),
                        _ => return Err(format!("schedule point {it} must be [t, v]")),
                    }
                }
                if pts.is_empty() {
                    return Err("piecewise schedule needs at least one [t, v] point".into());
                }
                if pts.windows(2).any(|w| w[1].0 <= w[0].0) {
                    return Err("piecewise schedule times must increase".into());
                }
                Ok(Schedule::Piecewise(pts))
            }
            other => Err(format!(
                "{other}: expected a number, lin_<number> or [[t, v], …]"
            )),
        }
    }
}

impl Serialize for Schedule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Schedule::Constant(v) => s.serialize_f64(*v),
            Schedule::Linear(v) => s.serialize_str(&format!("lin_{v}")),
            Schedule::Piecewise(p) => {
                let v: Vec<[f64; 2]> = p.iter().map(|&(a, b)| [a, b]).collect();
                v.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Schedule::parse(&v).map_err(serde::de::Error::custom)
    }
}

impl From<f64> for Schedule {
    fn from(v: f64) -> Self {
        Schedule::Constant(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        let l = Schedule::parse(&serde_json::json!("lin_1e-3")).unwrap();
        assert_eq!(l.value(0, 100), 1e-3);
        assert!((l.value(50, 100) - 5e-4).abs() < 1e-12);
        // The last rollout overshoots the budget (100,352 of 100,000): 0, not negative.
        assert_eq!(l.value(100_352, 100_000), 0.0);
        let p = Schedule::parse(&serde_json::json!([[0, 1.0], [100, 0.0], [200, 0.5]])).unwrap();
        assert_eq!(p.value(50, 0), 0.5);
        assert_eq!(p.value(150, 0), 0.25);
        assert_eq!(p.value(1000, 0), 0.5);
        assert_eq!(
            Schedule::parse(&serde_json::json!(0.2)).unwrap(),
            Schedule::Constant(0.2)
        );
        assert_eq!(p.bounds(), (0.0, 1.0));
        assert_eq!(l.bounds(), (0.0, 1e-3));
        assert!(Schedule::parse(&serde_json::json!("fast")).is_err());
        assert!(Schedule::parse(&serde_json::json!([[10, 1.0], [5, 0.0]])).is_err());
        let y: Schedule = serde_saphyr::from_str("lin_0.2").unwrap();
        assert_eq!(y, Schedule::Linear(0.2));
    }
}
