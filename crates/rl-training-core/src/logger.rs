//! Metric logging: CSV (long format), JSON lines and TensorBoard event files, with CleanRL's
//! metric names (`charts/episodic_return`, `losses/policy_loss`, …).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Scalar metrics of one iteration, by name.
pub type Metrics = std::collections::BTreeMap<String, f64>;

/// Each metric's mean over several sets (an iteration's updates): sums per name and the
/// number of sets added.
#[derive(Debug, Default)]
pub struct MetricsMean {
    sums: Metrics,
    count: usize,
}

impl MetricsMean {
    /// Adds one set.
    pub fn add(&mut self, m: Metrics) {
        for (k, v) in m {
            *self.sums.entry(k).or_insert(0.0) += v;
        }
        self.count += 1;
    }

    /// The means (empty when nothing was added).
    pub fn mean(self) -> Metrics {
        let n = self.count.max(1) as f64;
        self.sums.into_iter().map(|(k, v)| (k, v / n)).collect()
    }
}

fn crc32c(data: &[u8]) -> u32 {
    // Bitwise CRC-32C (Castagnoli), reflected polynomial 0x82F63B78.
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Writes TensorBoard event files (TFRecord framing of `Event` protos with scalar summaries).
pub struct TensorBoardWriter {
    out: BufWriter<File>,
    path: PathBuf,
}

impl TensorBoardWriter {
    /// Creates `events.out.tfevents.<time>.rl` in `dir`.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let path = dir.join(format!("events.out.tfevents.{}.rl", wall_time() as u64));
        let mut w = Self {
            out: BufWriter::new(File::create(&path)?),
            path,
        };
        // First event: the file version.
        let mut ev = Vec::new();
        ev.push(0x09);
        ev.extend(wall_time().to_le_bytes());
        ev.push(0x1a);
        let ver = b"brain.Event:2";
        varint(ver.len() as u64, &mut ev);
        ev.extend(ver);
        w.record(&ev)?;
        Ok(w)
    }

    /// Path of the event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn record(&mut self, data: &[u8]) -> std::io::Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        self.out.write_all(&len)?;
        self.out.write_all(&masked_crc(&len).to_le_bytes())?;
        self.out.write_all(data)?;
        self.out.write_all(&masked_crc(data).to_le_bytes())
    }

    /// Writes one scalar.
    pub fn scalar(&mut self, tag: &str, value: f64, step: u64) -> std::io::Result<()> {
        let mut val = Vec::new();
        val.push(0x0a);
        varint(tag.len() as u64, &mut val);
        val.extend(tag.as_bytes());
        val.push(0x15);
        val.extend((value as f32).to_le_bytes());
        let mut summary = vec![0x0a];
        varint(val.len() as u64, &mut summary);
        summary.extend(val);
        let mut ev = vec![0x09];
        ev.extend(wall_time().to_le_bytes());
        ev.push(0x10);
        varint(step, &mut ev);
        ev.push(0x2a);
        varint(summary.len() as u64, &mut ev);
        ev.extend(summary);
        self.record(&ev)
    }

    /// Flushes to disk.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Logs metrics to `progress.csv`, `progress.jsonl` and a TensorBoard event file in a run dir.
pub struct Logger {
    csv: BufWriter<File>,
    jsonl: BufWriter<File>,
    tb: TensorBoardWriter,
    history: Vec<(u64, String, f64)>,
}

impl Logger {
    /// Creates the log files in `dir`.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut csv = BufWriter::new(File::create(dir.join("progress.csv"))?);
        writeln!(csv, "global_step,metric,value")?;
        Ok(Self {
            csv,
            jsonl: BufWriter::new(File::create(dir.join("progress.jsonl"))?),
            tb: TensorBoardWriter::create(&dir.join("tb"))?,
            history: Vec::new(),
        })
    }

    /// Logs `metrics` at `step`.
    pub fn log(&mut self, step: u64, metrics: &Metrics) -> std::io::Result<()> {
        for (k, &v) in metrics {
            writeln!(self.csv, "{step},{k},{v}")?;
            self.tb.scalar(k, v, step)?;
            self.history.push((step, k.clone(), v));
        }
        let mut obj = serde_json::Map::new();
        obj.insert("global_step".into(), step.into());
        for (k, &v) in metrics {
            obj.insert(
                k.clone(),
                serde_json::Number::from_f64(v)
                    .map(Into::into)
                    .unwrap_or(serde_json::Value::Null),
            );
        }
        writeln!(self.jsonl, "{}", serde_json::Value::Object(obj))?;
        Ok(())
    }

    /// Everything logged so far, `(step, metric, value)`.
    pub fn history(&self) -> &[(u64, String, f64)] {
        &self.history
    }

    /// Flushes all files.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.csv.flush()?;
        self.jsonl.flush()?;
        self.tb.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_value() {
        // Standard check value of CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn event_file_records_are_framed() {
        let dir = std::env::temp_dir().join(format!("rl-tb-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut w = TensorBoardWriter::create(&dir).unwrap();
        w.scalar("charts/episodic_return", 12.5, 7).unwrap();
        w.flush().unwrap();
        let data = fs::read(w.path()).unwrap();
        // Walk the records and check both CRCs.
        let mut o = 0;
        let mut n = 0;
        while o < data.len() {
            let len = u64::from_le_bytes(data[o..o + 8].try_into().unwrap()) as usize;
            assert_eq!(
                u32::from_le_bytes(data[o + 8..o + 12].try_into().unwrap()),
                masked_crc(&data[o..o + 8])
            );
            let body = &data[o + 12..o + 12 + len];
            assert_eq!(
                u32::from_le_bytes(data[o + 12 + len..o + 16 + len].try_into().unwrap()),
                masked_crc(body)
            );
            o += 16 + len;
            n += 1;
        }
        assert_eq!(n, 2);
        assert!(data.windows(22).any(|w| w == b"charts/episodic_return"));
        let _ = fs::remove_dir_all(&dir);
    }
}
