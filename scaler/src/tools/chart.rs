//! A small, dependency-free SVG line chart, drawn by `admit-scaler replay`.
//!
//! x values are Unix seconds, on a UTC time axis; y starts at 0 with "nice" ticks (1, 2, 5 ×
//! 10^k). A `None` y is a gap (say, a failed evaluation): it breaks the line and is marked with
//! a red × on the time axis. Non-finite values, and values beyond ±1e300, count as gaps (y) or
//! are dropped (x). The same chart always renders to the same bytes.
//!
//! ```
//! use admit_scaler::tools::chart::{Chart, Series, Style};
//!
//! let chart = Chart {
//!     title: "checkout: recommended replicas".into(),
//!     x_label: "time (UTC)".into(),
//!     y_label: "replicas".into(),
//!     series: vec![Series {
//!         name: "recommended".into(),
//!         style: Style::Step,
//!         // 22:13:20, 22:14:20 (no answer), 22:15:20 UTC on 2023-11-14
//!         points: vec![(1.7e9, Some(3.0)), (1.7e9 + 60.0, None), (1.7e9 + 120.0, Some(4.0))],
//!     }],
//! };
//! let svg = chart.render_svg();
//! assert!(svg.starts_with("<svg") && svg.contains("no answer") && svg.contains(">22:13<"));
//! ```

use std::fmt::{self, Write as _};

use super::calendar::civil_from_days;

#[cfg(test)]
mod tests;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 40.0;
/// Below the plot: tick labels and the x label, then the legend's rows.
const BOTTOM: f64 = 48.0;
const LEGEND_ROW: f64 = 18.0;
const MAX_LEGEND_ROWS: usize = 4;
/// Larger magnitudes are treated like non-finite values.
const LIMIT: f64 = 1e300;
const GAP_COLOUR: &str = "#d62728";
/// No red: red marks gaps.
const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
];
/// Time-axis steps in seconds, up to a day; longer ranges use 2, 5, 10, 20, 50… days.
const TIME_STEPS: [f64; 12] = [
    60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0,
];
/// A narrower time range (one point, say) is widened to this many seconds around its centre.
const MIN_TIME_SPAN: f64 = 300.0;

/// A line chart: a title, axis labels and the series drawn on them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    /// Above the plot; [`format_utc_range`] gives a date range for it.
    pub title: String,
    /// Under the time axis.
    pub x_label: String,
    /// Beside the y axis.
    pub y_label: String,
    /// Drawn in order, each in the next palette colour, and named in the legend.
    pub series: Vec<Series>,
}

/// One named line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The legend's label.
    pub name: String,
    /// How the points are joined.
    pub style: Style,
    /// `(Unix seconds, y)`, drawn in x order; a `None` y is a gap.
    pub points: Vec<(f64, Option<f64>)>,
}

/// How a series joins its points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Straight segments.
    #[default]
    Line,
    /// Horizontal then vertical: a value holds until the next point (or gap).
    Step,
    /// Straight dashed segments.
    Dashed,
    /// Dashed, horizontal then vertical.
    DashedStep,
}

impl Chart {
    /// The chart as a standalone 960×480 SVG document.
    #[must_use]
    pub fn render_svg(&self) -> String {
        Svg(self).to_string()
    }
}

/// `HH:MM` (UTC) of a Unix time in seconds: `1_700_000_000` is `"22:13"`.
#[must_use]
pub fn format_hh_mm(unix_secs: i64) -> String {
    let s = unix_secs.rem_euclid(86_400);
    format!("{:02}:{:02}", s / 3600, s % 3600 / 60)
}

/// A UTC range for a title: `"2023-11-14 22:13–23:59 UTC"` within a day, else
/// `"2023-11-14 22:13 – 2023-11-15 01:00 UTC"`.
#[must_use]
pub fn format_utc_range(from_secs: i64, to_secs: i64) -> String {
    let (from_day, to_day) = (from_secs.div_euclid(86_400), to_secs.div_euclid(86_400));
    let (from, to) = (format_hh_mm(from_secs), format_hh_mm(to_secs));
    if from_day == to_day {
        format!("{} {from}–{to} UTC", format_date(from_day))
    } else {
        let (a, b) = (format_date(from_day), format_date(to_day));
        format!("{a} {from} – {b} {to} UTC")
    }
}

