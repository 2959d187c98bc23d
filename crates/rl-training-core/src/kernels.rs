//! Which CPU kernels flex runs: the x86 level of its matrix products (gemm) and vector loops
//! (macerator). Both pick the widest level the CPU has at run time, so two CPUs give two
//! trajectories (sums are split over different lane counts). Pinning the level makes one
//! machine run the kernels of another: `RL_KERNELS=avx2` (or the run config's `kernels: avx2`)
//! on an AVX-512 CPU runs the same kernels as a CPU without AVX-512.
//!
//! The switch lives in the two crates (patched in `vendor/`, see its README); it is read on every
//! dispatch, so a pin holds from the next tensor operation on. A build without those patches (a
//! crate from crates.io: patches do not travel with it) has no switch ([`SWITCH`] is false):
//! there `auto`, and a level equal to the one the CPU runs anyway, are accepted, and any other
//! level is an error ([`KernelError::NoSwitch`]), never silently ignored. Results are bit-identical for one
//! level on CPUs with the same cache sizes (gemm blocks the inner dimension by the L1/L2 size,
//! which only matters above a few hundred); the optimizer loops (`optim.rs`) give the same bits
//! at every level.

use serde::{Deserialize, Serialize};

/// The environment variable that pins the level for a whole process.
pub const ENV_VAR: &str = "RL_KERNELS";

/// Whether this build can pin the level: flex with the workspace's patched `macerator` and
/// `gemm-common` (found by the build script).
pub const SWITCH: bool = cfg!(all(feature = "flex", kernel_switch));

/// A kernel level to pin (or `auto`: the best the CPU has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelLevel {
    /// The widest level the CPU has (AVX-512 where there is one).
    #[default]
    Auto,
    /// x86-64-v3: AVX2 and FMA.
    Avx2,
    /// x86-64-v4: AVX-512 (F, BW, CD, DQ, VL).
    Avx512,
}

impl KernelLevel {
    /// The name used in configs and `RL_KERNELS`.
    pub fn name(self) -> &'static str {
        match self {
            KernelLevel::Auto => "auto",
            KernelLevel::Avx2 => "avx2",
            KernelLevel::Avx512 => "avx512",
        }
    }

    /// Parses `auto`, `avx2` or `avx512`; `source` names where the value came from.
    pub fn parse(source: &str, value: &str) -> Result<Self, KernelError> {
        match value.trim() {
            "" | "auto" => Ok(KernelLevel::Auto),
            "avx2" => Ok(KernelLevel::Avx2),
            "avx512" => Ok(KernelLevel::Avx512),
            other => Err(KernelError::Unknown {
                source_name: source.to_string(),
                value: other.to_string(),
            }),
        }
    }

    /// The x86-64 level the patched crates cap at (`None`: no cap).
    #[cfg_attr(not(kernel_switch), allow(dead_code))]
    fn cap(self) -> Option<u8> {
        match self {
            KernelLevel::Auto => None,
            KernelLevel::Avx2 => Some(3),
            KernelLevel::Avx512 => Some(4),
        }
    }
}

impl std::fmt::Display for KernelLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A kernel level that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// Not one of the levels.
    #[error("{source_name}: {value:?} is not a kernel level; expected auto, avx2 or avx512")]
    Unknown {
        /// `RL_KERNELS` or the config key `kernels`.
        source_name: String,
        /// What it said.
        value: String,
    },
    /// This build has no switch (see [`SWITCH`]) and the CPU's own level is another.
    #[error(
        "{source_name}: {level} kernels cannot be pinned in this build, which runs the CPU's \
         best level ({runs}): its macerator and gemm-common lack rl-training's level switch \
         (the workspace's [patch.crates-io], vendor/README.md); use `auto` or {runs}, or build \
         with those patches"
    )]
    NoSwitch {
        /// `RL_KERNELS` or the config key `kernels`.
        source_name: String,
        /// The level asked for.
        level: KernelLevel,
        /// The level the kernels run at.
        runs: KernelLevel,
    },
    /// The CPU cannot run it.
    #[error("{source_name}: {level} kernels need a CPU with {needs}, which this one lacks")]
    Unsupported {
        /// `RL_KERNELS` or the config key `kernels`.
        source_name: String,
        /// The level asked for.
        level: KernelLevel,
        /// The CPU features it needs.
        needs: &'static str,
    },
}

/// Whether this CPU can run `level`.
pub fn cpu_supports(level: KernelLevel) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match level {
            KernelLevel::Auto => true,
            KernelLevel::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            KernelLevel::Avx512 => {
                cpu_supports(KernelLevel::Avx2)
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512cd")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        level == KernelLevel::Auto
    }
}

fn needs(level: KernelLevel) -> &'static str {
    match level {
        KernelLevel::Auto => "nothing",
        KernelLevel::Avx2 => "AVX2 and FMA",
        KernelLevel::Avx512 => "AVX-512 (F, BW, CD, DQ, VL)",
    }
}

