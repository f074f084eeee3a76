//! Plots of a results directory.
//!
//! One chart per workload: throughput against worker threads, one line per
//! configuration, or, for a workload measured at a single thread count
//! (`tree`, whose metrics are operations at sizes), a grouped bar chart with
//! one group per metric. Each is written as `<workload>.svg` and, with the
//! default cargo feature `png`, `<workload>.png`.
//!
//! The page that shows the plots is [`crate::page`].
//!
//! The SVG is drawn with plotters' SVG backend and the PNG is that same SVG
//! rasterised by resvg, rather than drawn again with plotters' bitmap
//! backend. The reason is fonts: plotters' font backends that can draw into
//! a bitmap also measure the text of an SVG, so without a font file on the
//! machine even the SVG could not be drawn. Laid out with plotters' built-in
//! estimate, the SVG needs no font (the viewer draws its text); resvg looks
//! the fonts up in the system font directories at run time, and if there are
//! none the PNG is refused with an error naming the missing font, never
//! written without its text. Both files always show the same picture.
//! Without the `png` feature resvg is not built and only the SVG is
//! written.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
#[cfg(feature = "png")]
use std::sync::{Arc, OnceLock};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;
#[cfg(feature = "png")]
use resvg::{tiny_skia, usvg};

use crate::group;
use crate::Sample;

/// Line colours, one per configuration in order of first appearance:
/// eight that stay apart on white and for the common colour blindnesses.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(140, 86, 75),
];

/// Marker shapes. Six against eight colours: the pair (colour, marker)
/// stays distinct for 24 configurations, and lines that cross at one point
/// can still be told apart without colour.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Plus,
}

const MARKERS: [Marker; 6] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Plus,
];

/// The font family named in the SVG; resvg maps it to a system font.
const FONT: &str = "sans-serif";
/// Text sizes in plotters' units (it draws them at 1/1.24 of this in px):
/// tick labels, axis captions, titles, legend entries.
const LABEL: u32 = 16;
const DESC: u32 = 18;
const TITLE: u32 = 24;
const LEGEND: u32 = 17;
/// Families tried, in order, for the PNG's sans-serif text.
#[cfg(feature = "png")]
const PREFERRED_FONTS: [&str; 6] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "Arial",
    "Helvetica",
    "FreeSans",
];

/// Draws one workload's samples: throughput (the sample unit) against
/// worker threads, one line per configuration, each point the mean over the
/// repetitions (harmonic for rates, arithmetic for times) with an error bar
/// from the smallest to the largest repetition, said in the y-axis caption.
/// A workload measured at one thread count only is drawn as a grouped bar
/// chart instead (x = metric, one bar per configuration; log-scale y when
/// the values span more than two decades).
///
/// Writes `<dir>/<workload>.svg` and, with the `png` feature,
/// `<dir>/<workload>.png`, and returns the paths written. If the PNG cannot
/// be drawn (no system font), the SVG has already been written and the
/// error says which font is missing.
pub fn plot_workload(
    samples: &[Sample],
    workload: &str,
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    check_file_stem(workload)?;
    let data = Chart::of(samples, workload)?;
    // Lines need several thread counts on one y axis; metrics in several
    // units (`tree`: ns/op beside bytes/entry) are bars, whatever their
    // thread counts.
    let svg = if data.threads.len() > 1 && data.common_unit().is_some() {
        line_chart_svg(&data)?
    } else {
        bar_chart_svg(&data)?
    };
    let svg_path = dir.join(format!("{workload}.svg"));
    fs::write(&svg_path, &svg).map_err(|e| format!("cannot write {}: {e}", svg_path.display()))?;
    #[cfg(feature = "png")]
    {
        let png = rasterise(&svg, system_fonts())?;
        let png_path = dir.join(format!("{workload}.png"));
        fs::write(&png_path, png)
            .map_err(|e| format!("cannot write {}: {e}", png_path.display()))?;
        Ok(vec![svg_path, png_path])
    }
    #[cfg(not(feature = "png"))]
    Ok(vec![svg_path])
}

/// `s` when `n` is not one.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Refuses workload names that would not make a plain file name in `dir`.
fn check_file_stem(workload: &str) -> Result<(), String> {
    let ok = !workload.is_empty()
        && !workload.starts_with('.')
        && workload
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.=+".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "workload name `{workload}` cannot be a file name (letters, digits and -_.=+ only)"
        ))
    }
}

/// One point of a plot: the summary of one (metric, configuration, thread
/// count)'s repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    threads: usize,
    mean: f64,
    min: f64,
    max: f64,
    reps: usize,
}