/// `YYYY-MM-DD` of a day count since 1970-01-01.
fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Nice ticks for `[lo, hi]` (finite), and `exp` of their step `m × 10^exp`: the smallest step
/// (m ∈ {1, 2, 5}) that needs at most 7 intervals, so 5–8 ticks mostly (4 to 8 in all). The
/// first and last ticks are the axis ends.
fn nice_ticks(lo: f64, hi: f64) -> (Vec<f64>, i32) {
    let hi = if hi - lo < 1e-6 { lo + 1.0 } else { hi };
    let start = ((hi - lo) / 7.0).log10().floor() as i32 - 1;
    for exp in start..start + 4 {
        let unit = 10f64.powi(exp.abs());
        let scale = |k: f64| if exp < 0 { k / unit } else { k * unit };
        for m in [1.0, 2.0, 5.0] {
            let (first, last) = ((lo / scale(m)).floor(), (hi / scale(m)).ceil());
            if last - first <= 7.0 {
                let values = (0..=(last - first) as usize)
                    .map(|i| scale((first + i as f64) * m))
                    .collect();
                return (values, exp);
            }
        }
    }
    (vec![lo, hi], 0)
}

/// A y tick label: decimals from the step's `exp`, k/M/G for large values (by the largest
/// tick's `max`), `1.0e12` beyond.
fn y_label(v: f64, max: f64, exp: i32) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if max >= 1e12 {
        return format!("{v:.1e}");
    }
    let (div, suffix, e) = match max {
        m if m >= 1e9 => (1e9, "G", 9),
        m if m >= 1e6 => (1e6, "M", 6),
        m if m >= 1e4 => (1e3, "k", 3),
        _ => (1.0, "", 0),
    };
    format!("{:.*}{suffix}", (e - exp).max(0) as usize, v / div)
}

/// The time step: the smallest of [`TIME_STEPS`] (then 2, 5, 10… days) giving at most 8 ticks.
fn time_step(lo: f64, hi: f64) -> f64 {
    let fits = |s: f64| (hi / s).floor() - (lo / s).ceil() < 8.0 || !s.is_finite();
    let days = (0..).flat_map(|k| [2.0, 5.0, 10.0].map(|m| m * 86_400.0 * 10f64.powi(k)));
    let mut steps = TIME_STEPS.into_iter().chain(days);
    steps.find(|&s| fits(s)).unwrap_or(f64::INFINITY)
}

/// A time tick label: `HH:MM`, or `MM-DD` when the step is a day or more.
fn time_label(t: f64, step: f64) -> String {
    let secs = t.floor() as i64;
    if step >= 86_400.0 {
        let (_, m, d) = civil_from_days(secs.div_euclid(86_400));
        format!("{m:02}-{d:02}")
    } else {
        format_hh_mm(secs)
    }
}

/// Valid points in x order; bad y values become gaps, bad x values are dropped.
fn clean(points: &[(f64, Option<f64>)]) -> Vec<(f64, Option<f64>)> {
    let ok = |v: f64| v.is_finite() && v.abs() <= LIMIT;
    let mut out: Vec<_> = points
        .iter()
        .filter(|p| ok(p.0))
        .map(|&(x, y)| (x, y.filter(|&y| ok(y))))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((v.min(lo), v.max(hi))),
    })
}

/// XML text: the five special characters escaped, control characters as spaces.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// At most `n` characters, the last an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    s.chars().take(n - 1).chain(['…']).collect()
}

/// A coordinate, to 0.1 px, never NaN or infinite.
#[derive(Clone, Copy)]
struct N(f64);

impl fmt::Display for N {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = (self.0 * 10.0).round() / 10.0;
        match r {
            r if !r.is_finite() => f.write_str("0"),
            r if r == r.trunc() => write!(f, "{}", r as i64),
            r => write!(f, "{r:.1}"),
        }
    }
}

fn dash(style: Style) -> &'static str {
    match style {
        Style::Dashed | Style::DashedStep => r#" stroke-dasharray="6 4""#,
        Style::Line | Style::Step => "",
    }
}

/// A legend entry at `x` in a row: a label and its series' index (`None`: the gap marker).
type Entry = (f64, usize, String, Option<usize>);

