//! The kernel-level switch (`rl_training_core::kernels`): a pin changes which kernels flex runs, each
//! level repeats its own bits, and `RL_KERNELS` in a fresh process pins like the API does.
//! Its own test binary: a pin is process-wide.
#![cfg(feature = "flex")]

use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::kernels::{self, KernelError, KernelLevel};

/// A sum over many values of mixed magnitudes (the reduction's lane count sets its order) and a
/// matrix product with a long inner dimension: their bits, as hex.
fn fingerprint() -> String {
    let device = Device::flex();
    let n = 20_011;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * (1.0 + (i % 97) as f32 * 13.0))
        .collect();
    let t = Tensor::<1>::from_data(TensorData::new(x.clone(), [n]), &device);
    let sum: Vec<f32> = t.sum().into_data().try_into_vec::<f32>().unwrap();
    let a = Tensor::<2>::from_data(TensorData::new(x[..64 * 300].to_vec(), [64, 300]), &device);
    let b = Tensor::<2>::from_data(
        TensorData::new(x[n - 300 * 33..].to_vec(), [300, 33]),
        &device,
    );
    let prod: Vec<f32> = a.matmul(b).into_data().try_into_vec::<f32>().unwrap();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for v in prod {
        h = (h ^ v.to_bits() as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x} {h:016x}", sum[0].to_bits())
}

#[test]
fn a_pin_changes_the_kernels_and_each_level_repeats_its_bits() {
    kernels::pin("test", KernelLevel::Avx2).unwrap();
    assert_eq!(kernels::active(), KernelLevel::Avx2);
    let avx2 = fingerprint();
    assert_eq!(fingerprint(), avx2, "the AVX2 kernels are deterministic");

    if kernels::cpu_supports(KernelLevel::Avx512) {
        kernels::pin("test", KernelLevel::Avx512).unwrap();
        assert_eq!(kernels::active(), KernelLevel::Avx512);
        let avx512 = fingerprint();
        assert_ne!(avx512, avx2, "AVX-512 kernels sum in another order");
        assert_eq!(fingerprint(), avx512);
        kernels::pin("test", KernelLevel::Auto).unwrap();
        assert_eq!(
            kernels::active(),
            KernelLevel::Avx512,
            "auto: the CPU's best"
        );
        assert_eq!(fingerprint(), avx512);
        // Back to AVX2 after AVX-512 ran: the same bits as before (nothing cached the level).
        kernels::pin("test", KernelLevel::Avx2).unwrap();
        assert_eq!(fingerprint(), avx2);
    } else {
        // Without AVX-512 the pin is refused, naming where it came from and what it needs.
        let e = kernels::pin("kernels", KernelLevel::Avx512).unwrap_err();
        assert!(matches!(e, KernelError::Unsupported { .. }));
        assert!(
            e.to_string().starts_with("kernels: avx512 kernels need"),
            "{e}"
        );
        kernels::pin("test", KernelLevel::Auto).unwrap();
        assert_eq!(fingerprint(), avx2, "auto is AVX2 on this CPU");
    }

    // The environment variable, read by the kernels themselves in a fresh process.
    for level in ["avx2", "avx512"] {
        if level == "avx512" && !kernels::cpu_supports(KernelLevel::Avx512) {
            continue;
        }
        kernels::pin("test", KernelLevel::parse("test", level).unwrap()).unwrap();
        let here = fingerprint();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_prints_its_fingerprint", "--nocapture"])
            .env("RL_KERNELS", level)
            .env("RL_KERNELS_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        let child = text
            .lines()
            .find_map(|l| l.strip_prefix("fingerprint "))
            .unwrap_or_else(|| panic!("no fingerprint in {text}"));
        assert_eq!(child, format!("{level} {here}"), "RL_KERNELS={level}");
    }
}

/// Run by the test above in a child process with `RL_KERNELS` set.
#[test]
fn child_prints_its_fingerprint() {
    if std::env::var("RL_KERNELS_CHILD").is_err() {
        return;
    }
    let level = kernels::from_env().unwrap();
    let fp = fingerprint();
    assert_eq!(kernels::active(), level);
    println!("fingerprint {level} {fp}");
}

#[test]
fn a_bad_environment_variable_is_named() {
    // `apply` reads the variable only for a config that says `auto`; test the parse it uses.
    let e = KernelLevel::parse(kernels::ENV_VAR, "avx3").unwrap_err();
    assert_eq!(
        e.to_string(),
        "RL_KERNELS: \"avx3\" is not a kernel level; expected auto, avx2 or avx512"
    );
}
