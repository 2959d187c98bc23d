//! Patch of the `rl` workspace (see `vendor/README.md`): a cap on the x86 level that
//! [`Arch::detect`](crate::Arch::detect) picks, so one machine can run the AVX2 kernels of a
//! machine without AVX-512. Read from `RL_KERNELS` (`avx2`, `avx512`, `auto`) on first use, or set
//! with [`set_x86_level_cap`]; checked on every dispatch (one relaxed atomic load).

use core::sync::atomic::{AtomicU8, Ordering};

const UNREAD: u8 = u8::MAX;
const NO_CAP: u8 = u8::MAX - 1;
static CAP: AtomicU8 = AtomicU8::new(UNREAD);

/// The highest x86-64 micro-architecture level the dispatcher may pick: 2 (SSE4.2), 3 (AVX2 +
/// FMA), 4 (AVX-512); `None`: the best the CPU has.
pub fn x86_level_cap() -> Option<u8> {
    let mut cap = CAP.load(Ordering::Relaxed);
    if cap == UNREAD {
        let _ = CAP.compare_exchange(UNREAD, cap_from_env(), Ordering::Relaxed, Ordering::Relaxed);
        cap = CAP.load(Ordering::Relaxed);
    }
    (cap != NO_CAP).then_some(cap)
}

/// Sets the cap (see [`x86_level_cap`]); later dispatches use it.
pub fn set_x86_level_cap(cap: Option<u8>) {
    CAP.store(cap.map_or(NO_CAP, |c| c.min(NO_CAP - 1)), Ordering::Relaxed);
}

/// Unknown values mean no cap here; `rl` checks the variable and names a bad value.
fn cap_from_env() -> u8 {
    #[cfg(feature = "std")]
    {
        match std::env::var("RL_KERNELS").as_deref().map(str::trim) {
            Ok("avx2") => 3,
            Ok("avx512") => 4,
            _ => NO_CAP,
        }
    }
    #[cfg(not(feature = "std"))]
    {
        NO_CAP
    }
}
