//! The test binaries embed the interpreter PyO3 built against: an rpath to its libpython makes
//! them load that one (with its site-packages: numpy, gymnasium), not another libpython of the
//! same version that the system loader would find first.
fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
}