/// One workload's samples, summarised per metric and configuration.
#[derive(Debug)]
struct Chart {
    workload: String,
    /// Metrics in order of first appearance, each with its unit.
    metrics: Vec<(String, String)>,
    /// Configurations in order of first appearance: the first is the
    /// baseline, so it keeps the first colour in every plot.
    configs: Vec<String>,
    /// Distinct thread counts, ascending.
    threads: Vec<usize>,
    /// `points[(metric index, config index)]`, ascending in threads.
    points: HashMap<(usize, usize), Vec<Point>>,
    /// Whether every series is summarised with the harmonic mean.
    all_harmonic: bool,
    /// Whether any series is.
    any_harmonic: bool,
}

impl Chart {
    /// Groups and summarises the samples of `workload`; an error if there
    /// are none or a value is not a finite non-negative number.
    fn of(samples: &[Sample], workload: &str) -> Result<Chart, String> {
        if let Some(s) = samples
            .iter()
            .find(|s| s.workload == workload && !(s.value.is_finite() && s.value >= 0.0))
        {
            return Err(format!(
                "workload `{workload}`, {} {} at {} threads: value {} is not a finite \
                 non-negative number",
                s.config, s.metric, s.threads, s.value
            ));
        }
        let groups = group::by_workload(samples);
        let Some(g) = groups.iter().find(|g| g.name == workload) else {
            return Err(format!("no samples for workload `{workload}`"));
        };
        // One name, two meanings: the file is not one run's.
        for (i, m) in g.metrics.iter().enumerate() {
            if let Some(o) = g.metrics[..i].iter().find(|o| o.name == m.name) {
                return Err(if o.unit != m.unit {
                    format!(
                        "workload `{workload}`: metric `{}` is in both {} and {}",
                        m.name, o.unit, m.unit
                    )
                } else {
                    format!(
                        "workload `{workload}`: metric `{}` is both higher- and \
                         lower-is-better",
                        m.name
                    )
                });
            }
        }
        let mut points = HashMap::new();
        let (mut all_harmonic, mut any_harmonic) = (true, false);
        for (mi, metric) in g.metrics.iter().enumerate() {
            let harmonic = metric.higher_is_better;
            for (ci, config) in g.configs.iter().enumerate() {
                let series: Vec<Point> = g
                    .threads
                    .iter()
                    .filter_map(|&threads| {
                        let v = g.values(metric, config, threads);
                        (!v.is_empty()).then(|| Point {
                            threads,
                            // The table's mean (harmonic for rates); a zero
                            // rate, which has none, plots at zero.
                            mean: crate::compare::summarize(v, harmonic).map_or(0.0, |s| s.mean),
                            min: v.iter().copied().fold(f64::INFINITY, f64::min),
                            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            reps: v.len(),
                        })
                    })
                    .collect();
                if !series.is_empty() {
                    all_harmonic &= harmonic;
                    any_harmonic |= harmonic;
                    points.insert((mi, ci), series);
                }
            }
        }
        Ok(Chart {
            workload: workload.to_string(),
            metrics: g
                .metrics
                .iter()
                .map(|m| (m.name.to_string(), m.unit.to_string()))
                .collect(),
            configs: g.configs.iter().map(|c| c.to_string()).collect(),
            threads: g.threads.clone(),
            points,
            all_harmonic,
            any_harmonic,
        })
    }

    /// The unit shared by every metric, if they share one.
    fn common_unit(&self) -> Option<&str> {
        let u = &self.metrics[0].1;
        self.metrics.iter().all(|(_, x)| x == u).then_some(u)
    }

    /// Every point, for the axis ranges.
    fn all_points(&self) -> impl Iterator<Item = &Point> {
        self.points.values().flatten()
    }

    /// What a point and its bar mean, for the y-axis caption.
    fn summary_note(&self) -> String {
        let mean = match (self.all_harmonic, self.any_harmonic) {
            (true, _) => "harmonic mean",
            (false, false) => "mean",
            (false, true) => "mean (harmonic for rates)",
        };
        let reps: Vec<usize> = self.all_points().map(|p| p.reps).collect();
        let n = reps[0];
        let over = if reps.iter().all(|&r| r == n) {
            format!("{n} rep{}", plural(n))
        } else {
            "the reps".to_string()
        };
        format!("{mean}; bars: min..max over {over}")
    }
}

