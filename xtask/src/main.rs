//! `cargo xtask <task>`: development tasks.
fn main() {
    eprintln!("xtask: not implemented yet");
    std::process::exit(2);
}
