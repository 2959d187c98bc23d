//! With the `python` feature the `rl` binary embeds the Python that PyO3 built against: an
//! rpath to its libpython makes it load that one (with its site-packages: gymnasium), not
//! another libpython of the same version that the system loader would find first.
fn main() {
    #[cfg(feature = "python")]
    pyo3_build_config::add_libpython_rpath_link_args();
}