/// Entries in rows under the plot; those beyond the last row are counted as "+N more".
fn legend(chart: &Chart, gaps: bool) -> (Vec<Entry>, Option<(f64, usize)>) {
    let names = chart.series.iter().map(|s| clip(&s.name, 48));
    let mut labels: Vec<_> = names.zip((0..).map(Some)).collect();
    if gaps {
        labels.push(("no answer".into(), None));
    }
    let (mut entries, mut x, mut row, count) = (Vec::new(), LEFT, 0, labels.len());
    for (i, (label, series)) in labels.into_iter().enumerate() {
        let w = 46.0 + 7.0 * label.chars().count() as f64;
        let last_row = row + 1 == MAX_LEGEND_ROWS;
        let reserve = if last_row && i + 1 < count { 80.0 } else { 0.0 };
        if x > LEFT && x + w + reserve > WIDTH - RIGHT {
            if last_row {
                return (entries, Some((x, count - i)));
            }
            (x, row) = (LEFT, row + 1);
        }
        entries.push((x, row, label, series));
        x += w;
    }
    (entries, None)
}

/// The plot area, under the title and above the labels and legend, and its data ranges.
struct Plot {
    bottom: f64,
    x: (f64, f64),
    y: (f64, f64),
}

impl Plot {
    fn x(&self, v: f64) -> f64 {
        LEFT + (v - self.x.0) / (self.x.1 - self.x.0) * (WIDTH - RIGHT - LEFT)
    }

    fn y(&self, v: f64) -> f64 {
        self.bottom - (v - self.y.0) / (self.y.1 - self.y.0) * (self.bottom - TOP)
    }
}

/// One series' path data (`M`/`L`, or `M`/`H`/`V` for steps; a gap starts a new `M`) and its
/// isolated points, which a path would not show.
fn path(plot: &Plot, points: &[(f64, Option<f64>)], step: bool) -> (String, Vec<(f64, f64)>) {
    let (mut d, mut dots, mut run) = (String::new(), Vec::new(), None::<(f64, f64, bool)>);
    for &(x, y) in points {
        let px = plot.x(x);
        match (y.map(|y| plot.y(y)), run) {
            (Some(py), None) => {
                let _ = write!(d, "M{} {}", N(px), N(py));
                run = Some((px, py, false));
            }
            (Some(py), Some(_)) => {
                let (h, v) = if step { ('H', 'V') } else { ('L', ' ') };
                let _ = write!(d, "{h}{}{v}{}", N(px), N(py));
                run = Some((px, py, true));
            }
            (None, Some((lx, ly, drawn))) => {
                if step && px > lx {
                    let _ = write!(d, "H{}", N(px));
                } else if !drawn {
                    dots.push((lx, ly));
                }
                run = None;
            }
            (None, None) => {}
        }
    }
    dots.extend(run.filter(|r| !r.2).map(|r| (r.0, r.1)));
    (d, dots)
}

const MIDDLE: &str = r#" text-anchor="middle""#;
const END: &str = r#" text-anchor="end""#;
const TITLE: &str = r#" text-anchor="middle" font-size="16""#;
const NOTE: &str = r##" text-anchor="middle" fill="#888""##;
const ROTATED: &str = r#" transform="rotate(-90)" text-anchor="middle""#;
const GREY: &str = r##" fill="#888""##;
const GRID: &str = "#e0e0e0";
const THICK: &str = r#" stroke-width="2""#;
const THIN: &str = r#" stroke-width="1.5""#;
/// An 8×8 × centred on the current point (relative path data).
const CROSS: &str = "m-4 -4l8 8m0 -8l-8 8";

