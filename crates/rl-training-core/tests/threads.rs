//! The thread count of flex's pool (its own process: the pool is process-wide).

use rl_training_core::threads::{self, ThreadsError};

#[test]
fn a_pinned_count_sizes_the_pool_and_another_is_refused() {
    assert_eq!(threads::apply(1), Ok(1));
    assert_eq!(rayon::current_num_threads(), 1);
    // The same count again is fine; 0 leaves it as it is (RL_NUM_THREADS is not set here).
    assert_eq!(threads::apply(1), Ok(1));
    if std::env::var_os(threads::ENV_VAR).is_none() {
        assert_eq!(threads::apply(0), Ok(1));
    }
    let e = threads::apply(2).unwrap_err();
    assert_eq!(
        e,
        ThreadsError::AlreadyRunning {
            source_name: "num_threads".into(),
            asked: 2,
            running: 1
        }
    );
    assert!(
        e.to_string().starts_with("num_threads: asks for 2 threads"),
        "{e}"
    );
}
