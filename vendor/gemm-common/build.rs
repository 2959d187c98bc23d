// rl patch: `DEP_RL_TRAINING_GEMM_COMMON_LEVEL_CAP_SWITCH` for dependents (`level_cap.rs`).
fn main() {
    println!("cargo::metadata=switch=1");
}
