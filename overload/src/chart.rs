//! Line charts as SVG: panels stacked top to bottom, one line per series, on linear or
//! logarithmic axes.

use std::path::Path;

use plotters::prelude::*;

use crate::BoxError;

/// One named line.
#[derive(Debug)]
pub(crate) struct Series {
    pub(crate) name: String,
    /// `(x, y)` points in x order; a gap in the data is a missing point.
    pub(crate) points: Vec<(f64, f64)>,
}

/// An axis: its description and whether it is logarithmic.
#[derive(Clone, Debug)]
pub(crate) struct Axis {
    pub(crate) label: String,
    pub(crate) log: bool,
}

impl Axis {
    pub(crate) fn linear(label: &str) -> Axis {
        Axis {
            label: label.to_owned(),
            log: false,
        }
    }

    pub(crate) fn log(label: &str) -> Axis {
        Axis {
            label: label.to_owned(),
            log: true,
        }
    }

    /// Where `value` goes on the axis: `log10(value)` on a log axis (none unless positive).
    fn place(&self, value: f64) -> Option<f64> {
        match self.log {
            true => (value > 0.0).then(|| value.log10()),
            false => value.is_finite().then_some(value),
        }
    }

    /// The label of a placed value.
    fn tick(&self, placed: f64) -> String {
        let value = if self.log { 10f64.powf(placed) } else { placed };
        if value.abs() >= 10.0 || value == value.round() {
            format!("{value:.0}")
        } else {
            format!("{value:.1}")
        }
    }
}

/// One panel: a title, its axes and its lines.
#[derive(Debug)]
pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) x: Axis,
    pub(crate) y: Axis,
    pub(crate) series: Vec<Series>,
}

/// A line's colour, by its rank among the series (the same series keeps its colour across
/// panels).
fn colour(rank: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(214, 39, 40),
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    COLOURS[rank % COLOURS.len()]
}

/// Writes `panels` to `path` as an SVG, 900 px wide.
pub(crate) fn draw(path: &Path, panels: &[Panel]) -> Result<(), BoxError> {
    const HEIGHT: u32 = 300;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let root =
        SVGBackend::new(path, (900, HEIGHT * panels.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for (panel, area) in panels
        .iter()
        .zip(root.split_evenly((panels.len().max(1), 1)))
    {
        let placed: Vec<Vec<(f64, f64)>> = panel
            .series
            .iter()
            .map(|series| {
                series
                    .points
                    .iter()
                    .filter_map(|&(x, y)| Some((panel.x.place(x)?, panel.y.place(y)?)))
                    .collect()
            })
            .collect();
        let (x_range, y_range) = ranges(&placed, &panel.y);
        let mut chart = ChartBuilder::on(&area)
            .caption(&panel.title, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(52)
            .build_cartesian_2d(x_range, y_range)?;
        chart
            .configure_mesh()
            .x_desc(panel.x.label.as_str())
            .y_desc(panel.y.label.as_str())
            .x_label_formatter(&|x| panel.x.tick(*x))
            .y_label_formatter(&|y| panel.y.tick(*y))
            .light_line_style(WHITE)
            .draw()?;
        for (rank, (series, points)) in panel.series.iter().zip(placed).enumerate() {
            let style = colour(rank).stroke_width(2);
            chart
                .draw_series(LineSeries::new(points, style))?
                .label(series.name.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// The ranges that hold every point, with a margin above; a linear y axis starts at 0.
fn ranges(placed: &[Vec<(f64, f64)>], y: &Axis) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let points = || placed.iter().flatten();
    let (x_min, x_max) = points().fold((f64::MAX, f64::MIN), |(lo, hi), &(x, _)| {
        (lo.min(x), hi.max(x))
    });
    let (y_min, y_max) = points().fold((f64::MAX, f64::MIN), |(lo, hi), &(_, y)| {
        (lo.min(y), hi.max(y))
    });
    if x_min > x_max {
        return (0.0..1.0, 0.0..1.0);
    }
    let x_pad = ((x_max - x_min) * 0.03).max(0.01);
    let y_low = if y.log { y_min - 0.1 } else { 0.0 };
    let y_high = if y.log {
        y_max + 0.15
    } else {
        y_max * 1.15 + 1e-9
    };
    (
        x_min - x_pad..x_max + x_pad,
        y_low..y_high.max(y_low + 1e-9),
    )
}
