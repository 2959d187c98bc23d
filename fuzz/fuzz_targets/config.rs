//! The YAML run config through the path `rl train` takes before it trains: `--set key=value`
//! overrides (input lines starting with `#set `), YAML parsing, strict deserialization (aliases,
//! schedules, unknown keys), the algorithm's range checks and making the env.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let overrides: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#set "))
        .map(String::from)
        .collect();
    if let Ok(run) = rl::core::config::RunConfig::from_yaml(text, &overrides, "fuzz.yaml") {
        // What `rl train` saves into the run directory must parse back to the same config.
        let saved = rl::core::runner::config_yaml(&run).expect("a parsed config serializes");
        let back = rl::core::config::RunConfig::from_yaml(&saved, &[], "config.yaml")
            .unwrap_or_else(|e| panic!("saved config does not parse back: {e}\n{saved}"));
        assert_eq!(back, run, "saved config differs:\n{saved}");
        let _ = rl::check_config(&run);
    }
});