/// A number for an axis tick: at most three significant digits with an SI
/// suffix, so `1250000` reads `1.25M` and labels stay short.
fn si(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if scaled == 0.0 {
        return "0".to_string();
    }
    let digits = (2 - scaled.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let mut s = format!("{scaled:.digits$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    s + suffix
}

/// A linear axis whose ticks are exactly the given points: the measured
/// thread counts (integers only, and only where there is data) or one per
/// bar group. plotters' own key-point wrapper cannot be given a label
/// formatter on an `f64` axis, hence this small axis type.
#[derive(Debug, Clone)]
struct FixedTicks {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl FixedTicks {
    /// The axis over `range` with labels and grid lines at `ticks`.
    fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> FixedTicks {
        FixedTicks { range, ticks }
    }
}

impl Ranged for FixedTicks {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let f = (v - self.range.start) / span;
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Only bold (labelled) points: a light grid between integer thread
        // counts would suggest values that were never measured.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// Ticks from 0 to `top` at a round step (1, 2, 2.5 or 5 times a power
/// of ten) giving four to nine labels.
fn round_ticks(top: f64) -> Vec<f64> {
    let raw = top / 8.0;
    let pow = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * pow)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * pow);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|&t| t <= top * (1.0 + 1e-9))
        .collect()
}

/// A conservative width in pixels of `text` at `size` px in a common sans
/// font (DejaVu Sans is among the widest), used to size label areas so
/// labels never run into each other or the axis.
fn text_width(text: &str, size: u32) -> u32 {
    (text.chars().count() as f64 * size as f64 * 0.62).ceil() as u32
}

/// Pixel offsets of `marker`'s outline around its centre, `r` px in radius.
fn marker_outline(marker: Marker, r: i32) -> Vec<(i32, i32)> {
    let h = r * 2 / 5;
    match marker {
        Marker::Circle => (0..16)
            .map(|i| {
                let a = i as f64 * std::f64::consts::TAU / 16.0;
                (
                    (a.cos() * r as f64).round() as i32,
                    (a.sin() * r as f64).round() as i32,
                )
            })
            .collect(),
        Marker::Square => vec![
            (-r + 1, -r + 1),
            (r - 1, -r + 1),
            (r - 1, r - 1),
            (-r + 1, r - 1),
        ],
        Marker::TriangleUp => vec![(0, -r - 1), (r + 1, r), (-r - 1, r)],
        Marker::TriangleDown => vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)],
        Marker::Diamond => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
        Marker::Plus => vec![
            (-h, -r - 1),
            (h, -r - 1),
            (h, -h),
            (r + 1, -h),
            (r + 1, h),
            (h, h),
            (h, r + 1),
            (-h, r + 1),
            (-h, h),
            (-r - 1, h),
            (-r - 1, -h),
            (-h, -h),
        ],
    }
}

/// The colour and marker of series `i`.
fn style_of(i: usize) -> (RGBColor, Marker) {
    (PALETTE[i % PALETTE.len()], MARKERS[i % MARKERS.len()])
}