/// The level `RL_KERNELS` asks for (`auto` when it is unset).
pub fn from_env() -> Result<KernelLevel, KernelError> {
    match std::env::var(ENV_VAR) {
        Ok(v) => KernelLevel::parse(ENV_VAR, &v),
        Err(std::env::VarError::NotPresent) => Ok(KernelLevel::Auto),
        Err(std::env::VarError::NotUnicode(v)) => Err(KernelError::Unknown {
            source_name: ENV_VAR.to_string(),
            value: v.to_string_lossy().into_owned(),
        }),
    }
}

/// Pins the level from the next tensor operation on (`auto` lifts the pin); `source` names
/// where the level came from, for the error.
pub fn pin(source: &str, level: KernelLevel) -> Result<(), KernelError> {
    if !cpu_supports(level) {
        return Err(KernelError::Unsupported {
            source_name: source.to_string(),
            level,
            needs: needs(level),
        });
    }
    #[cfg(all(feature = "flex", kernel_switch))]
    {
        macerator::set_x86_level_cap(level.cap());
        gemm_common::set_x86_level_cap(level.cap());
        Ok(())
    }
    #[cfg(not(all(feature = "flex", kernel_switch)))]
    {
        without_switch(source, level, cpu_best())
    }
}

/// A pin in a build without the switch: nothing to do for `auto` or the level the kernels pick
/// anyway (`runs`); any other level cannot be honoured, and says so.
#[cfg_attr(all(feature = "flex", kernel_switch), allow(dead_code))]
fn without_switch(source: &str, level: KernelLevel, runs: KernelLevel) -> Result<(), KernelError> {
    if level == KernelLevel::Auto || level == runs {
        Ok(())
    } else {
        Err(KernelError::NoSwitch {
            source_name: source.to_string(),
            level,
            runs,
        })
    }
}

/// The widest level this CPU runs: what the kernels pick without a pin (`auto` off x86-64).
pub fn cpu_best() -> KernelLevel {
    [KernelLevel::Avx512, KernelLevel::Avx2]
        .into_iter()
        .find(|l| cpu_supports(*l))
        .unwrap_or(KernelLevel::Auto)
}

/// Applies a run config's `kernels` key: a level other than `auto` is pinned; `auto` leaves the
/// choice to `RL_KERNELS` (checked here, so a bad value is named) and then to the CPU. Returns
/// the level in force.
pub fn apply(config: KernelLevel) -> Result<KernelLevel, KernelError> {
    let (source, level) = match config {
        KernelLevel::Auto => (ENV_VAR, from_env()?),
        level => ("kernels", level),
    };
    pin(source, level)?;
    Ok(level)
}

/// The level the kernels run at now: the pin if there is one, else the CPU's best
/// (`auto` on CPUs that are neither, and without flex).
pub fn active() -> KernelLevel {
    #[cfg(all(feature = "flex", kernel_switch))]
    {
        // The widest level under the cap that the CPU runs (the caps of `cap()`, not a copy).
        let cap = macerator::x86_level_cap().unwrap_or(u8::MAX);
        [KernelLevel::Avx512, KernelLevel::Avx2]
            .into_iter()
            .find(|l| l.cap().is_some_and(|c| c <= cap) && cpu_supports(*l))
            .unwrap_or(KernelLevel::Auto)
    }
    #[cfg(all(feature = "flex", not(kernel_switch)))]
    {
        cpu_best()
    }
    #[cfg(not(feature = "flex"))]
    {
        KernelLevel::Auto
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_bad_ones_are_named() {
        for l in [KernelLevel::Auto, KernelLevel::Avx2, KernelLevel::Avx512] {
            assert_eq!(KernelLevel::parse("kernels", l.name()), Ok(l));
        }
        let e = KernelLevel::parse(ENV_VAR, "avx1024").unwrap_err();
        assert_eq!(
            e.to_string(),
            "RL_KERNELS: \"avx1024\" is not a kernel level; expected auto, avx2 or avx512"
        );
        let l: KernelLevel = serde_json::from_str("\"avx2\"").unwrap();
        assert_eq!(l, KernelLevel::Avx2);
        assert!(serde_json::from_str::<KernelLevel>("\"sse\"").is_err());
    }

    #[test]
    fn without_the_switch_only_the_level_the_cpu_runs_is_accepted() {
        use KernelLevel::*;
        assert_eq!(without_switch(ENV_VAR, Auto, Avx512), Ok(()));
        assert_eq!(without_switch(ENV_VAR, Avx512, Avx512), Ok(()));
        assert_eq!(without_switch(ENV_VAR, Avx2, Avx2), Ok(()));
        let e = without_switch(ENV_VAR, Avx2, Avx512).unwrap_err();
        assert_eq!(
            e,
            KernelError::NoSwitch {
                source_name: ENV_VAR.into(),
                level: Avx2,
                runs: Avx512
            }
        );
        let text = e.to_string();
        assert!(
            text.starts_with("RL_KERNELS: avx2 kernels cannot be pinned in this build"),
            "{text}"
        );
        assert!(text.contains("use `auto` or avx512"), "{text}");
    }

    #[test]
    fn this_workspace_builds_the_switch() {
        // The workspace patches both crates (`vendor/`); a build that lost the patches must
        // not pass unnoticed.
        assert_eq!(SWITCH, cfg!(feature = "flex"));
    }
}
