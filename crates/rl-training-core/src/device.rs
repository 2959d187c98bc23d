//! Choosing the compute device at run time (`--device flex|wgpu|cuda[:N]`).

use burn::tensor::Device;

/// Parses a device name; the error names what was asked for and what this build offers.
///
/// The device is always chosen explicitly: burn's `Device::default()` prefers wgpu or cuda when
/// those features are compiled in, and burn's `cpu` device is the CubeCL CPU backend.
pub fn parse_device(name: &str) -> Result<Device, String> {
    let name = name.trim().to_ascii_lowercase();
    #[allow(unused_variables)]
    let (kind, index) = match name.split_once(':') {
        Some((k, i)) => (
            k.to_string(),
            Some(
                i.parse::<usize>()
                    .map_err(|_| format!("device {name:?}: index {i:?} is not a number"))?,
            ),
        ),
        None => (name.clone(), None),
    };
    // Unused when every backend is compiled in.
    #[allow(unused_variables)]
    let missing = |feat: &str| -> Result<Device, String> {
        Err(format!(
            "device {name:?} needs the `{feat}` feature, which this build lacks (compiled in: {})",
            compiled_devices().join(", ")
        ))
    };
    match kind.as_str() {
        "flex" | "cpu" => {
            #[cfg(feature = "flex")]
            {
                let _ = index;
                Ok(Device::flex())
            }
            #[cfg(not(feature = "flex"))]
            {
                missing("flex")
            }
        }
        "wgpu" | "gpu" => {
            #[cfg(feature = "wgpu")]
            {
                Ok(Device::wgpu(burn::tensor::DeviceKind::DiscreteGpu(
                    index.unwrap_or(0),
                )))
            }
            #[cfg(not(feature = "wgpu"))]
            {
                missing("wgpu")
            }
        }
        "cuda" => {
            #[cfg(feature = "cuda")]
            {
                Ok(Device::cuda(index.unwrap_or(0)))
            }
            #[cfg(not(feature = "cuda"))]
            {
                missing("cuda")
            }
        }
        other => Err(format!(
            "unknown device {other:?}; expected flex, wgpu[:N] or cuda[:N] (compiled in: {})",
            compiled_devices().join(", ")
        )),
    }
}

/// The device kinds this build supports.
pub fn compiled_devices() -> Vec<&'static str> {
    let mut v = Vec::new();
    if cfg!(feature = "flex") {
        v.push("flex");
    }
    if cfg!(feature = "wgpu") {
        v.push("wgpu");
    }
    if cfg!(feature = "cuda") {
        v.push("cuda");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        #[cfg(feature = "flex")]
        assert!(parse_device("flex").is_ok());
        let e = parse_device("tpu").unwrap_err();
        assert!(e.contains("unknown device \"tpu\""), "{e}");
        #[cfg(not(feature = "cuda"))]
        assert!(
            parse_device("cuda:0")
                .unwrap_err()
                .contains("`cuda` feature")
        );
    }
}