/// Draws the legend in its own area right of the plot, so it can never
/// cover data: one row per entry with the series' colour, line (if any)
/// and marker.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    heading: &str,
    entries: &[String],
    with_line: bool,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<_>| format!("drawing the legend: {e}");
    let font = (FONT, LEGEND).into_font();
    let top = 60;
    area.draw(&Text::new(
        heading.to_string(),
        (10, top),
        (FONT, LEGEND).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    for (i, name) in entries.iter().enumerate() {
        let (color, marker) = style_of(i);
        let y = top + 28 + i as i32 * 24;
        if with_line {
            area.draw(&PathElement::new(
                vec![(10, y), (40, y)],
                color.stroke_width(2),
            ))
            .map_err(err)?;
        }
        let outline = marker_outline(marker, 5)
            .into_iter()
            .map(|(dx, dy)| (25 + dx, y + dy))
            .collect::<Vec<_>>();
        area.draw(&Polygon::new(outline, color.filled()))
            .map_err(err)?;
        area.draw(&Text::new(
            name.clone(),
            (50, y),
            TextStyle::from(font.clone()).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// Width of the legend area for `heading` and `entries`.
fn legend_width(heading: &str, entries: &[String]) -> u32 {
    let longest = entries
        .iter()
        .map(|e| text_width(e, LEGEND))
        .max()
        .unwrap_or(0)
        .max(text_width(heading, LEGEND).saturating_sub(40));
    (longest + 70).max(150)
}

/// Keeps the tick positions (ascending, in axis units) that are at least
/// `min_gap` apart, so their labels do not overlap; the first and the last
/// are kept whenever they can be.
fn thin_ticks(ticks: &[f64], min_gap: f64) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for &t in ticks {
        if out.last().is_none_or(|&l| t - l >= min_gap) {
            out.push(t);
        }
    }
    if let (Some(&last), Some(&kept)) = (ticks.last(), out.last()) {
        if kept != last && out.len() > 1 && last - out[out.len() - 2] >= min_gap {
            let n = out.len();
            out[n - 1] = last;
        }
    }
    out
}

/// Throughput against threads, one line per (configuration[, metric]).
fn line_chart_svg(data: &Chart) -> Result<String, String> {
    let unit = data.common_unit().ok_or_else(|| {
        format!(
            "workload `{}` mixes units across its metrics and thread counts; cannot share one \
             y axis",
            data.workload
        )
    })?;
    // Thread counts that double (1, 2, 4, ... 64) crowd at the left of a
    // linear axis: past an 8x span, space them by log2 instead.
    let (lo, hi) = (data.threads[0] as f64, *data.threads.last().unwrap() as f64);
    let log_x = hi / lo.max(1.0) >= 8.0 && lo >= 1.0;
    let fwd = move |t: f64| if log_x { t.log2() } else { t };
    let inv = move |x: f64| if log_x { x.exp2() } else { x };
    let (x0, x1) = (fwd(lo), fwd(hi));
    let pad = (x1 - x0) * 0.05;
    let (xmin, xmax) = (x0 - pad, x1 + pad);

    let series: Vec<(usize, usize, String)> = (0..data.metrics.len())
        .flat_map(|m| (0..data.configs.len()).map(move |c| (m, c)))
        .filter(|k| data.points.contains_key(k))
        .map(|(m, c)| {
            let name = if data.metrics.len() > 1 {
                format!("{} ({})", data.configs[c], data.metrics[m].0)
            } else {
                data.configs[c].clone()
            };
            (m, c, name)
        })
        .collect();
    let names: Vec<String> = series.iter().map(|s| s.2.clone()).collect();

    let ymax_data = data.all_points().map(|p| p.max).fold(0.0, f64::max);
    let ymax = if ymax_data > 0.0 {
        ymax_data * 1.1
    } else {
        1.0
    };

    let plot_w = 820u32;
    let legend_w = legend_width("configuration", &names);
    let (w, h) = (plot_w + legend_w, 600u32);
    let x_label_area = 60u32;
    let y_label_area = 95u32;
    let plot_px = (plot_w - y_label_area - 40) as f64;
    // A tick label is at most a few digits: keep ticks 40 px apart.
    let ticks: Vec<f64> = data.threads.iter().map(|&t| fwd(t as f64)).collect();
    let ticks = thin_ticks(&ticks, (xmax - xmin) * 40.0 / plot_px);

    // Several metrics share the axis only when they share a unit: name
    // that in the title, and each metric in its series' legend entry.
    let what = if data.metrics.len() == 1 {
        &data.metrics[0].0
    } else {
        unit
    };
    let title = format!("{}: {what} vs worker threads", data.workload);
    let y_desc = format!("{unit} ({})", data.summary_note());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e}", data.workload);
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(&title, (FONT, TITLE)).map_err(err)?;
        let (left, right) = root.split_horizontally(plot_w);
        let mut chart = ChartBuilder::on(&left)
            .margin(20)
            .x_label_area_size(x_label_area)
            .y_label_area_size(y_label_area)
            .build_cartesian_2d(FixedTicks::new(xmin..xmax, ticks), 0.0..ymax)
            .map_err(err)?;
        let x_fmt = |v: &f64| format!("{}", inv(*v).round() as u64);
        let y_fmt = |v: &f64| si(*v);
        chart
            .configure_mesh()
            .x_desc("worker threads")
            .y_desc(&y_desc)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .y_labels(8)
            .label_style((FONT, LABEL))
            .axis_desc_style((FONT, DESC))
            .bold_line_style(RGBColor(220, 220, 220))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(err)?;
        // Error bars of different configurations at one thread count would
        // sit on top of each other: shift each series a few pixels.
        let dodge = (xmax - xmin) * 4.0 / plot_px;
        let mid = (series.len() as f64 - 1.0) / 2.0;
        for (i, (m, c, _)) in series.iter().enumerate() {
            let (color, marker) = style_of(i);
            let off = (i as f64 - mid) * dodge;
            let pts = &data.points[&(*m, *c)];
            let xy = |p: &Point| (fwd(p.threads as f64) + off, p.mean);
            chart
                .draw_series(LineSeries::new(pts.iter().map(xy), color.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series(pts.iter().map(|p| {
                    ErrorBar::new_vertical(
                        fwd(p.threads as f64) + off,
                        p.min,
                        p.mean,
                        p.max,
                        color.stroke_width(1),
                        8,
                    )
                }))
                .map_err(err)?;
            let outline = marker_outline(marker, 5);
            chart
                .draw_series(pts.iter().map(|p| {
                    EmptyElement::at(xy(p)) + Polygon::new(outline.clone(), color.filled())
                }))
                .map_err(err)?;
        }
        draw_legend(&right, "configuration", &names, true)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One group of bars per metric, one bar per configuration, with the
/// min..max bar of its repetitions: for a single thread count, or for
/// metrics in several units. Where thread counts differ, each metric's
/// label names its own.
fn bar_chart_svg(data: &Chart) -> Result<String, String> {
    let common = data.common_unit().map(str::to_string);
    let mixed_threads = data.threads.len() > 1;
    let labels: Vec<String> = data
        .metrics
        .iter()
        .enumerate()
        .map(|(mi, (m, u))| {
            let mut label = m.clone();
            if common.is_none() {
                label = format!("{label} [{u}]");
            }
            if mixed_threads {
                let t = (0..data.configs.len())
                    .find_map(|c| data.points.get(&(mi, c)).and_then(|v| v.first()))
                    .map_or(0, |p| p.threads);
                label = format!("{label} x{t}");
            }
            label
        })
        .collect();
    let (nm, nc) = (data.metrics.len(), data.configs.len());

    // Values that span decades (1 ns/op next to 1e6) would flatten the
    // small bars to nothing: draw them on a log10 axis instead.
    let lo = data
        .all_points()
        .map(|p| p.min)
        .fold(f64::INFINITY, f64::min);
    let hi = data.all_points().map(|p| p.max).fold(0.0, f64::max);
    let log_y = lo > 0.0 && hi / lo >= 100.0;
    let fwd = move |v: f64| if log_y { v.log10() } else { v };
    let (ymin, ymax, yticks) = if log_y {
        let (a, b) = (lo.log10().floor(), hi.log10().ceil());
        let step = ((b - a) / 8.0).ceil().max(1.0);
        let mut t = Vec::new();
        let mut k = a;
        while k <= b {
            t.push(k);
            k += step;
        }
        (a, b, t)
    } else {
        let top = if hi > 0.0 { hi * 1.1 } else { 1.0 };
        (0.0, top, round_ticks(top))
    };

    let group_px = ((nc * 16 + 16) as u32).max(40);
    let plot_inner = (group_px * nm as u32).max(600);
    let widest = labels
        .iter()
        .map(|l| text_width(l, LABEL))
        .max()
        .unwrap_or(0);
    let rotate = widest + 8 > plot_inner / nm as u32;
    let x_label_area = if rotate { widest + 50 } else { 60 };
    let y_label_area = 95u32;
    let plot_w = plot_inner + y_label_area + 40;
    let legend_w = legend_width("configuration", &data.configs);
    let (w, h) = (plot_w + legend_w, 520 + x_label_area);

    let title = match data.threads.as_slice() {
        [t] => format!(
            "{}: {} metric{} at {} thread{}",
            data.workload,
            nm,
            plural(nm),
            t,
            plural(*t)
        ),
        _ => format!(
            "{}: {} metric{} (xN = threads)",
            data.workload,
            nm,
            plural(nm)
        ),
    };
    let y_desc = format!(
        "{}{} ({})",
        common.as_deref().unwrap_or("value, in each metric's unit"),
        if log_y { ", log scale" } else { "" },
        data.summary_note()
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e}", data.workload);
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(&title, (FONT, TITLE)).map_err(err)?;
        let (left, right) = root.split_horizontally(plot_w);
        let xr = FixedTicks::new(-0.5..nm as f64 - 0.5, (0..nm).map(|i| i as f64).collect());
        let yr = FixedTicks::new(ymin..ymax, yticks);
        let labels_ref = &labels;
        // Rotated labels are drawn below, anchored at their end: plotters
        // centres a rotated tick label on its tick, which would put half of
        // it inside the plot.
        let x_fmt = move |v: &f64| {
            let i = v.round();
            if !rotate && i >= 0.0 && (i as usize) < labels_ref.len() {
                labels_ref[i as usize].clone()
            } else {
                String::new()
            }
        };
        let y_fmt = |v: &f64| if log_y { si(10f64.powf(*v)) } else { si(*v) };
        let mut chart = ChartBuilder::on(&left)
            .margin(20)
            .x_label_area_size(x_label_area)
            .y_label_area_size(y_label_area)
            .build_cartesian_2d(xr, yr)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("metric")
            .y_desc(&y_desc)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .label_style((FONT, LABEL))
            .axis_desc_style((FONT, DESC))
            .disable_x_mesh()
            .bold_line_style(RGBColor(220, 220, 220))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(err)?;
        if rotate {
            let style = TextStyle::from((FONT, LABEL).into_font())
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Right, VPos::Center));
            chart
                .draw_series(labels.iter().enumerate().map(|(m, l)| {
                    EmptyElement::at((m as f64, ymin))
                        + Text::new(l.clone(), (0, 10), style.clone())
                }))
                .map_err(err)?;
        }
        let width = 0.8 / nc as f64;
        for c in 0..nc {
            let (color, _) = style_of(c);
            for m in 0..nm {
                let Some(p) = data.points.get(&(m, c)).and_then(|v| v.first()) else {
                    continue;
                };
                let x0 = m as f64 - 0.4 + c as f64 * width;
                let xc = x0 + width * 0.45;
                let y = |v: f64| fwd(v).max(ymin);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, ymin), (x0 + width * 0.9, y(p.mean))],
                        color.filled(),
                    )))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(ErrorBar::new_vertical(
                        xc,
                        y(p.min),
                        y(p.mean),
                        y(p.max),
                        BLACK.stroke_width(1),
                        6,
                    )))
                    .map_err(err)?;
            }
        }
        draw_legend(&right, "configuration", &data.configs, false)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The system's fonts, loaded once per process (a scan of the font
