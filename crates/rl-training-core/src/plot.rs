//! The learning-curve PNG written at the end of a run: training episodic return and evaluation
//! mean return against env steps (title, axis labels, tick labels, legend), and below it one
//! small panel per loss curve the run logged (`losses/…`). The font is embedded (a DejaVu Sans
//! subset, `assets/README.md`), so no system font is needed; the axes' ranges are also written
//! to a sidecar `.txt` for scripts.

use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");
static REGISTER: Once = Once::new();

/// The most loss panels drawn under the return panel.
const MAX_LOSS_PANELS: usize = 4;
/// Loss metrics shown first when a run has more than [`MAX_LOSS_PANELS`].
const PREFERRED_LOSSES: [&str; 6] = [
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/td_loss",
    "losses/qf_loss",
];

fn register_font() -> Result<(), String> {
    let mut result = Ok(());
    REGISTER.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font is not a valid TrueType font".to_string());
    });
    result
}

/// The plot title of a run: algorithm, env and seed.
pub fn title_of(run: &crate::config::RunConfig) -> String {
    format!("{} on {}, seed {}", run.algorithm, run.env_id, run.seed)
}

type Series = Vec<(f64, f64)>;

fn series(history: &[(u64, String, f64)], name: &str) -> Series {
    history
        .iter()
        .filter(|(_, k, v)| k == name && v.is_finite())
        .map(|(s, _, v)| (*s as f64, *v))
        .collect()
}

/// `(lo, hi)` of the values with a margin, never empty.
fn padded_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let span = (hi - lo).max(1e-9 * lo.abs().max(1.0));
    let pad = if hi - lo < 1e-12 {
        0.5 * lo.abs().max(1.0)
    } else {
        0.05 * span
    };
    (lo - pad, hi + pad)
}

/// The loss metrics to draw: the preferred ones first, then the rest by name.
/// The loss part of a metric name: `losses/…`, or a multi-agent policy's
/// `policies/<id>/losses/…`.
fn loss_part(name: &str) -> Option<&str> {
    if name.starts_with("losses/") {
        return Some(name);
    }
    let rest = name.strip_prefix("policies/")?;
    rest.find("/losses/").map(|i| &rest[i + 1..])
}

fn loss_names(history: &[(u64, String, f64)]) -> Vec<String> {
    let mut names: Vec<String> = history
        .iter()
        .filter(|(_, k, v)| loss_part(k).is_some() && v.is_finite())
        .map(|(_, k, _)| k.clone())
        .collect();
    names.sort();
    names.dedup();
    // Preferred losses first (each policy's too), then the rest by name.
    let rank = |n: &String| {
        let part = loss_part(n).unwrap_or(n);
        PREFERRED_LOSSES
            .iter()
            .position(|p| *p == part)
            .unwrap_or(PREFERRED_LOSSES.len())
    };
    names.sort_by_key(|n| (rank(n), n.clone()));
    names.truncate(MAX_LOSS_PANELS);
    names
}

