//! The learning-curve PNG written at the end of a run: training episodic return (blue) and
//! evaluation mean return (red) against env steps, on a light grid. No text is drawn (no font
//! is needed); the axes' ranges are written to a sidecar `.txt`.

use plotters::prelude::*;
use std::path::Path;

/// Draws the curves of `history` (`(step, metric, value)`) into `path`.
pub fn learning_curve(
    history: &[(u64, String, f64)],
    path: &Path,
    title: &str,
) -> Result<(), String> {
    let series = |name: &str| -> Vec<(f64, f64)> {
        history
            .iter()
            .filter(|(_, k, v)| k == name && v.is_finite())
            .map(|(s, _, v)| (*s as f64, *v))
            .collect()
    };
    let train = series("charts/episodic_return");
    let eval = series("eval/mean_reward");
    let all: Vec<&(f64, f64)> = train.iter().chain(&eval).collect();
    let (w, h) = (800u32, 480u32);
    let (x0, x1) = (0.0, all.iter().map(|p| p.0).fold(1.0, f64::max));
    let (mut y0, mut y1) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
    if !y0.is_finite() {
        (y0, y1) = (0.0, 1.0);
    }
    if y1 - y0 < 1e-9 {
        y1 = y0 + 1.0;
    }
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (ml, mr, mt, mb) = (40i32, 20i32, 20i32, 40i32);
    let px = |x: f64| ml + ((x - x0) / (x1 - x0) * (w as i32 - ml - mr) as f64) as i32;
    let py = |y: f64| (h as i32 - mb) - ((y - y0) / (y1 - y0) * (h as i32 - mt - mb) as f64) as i32;
    let grid = RGBColor(225, 225, 225);
    for i in 0..=10 {
        let gx = ml + i * (w as i32 - ml - mr) / 10;
        let gy = mt + i * (h as i32 - mt - mb) / 10;
        root.draw(&PathElement::new(vec![(gx, mt), (gx, h as i32 - mb)], grid))
            .map_err(|e| e.to_string())?;
        root.draw(&PathElement::new(vec![(ml, gy), (w as i32 - mr, gy)], grid))
            .map_err(|e| e.to_string())?;
    }
    let axis = RGBColor(60, 60, 60);
    root.draw(&PathElement::new(
        vec![
            (ml, mt),
            (ml, h as i32 - mb),
            (w as i32 - mr, h as i32 - mb),
        ],
        axis,
    ))
    .map_err(|e| e.to_string())?;
    for (pts, color) in [
        (&train, RGBColor(50, 100, 220)),
        (&eval, RGBColor(220, 50, 50)),
    ] {
        let line: Vec<(i32, i32)> = pts.iter().map(|&(x, y)| (px(x), py(y))).collect();
        if line.len() > 1 {
            root.draw(&PathElement::new(line.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?;
        }
        for p in line {
            root.draw(&Circle::new(p, 3, color.filled()))
                .map_err(|e| e.to_string())?;
        }
    }
    root.present().map_err(|e| e.to_string())?;
    let note = format!(
        "{title}\nx: env steps {x0} .. {x1}\ny: return {y0:.3} .. {y1:.3}\nblue: charts/episodic_return (training, per iteration)\nred: eval/mean_reward (deterministic evaluation)\n"
    );
    std::fs::write(path.with_extension("txt"), note).map_err(|e| e.to_string())
}