/// directories takes a while), with `sans-serif` mapped to a font that is
/// there: resvg's default, Arial, is missing on most Linux machines.
#[cfg(feature = "png")]
fn system_fonts() -> &'static Arc<usvg::fontdb::Database> {
    static DB: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        let family = PREFERRED_FONTS
            .iter()
            .find(|f| {
                db.faces()
                    .any(|face| face.families.iter().any(|(n, _)| n == *f))
            })
            .map(|f| f.to_string())
            .or_else(|| {
                db.faces()
                    .find_map(|face| face.families.first().map(|(n, _)| n.clone()))
            });
        if let Some(f) = family {
            db.set_sans_serif_family(f);
        }
        Arc::new(db)
    })
}

/// Rasterises `svg` to PNG bytes with the fonts of `fonts`. With no usable
/// sans-serif font the text would silently vanish, so that is an error
/// naming the font looked for and where.
#[cfg(feature = "png")]
fn rasterise(svg: &str, fonts: &Arc<usvg::fontdb::Database>) -> Result<Vec<u8>, String> {
    let query = usvg::fontdb::Query {
        families: &[usvg::fontdb::Family::SansSerif],
        ..Default::default()
    };
    if fonts.query(&query).is_none() {
        return Err(format!(
            "PNG needs a sans-serif font to draw its text and none was found (looked for {} or \
             any other font in the system font directories such as /usr/share/fonts; on Debian \
             `apt-get install fonts-dejavu-core` provides one)",
            PREFERRED_FONTS.join(", ")
        ));
    }
    let options = usvg::Options {
        fontdb: Arc::clone(fonts),
        font_family: FONT.to_string(),
        ..Default::default()
    };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| format!("reading the SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| format!("cannot draw a {}x{} PNG", size.width(), size.height()))?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| format!("encoding the PNG: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vmbench-plot-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn sample(workload: &str, metric: &str, unit: &str, config: &str, threads: usize) -> Sample {
        Sample {
            workload: workload.into(),
            metric: metric.into(),
            unit: unit.into(),
            higher_is_better: unit == "ops/s",
            config: config.into(),
            threads,
            rep: 0,
            value: 0.0,
            cpu_wait: None,
            transfer_ns: None,
            transfer_after_ns: None,
        }
    }

    /// `configs` scaling over `threads`, three repetitions each, plus
    /// another workload's samples that must not leak into the plot.
    fn scaling(configs: &[&str], threads: &[usize]) -> Vec<Sample> {
        let mut out = Vec::new();
        for (c, config) in configs.iter().enumerate() {
            for &t in threads {
                for rep in 0..3 {
                    let mut s = sample("brk1", "ops/s", "ops/s", config, t);
                    s.rep = rep;
                    let per_thread = 1.0e6 * (1.0 - 0.08 * c as f64);
                    s.value = per_thread * (t as f64).powf(0.85) * (1.0 + 0.03 * rep as f64);
                    out.push(s);
                }
            }
        }
        let mut other = sample("mmap1", "ops/s", "ops/s", "not-in-brk1", 1);
        other.value = 5.0;
        out.push(other);
        out
    }

    /// The PNG's width and height from its header, after checking the
    /// signature, and that the whole image decodes.
    #[cfg(feature = "png")]
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&bytes[12..16], b"IHDR");
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        let decoded = tiny_skia::Pixmap::decode_png(bytes).expect("PNG decodes");
        assert_eq!((decoded.width(), decoded.height()), (w, h));
        // Not a blank page: some pixels are dark (axes, text, lines).
        let dark = decoded
            .pixels()
            .iter()
            .filter(|p| p.red() < 100 && p.green() < 100 && p.blue() < 100)
            .count();
        assert!(dark > 1000, "only {dark} dark pixels");
        (w, h)
    }

    /// Plots `samples` and checks both files; on a machine without fonts
    /// the PNG is refused with an error naming the font and the SVG stays.
    #[cfg(feature = "png")]
    fn plot_and_check(samples: &[Sample], workload: &str, dir: &Path) -> String {
        let svg_path = dir.join(format!("{workload}.svg"));
        let png_path = dir.join(format!("{workload}.png"));
        match plot_workload(samples, workload, dir) {
            Ok(paths) => {
                assert_eq!(paths, vec![svg_path.clone(), png_path.clone()]);
                let (w, h) = png_size(&fs::read(&png_path).unwrap());
                assert!(w >= 800 && h >= 500, "{w}x{h}");
            }
            Err(e) => {
                assert!(system_fonts().is_empty(), "fonts are installed, yet: {e}");
                assert!(e.contains("font") && !e.contains('\n'), "{e}");
                assert!(!png_path.exists());
            }
        }
        let svg = fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg") && svg.len() > 1000);
        svg
    }

    /// Plots `samples` and checks that only the SVG was written: without
    /// the `png` feature there is no rasteriser.
    #[cfg(not(feature = "png"))]
    fn plot_and_check(samples: &[Sample], workload: &str, dir: &Path) -> String {
        let svg_path = dir.join(format!("{workload}.svg"));
        let paths = plot_workload(samples, workload, dir).unwrap();
        assert_eq!(paths, vec![svg_path.clone()]);
        assert!(!dir.join(format!("{workload}.png")).exists());
        let svg = fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg") && svg.len() > 1000);
        svg
    }

    #[test]
    fn a_scaling_workload_is_a_line_chart_with_every_config() {
        let dir = temp_dir("lines");
        let configs = [
            "maple",
            "legacy",
            "imap=distributed",
            "rule=off",
            "lock=numa",
            "lock=mcs",
            "imap=rcu-btree",
            "eighth",
        ];
        let svg = plot_and_check(&scaling(&configs, &[1, 2, 4, 8, 16]), "brk1", &dir);
        for needle in [
            "worker threads",
            "ops/s",
            "harmonic mean",
            "min..max over 3 reps",
        ] {
            assert!(svg.contains(needle), "SVG lacks {needle}");
        }
        for c in configs {
            assert!(svg.contains(c), "SVG lacks config {c}");
        }
        assert!(!svg.contains("not-in-brk1"));
        assert!(svg.contains("brk1: ops/s vs worker threads"));
        // Integer thread ticks, exactly the measured ones.
        for t in [1, 2, 4, 8, 16] {
            assert!(svg.contains(&format!(">\n{t}\n</text>")), "no tick {t}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn metrics_sharing_a_unit_share_the_line_chart() {
        let dir = temp_dir("metrics");
        let mut samples = scaling(&["maple", "legacy"], &[1, 2]);
        let mut reads = samples.clone();
        for s in &mut reads {
            s.metric = "reads/s".into();
        }
        samples.extend(reads);
        let svg = plot_and_check(&samples, "brk1", &dir);
        assert!(svg.contains("brk1: ops/s vs worker threads"));
        for needle in [
            "maple (ops/s)",
            "legacy (ops/s)",
            "maple (reads/s)",
            "legacy (reads/s)",
        ] {
            assert!(svg.contains(needle), "SVG lacks {needle}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_thread_count_is_a_bar_chart_per_metric() {
        let dir = temp_dir("bars");
        let mut samples = Vec::new();
        for (c, config) in ["maple", "btree"].iter().enumerate() {
            for (m, (metric, unit, v)) in [
                ("load n=1000", "ns/op", 12.0),
                ("gap n=1000", "ns/op", 35.0),
                ("iterate n=100000", "ns/op", 1.5),
                ("memory n=100000", "bytes/entry", 40.0),
            ]
            .iter()
            .enumerate()
            {
                for rep in 0..3 {
                    let mut s = sample("tree", metric, unit, config, 1);
                    s.rep = rep;
                    s.value = v * (1.0 + 0.2 * c as f64) * (1.0 + 0.05 * (rep + m) as f64);
                    samples.push(s);
                }
            }
        }
        let svg = plot_and_check(&samples, "tree", &dir);
        assert!(svg.contains("tree: 4 metrics at 1 thread"));
        for needle in [
            "load n=1000 [ns/op]",
            "memory n=100000 [bytes/entry]",
            "maple",
            "btree",
        ] {
            assert!(svg.contains(needle), "SVG lacks {needle}");
        }
        assert!(svg.contains("each metric&apos;s unit") || svg.contains("each metric's unit"));
        assert!(
            !svg.contains("log scale"),
            "1.5..56 spans under two decades"
        );
        assert!(!svg.contains("worker threads"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bars_spanning_decades_use_a_log_axis() {
        let dir = temp_dir("log");
        let mut samples = Vec::new();
        for (config, scale) in [("maple", 1.0), ("btree", 1.3)] {
            for (metric, v) in [("lookup n=1000", 20.0), ("load n=1000000", 2.0e5)] {
                let mut s = sample("tree", metric, "ns/op", config, 1);
                s.value = v * scale;
                samples.push(s);
            }
        }
        let svg = plot_and_check(&samples, "tree", &dir);
        assert!(svg.contains("ns/op, log scale"));
        // Decade ticks from 10 to 1M.
        assert!(svg.contains(">\n10\n</text>") && svg.contains(">\n1M\n</text>"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_input_is_a_one_line_error() {
        let dir = temp_dir("bad");
        let samples = scaling(&["maple"], &[1, 2]);
        let e = plot_workload(&samples, "execl", &dir).unwrap_err();
        assert_eq!(e, "no samples for workload `execl`");
        let e = plot_workload(&[], "brk1", &dir).unwrap_err();
        assert!(e.contains("no samples"), "{e}");
        assert!(plot_workload(&samples, "../brk1", &dir)
            .unwrap_err()
            .contains("file name"));
        let mut nan = samples.clone();
        nan[0].value = f64::NAN;
        assert!(plot_workload(&nan, "brk1", &dir)
            .unwrap_err()
            .contains("finite"));
        let mut mixed = samples.clone();
        mixed[0].unit = "ns/op".into();
        assert!(plot_workload(&mixed, "brk1", &dir)
            .unwrap_err()
            .contains("both"));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "nothing written");
        let missing = dir.join("missing");
        let e = plot_workload(&samples, "brk1", &missing).unwrap_err();
        assert!(e.starts_with("cannot write") && !e.contains('\n'), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[cfg(feature = "png")]
    fn no_font_means_no_png_and_says_so() {
        let svg =
            line_chart_svg(&Chart::of(&scaling(&["maple"], &[1, 2]), "brk1").unwrap()).unwrap();
        let e = rasterise(&svg, &Arc::new(usvg::fontdb::Database::new())).unwrap_err();
        assert!(
            e.contains("sans-serif font") && e.contains("DejaVu Sans"),
            "{e}"
        );
    }

    #[test]
    fn points_are_harmonic_or_arithmetic_means_with_min_max() {
        let mut samples = Vec::new();
        for (rep, v) in [100.0, 300.0].into_iter().enumerate() {
            let mut rate = sample("w", "ops/s", "ops/s", "a", 2);
            rate.rep = rep;
            rate.value = v;
            let mut time = sample("w", "lat", "ns/op", "a", 2);
            time.rep = rep;
            time.value = v;
            samples.extend([rate, time]);
        }
        let data = Chart::of(&samples, "w").unwrap();
        let rate = data.points[&(0, 0)][0];
        assert_eq!(
            (rate.mean, rate.min, rate.max, rate.reps),
            (150.0, 100.0, 300.0, 2)
        );
        assert_eq!(data.points[&(1, 0)][0].mean, 200.0);
        assert!(!data.all_harmonic && data.any_harmonic);
        // A zero rate has no harmonic mean: it plots at zero.
        let zero = sample("z", "ops/s", "ops/s", "a", 1);
        let mut five = sample("z", "ops/s", "ops/s", "a", 1);
        five.value = 5.0;
        let data = Chart::of(&[zero, five], "z").unwrap();
        assert_eq!(data.points[&(0, 0)][0].mean, 0.0);
    }

    #[test]
    fn axis_numbers_and_ticks_stay_short_and_apart() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(1_250_000.0), "1.25M");
        assert_eq!(si(200_000.0), "200k");
        assert_eq!(si(12.5), "12.5");
        assert_eq!(si(0.01), "0.01");
        assert_eq!(round_ticks(9.0), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(round_ticks(1.1e6).len(), 6, "{:?}", round_ticks(1.1e6));
        let t: Vec<f64> = (1..=16).map(|x| (x as f64).log2()).collect();
        let kept = thin_ticks(&t, 0.3);
        assert!(kept.windows(2).all(|w| w[1] - w[0] >= 0.3), "{kept:?}");
        assert_eq!(kept[0], 0.0);
        assert_eq!(*kept.last().unwrap(), 4.0);
    }
}