/// The ids of a multi-agent run's policies that logged `policies/<id>/episodic_return`.
fn policy_ids(history: &[(u64, String, f64)]) -> Vec<String> {
    let mut ids: Vec<String> = history
        .iter()
        .filter_map(|(_, k, _)| {
            k.strip_prefix("policies/")?
                .strip_suffix("/episodic_return")
                .map(str::to_string)
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

fn draw_err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws the curves of `history` (`(step, metric, value)`) into `path` under `title`.
pub fn learning_curve(
    history: &[(u64, String, f64)],
    path: &Path,
    title: &str,
) -> Result<(), String> {
    register_font()?;
    let train = series(history, "charts/episodic_return");
    let eval = series(history, "eval/mean_reward");
    let losses: Vec<(String, Series)> = loss_names(history)
        .into_iter()
        .map(|n| {
            let s = series(history, &n);
            (n, s)
        })
        .collect();
    let x_max = history
        .iter()
        .map(|(s, _, _)| *s as f64)
        .fold(1.0, f64::max);
    let policies: Vec<(String, Series)> = policy_ids(history)
        .into_iter()
        .map(|id| {
            let s = series(history, &format!("policies/{id}/episodic_return"));
            (id, s)
        })
        .collect();
    let (y0, y1) = padded_range(
        train
            .iter()
            .chain(&eval)
            .chain(policies.iter().flat_map(|(_, s)| s))
            .map(|p| p.1),
    );
    let (w, h) = (1000u32, if losses.is_empty() { 520 } else { 780 });
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let (top, bottom) = root.split_vertically(520);
    let blue = RGBColor(40, 90, 210);
    let red = RGBColor(210, 40, 40);

    let mut chart = main_panel(&top, title, x_max, (y0, y1), "episodic return")?;
    if !train.is_empty() {
        chart
            .draw_series(LineSeries::new(train.iter().copied(), blue.stroke_width(2)))
            .map_err(draw_err)?
            .label("training: mean episodic return per iteration")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], blue.stroke_width(3))
            });
    }
    if !eval.is_empty() {
        chart
            .draw_series(LineSeries::new(eval.iter().copied(), red.stroke_width(2)))
            .map_err(draw_err)?
            .label("evaluation: mean return, deterministic episodes")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], red.stroke_width(3)));
        chart
            .draw_series(eval.iter().map(|&p| Circle::new(p, 4, red.filled())))
            .map_err(draw_err)?;
    }
    // A multi-agent run: one line per policy (the sum over its agents per episode).
    for (i, (id, pts)) in policies.iter().enumerate() {
        let color = Palette99::pick(i + 2).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(draw_err)?
            .label(format!("policy {id}: mean episodic return per iteration"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
    }
    if !train.is_empty() || !eval.is_empty() || !policies.is_empty() {
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }

    if !losses.is_empty() {
        let panels = bottom.split_evenly((1, losses.len()));
        for ((name, pts), area) in losses.iter().zip(&panels) {
            let (l0, l1) = padded_range(pts.iter().map(|p| p.1));
            let mut c = ChartBuilder::on(area)
                .caption(name, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(62)
                .build_cartesian_2d(0.0..x_max, l0..l1)
                .map_err(draw_err)?;
            c.configure_mesh()
                .x_desc("env steps")
                .x_labels(3)
                .y_labels(5)
                .x_label_formatter(&|x| format_steps(*x))
                .y_label_formatter(&|y| format_value(*y))
                .label_style(("sans-serif", 12))
                .axis_desc_style(("sans-serif", 13))
                .light_line_style(RGBColor(238, 238, 238))
                .draw()
                .map_err(draw_err)?;
            c.draw_series(LineSeries::new(pts.iter().copied(), RGBColor(60, 60, 60)))
                .map_err(draw_err)?;
        }
    }
    root.present().map_err(draw_err)?;
    let note = format!(
        "{title}\nx: env steps 0 .. {x_max}\ny: return {y0:.3} .. {y1:.3}\ntraining: charts/episodic_return (per iteration)\nevaluation: eval/mean_reward (deterministic evaluation)\npolicies: {}\nloss panels: {}\n",
        policies
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        losses
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::fs::write(path.with_extension("txt"), note).map_err(draw_err)
}

/// Draws several named curves (`(label, [(env steps, value)])`) in one panel into `path`:
/// `rl tune`'s picture of every trial's metric. Up to ten get a legend entry each.
pub fn curves(
    curves: &[(String, Vec<(f64, f64)>)],
    path: &Path,
    title: &str,
    y_desc: &str,
) -> Result<(), String> {
    register_font()?;
    let x_max = curves
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let (y0, y1) = padded_range(curves.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1)));
    let root = BitMapBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let mut chart = main_panel(&root, title, x_max, (y0, y1), y_desc)?;
    for (i, (name, pts)) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let line = chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(draw_err)?;
        if i < 10 {
            line.label(name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        }
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(draw_err)?;
    }
    if !curves.is_empty() {
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    root.present().map_err(draw_err)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A titled panel with env steps `0..x_max` across and `y_desc` in `y0..y1` up, its grid and
/// tick labels drawn.
fn main_panel<'a, 'b>(
    area: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x_max: f64,
    (y0, y1): (f64, f64),
    y_desc: &str,
) -> Result<Chart<'a, 'b>, String> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..x_max, y0..y1)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("env steps")
        .y_desc(y_desc)
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|x| format_steps(*x))
        .y_label_formatter(&|y| format_value(*y))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()
        .map_err(draw_err)?;
    Ok(chart)
}

/// The legend of a panel's labelled series.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, at: SeriesLabelPosition) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()
        .map_err(draw_err)
}

/// Env steps as tick labels: 0, 500, 25k, 1.5M.
fn format_steps(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        trim(format!("{:.2}", x / 1e6)) + "M"
    } else if a >= 1e3 {
        trim(format!("{:.1}", x / 1e3)) + "k"
    } else {
        format!("{x:.0}")
    }
}

/// A loss value as a short tick label.
fn format_value(y: f64) -> String {
    let a = y.abs();
    if a != 0.0 && !(1e-3..1e4).contains(&a) {
        format!("{y:.1e}")
    } else {
        trim(format!("{y:.4}"))
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(format_steps(0.0), "0");
        assert_eq!(format_steps(25_000.0), "25k");
        assert_eq!(format_steps(1_500_000.0), "1.5M");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(1.5e-5), "1.5e-5");
    }

    #[test]
    fn draws_returns_and_loss_panels() {
        let mut h = Vec::new();
        for i in 0..50u64 {
            h.push((
                i * 1000,
                "charts/episodic_return".to_string(),
                (i * 10) as f64,
            ));
            h.push((
                i * 1000,
                "losses/value_loss".to_string(),
                100.0 / (i + 1) as f64,
            ));
            h.push((
                i * 1000,
                "losses/entropy".to_string(),
                0.69 - i as f64 * 1e-3,
            ));
            if i % 10 == 0 {
                h.push((i * 1000, "eval/mean_reward".to_string(), (i * 9) as f64));
            }
        }
        let dir = std::env::temp_dir().join(format!("rl-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("curve.png");
        learning_curve(&h, &p, "ppo on CartPole-v1, seed 0").unwrap();
        let png = std::fs::read(&p).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let note = std::fs::read_to_string(p.with_extension("txt")).unwrap();
        assert!(
            note.contains("loss panels: losses/value_loss, losses/entropy"),
            "{note}"
        );
        // Empty history still gives a picture (a run stopped before its first episode).
        learning_curve(&[], &dir.join("empty.png"), "empty").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