/// Writes SVG elements.
struct Pen<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Pen<'_, '_> {
    fn text(&mut self, x: f64, y: f64, attrs: &str, body: &str) -> fmt::Result {
        let (x, y, body) = (N(x), N(y), escape(body));
        writeln!(self.0, r#"<text x="{x}" y="{y}"{attrs}>{body}</text>"#)
    }

    fn path(&mut self, d: &str, c: &str, attrs: &str) -> fmt::Result {
        writeln!(self.0, r#"<path d="{d}" fill="none" stroke="{c}"{attrs}/>"#)
    }
}

struct Svg<'a>(&'a Chart);

impl fmt::Display for Svg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let chart = self.0;
        let data: Vec<_> = chart.series.iter().map(|s| clean(&s.points)).collect();
        let all = || data.iter().flatten();
        let x = match min_max(all().map(|p| p.0)) {
            None => (0.0, MIN_TIME_SPAN),
            Some((lo, hi)) if hi - lo < MIN_TIME_SPAN => {
                let mid = lo / 2.0 + hi / 2.0;
                (mid - MIN_TIME_SPAN / 2.0, mid + MIN_TIME_SPAN / 2.0)
            }
            Some(range) => range,
        };
        let y_data = min_max(all().filter_map(|p| p.1));
        let (lo, hi) = y_data.unwrap_or((0.0, 0.0));
        let (ticks, exp) = nice_ticks(lo.min(0.0), hi.max(0.0));
        let y = (ticks[0], ticks[ticks.len() - 1]);
        let max = y.0.abs().max(y.1.abs());
        let (entries, more) = legend(chart, all().any(|p| p.1.is_none()));
        let rows = entries.last().map_or(0, |e| e.1 + 1) as f64;
        // Rows of 18 px and 8 px above them, if any.
        let bottom = HEIGHT - BOTTOM - rows.min(1.0) * 8.0 - LEGEND_ROW * rows;
        let plot = Plot { bottom, x, y };
        let right = WIDTH - RIGHT;
        let (mid, middle) = ((LEFT + right) / 2.0, (TOP + bottom) / 2.0);
        let (l, r, t, b) = (N(LEFT), N(right), N(TOP), N(bottom));

        let (w, h) = (N(WIDTH), N(HEIGHT));
        writeln!(
            f,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        )?;
        writeln!(f, r##"<rect width="100%" height="100%" fill="#fff"/>"##)?;
        let mut pen = Pen(f);
        pen.text(WIDTH / 2.0, 24.0, TITLE, &clip(&chart.title, 100))?;
        for &v in &ticks {
            let py = plot.y(v);
            pen.path(&format!("M{l} {}H{r}", N(py)), GRID, "")?;
            pen.text(LEFT - 6.0, py + 4.0, END, &y_label(v, max, exp))?;
        }
        let step = time_step(x.0, x.1);
        let first = (x.0 / step).ceil();
        let times = (0..9).map(|i| (first + f64::from(i)) * step);
        for time in times.take_while(|&t| t <= x.1) {
            let px = plot.x(time);
            pen.path(&format!("M{} {t}V{}", N(px), N(bottom + 4.0)), GRID, "")?;
            pen.text(px, bottom + 18.0, MIDDLE, &time_label(time, step))?;
        }
        pen.path(&format!("M{l} {t}V{b}H{r}"), "#333", "")?;
        pen.text(mid, bottom + 38.0, MIDDLE, &clip(&chart.x_label, 100))?;
        pen.text(-middle, 16.0, ROTATED, &clip(&chart.y_label, 60))?;
        if y_data.is_none() {
            pen.text(mid, middle, NOTE, "no data")?;
        }
        let mut marks = Vec::new();
        for (i, (series, points)) in chart.series.iter().zip(&data).enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let step = matches!(series.style, Style::Step | Style::DashedStep);
            let (d, dots) = path(&plot, points, step);
            if !d.is_empty() {
                pen.path(&d, colour, &format!("{THICK}{}", dash(series.style)))?;
            }
            for (cx, cy) in dots {
                let (x, y, c) = (N(cx), N(cy), colour);
                writeln!(pen.0, r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>"#)?;
            }
            let gaps = points.iter().filter(|p| p.1.is_none());
            marks.extend(gaps.map(|p| N(plot.x(p.0)).to_string()));
        }
        marks.sort();
        marks.dedup();
        for m in marks {
            pen.path(&format!("M{m} {b}{CROSS}"), GAP_COLOUR, THIN)?;
        }
        let row_y = |row: usize| bottom + 64.0 + LEGEND_ROW * row as f64;
        for (x, row, label, series) in &entries {
            let (x, y) = (*x, row_y(*row));
            let (sx, sy) = (N(x), N(y - 4.0));
            if let Some(i) = *series {
                let (colour, dash) = (PALETTE[i % PALETTE.len()], dash(chart.series[i].style));
                pen.path(&format!("M{sx} {sy}h24"), colour, &format!("{THICK}{dash}"))?;
            } else {
                pen.path(&format!("M{} {sy}{CROSS}", N(x + 12.0)), GAP_COLOUR, THIN)?;
            }
            pen.text(x + 30.0, y, "", label)?;
        }
        if let Some((x, n)) = more {
            pen.text(x, row_y(MAX_LEGEND_ROWS - 1), GREY, &format!("+{n} more"))?;
        }
        pen.0.write_str("</svg>\n")
    }
}
