//! SVG charts of an experiment's aggregated rows, drawn with plotters: for
//! every metric of the experiment's table one chart with a series per
//! scheme, the mean over seeds with the seeds' min-max as a whisker, and the
//! paper's own value beside ours wherever the paper gives one
//! ([`super::paper`]), as a hollow black diamond labelled "paper". The chart
//! is a line chart against the swept parameter when the groups are the
//! values of one parameter (`p=2%`, `window=8MB`, RCP's beta), grouped bars
//! otherwise. Where the table has percentiles of one quantity (`dtwait_p50_ms`,
//! `dtwait_p95_ms`, ...), which the papers plot as CDFs (Figs. 23(b), 26(b)),
//! one chart per group draws them as points of the CDF, ours and the
//! paper's. For the experiments that trace a cost/latency frontier
//! ([`super::artplus::FRONTIERS`]), one scatter chart per group and latency
//! axis, each scheme a marker named in the legend.
//!
//! Why plotters with an embedded font: plotters lays out axes, ticks and
//! legends with real text metrics, and the font (DejaVu Sans, committed
//! under `crates/lab/fonts/` with its licence) comes with the binary, so a
//! bare CI machine lays out the same charts as a desktop. The SVG leaves the
//! glyphs to the viewer (`font-family="sans-serif"`); DejaVu Sans is wider
//! than the usual sans-serif faces, so text sized with it fits. Legends sit
//! beside the plot, one entry per line, and group names that do not fit
//! under their cluster are numbered with a key below the chart, so no two
//! labels overlap (checked by a test over every chart of the committed
//! report). Output is deterministic text: same rows, same bytes.

use std::fmt;
use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use super::common::{find, groups, schemes, Experiment, Stat};
use super::paper::{paper_mark, PaperMark};
use super::ExperimentResult;

/// The embedded font, used for every text metric.
const FONT: &[u8] = include_bytes!("../../fonts/DejaVuSans.ttf");
/// The family name the font is registered under (and the SVG names).
const FAMILY: &str = "sans-serif";

/// Width of the plot (y labels included), pixels; the legend comes beside it.
const PLOT_W: u32 = 600;
/// Height of the plot (x labels included), pixels.
const PLOT_H: u32 = 340;
/// Outer margin, pixels.
const MARGIN: u32 = 10;
/// Title, axis and legend text size, pixels.
const TEXT: f64 = 15.0;
/// Caption (notes under the chart) text size, pixels.
const SMALL: f64 = 13.0;
/// Line height of legend entries and caption lines, pixels.
const LINE: u32 = 18;

/// Series colours, one per scheme in order: the colour-blind-safe Okabe-Ito
/// palette, then Paul Tol's muted colours for schemes beyond eight.
const COLOURS: &[RGBColor] = &[
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0xF0, 0xE4, 0x42),
    RGBColor(0x55, 0x55, 0x55),
    RGBColor(0x88, 0x22, 0x55),
    RGBColor(0x44, 0xAA, 0x99),
    RGBColor(0x99, 0x99, 0x33),
    RGBColor(0xAA, 0x44, 0x99),
];

/// The legend's name of the paper's values.
pub const PAPER_LABEL: &str = "paper";

/// Why a chart could not be drawn (the embedded font did not load, or
/// plotters refused to draw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartError(pub String);

impl fmt::Display for ChartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot draw a chart: {}", self.0)
    }
}

impl std::error::Error for ChartError {}

/// Registers the embedded font with plotters once per process.
fn font_ready() -> Result<(), ChartError> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded font DejaVuSans.ttf is not a valid font".to_string())
        })
        .clone()
        .map_err(ChartError)
}

/// Any plotters error as a [`ChartError`].
fn drawn<T, E: fmt::Debug>(r: Result<T, E>) -> Result<T, ChartError> {
    r.map_err(|e| ChartError(format!("{e:?}")))
}

/// One chart of a metric: `values[g][s]` is scheme `s` in group `g`.
///
/// Exists as plain data so the layout can be tested without an experiment.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Title line.
    pub title: String,
    /// The y axis title (the metric's name).
    pub y_label: String,
    /// What the metric means, printed under the chart.
    pub note: String,
    /// Cluster labels (or swept values), left to right.
    pub groups: Vec<String>,
    /// Series (schemes), in legend order.
    pub series: Vec<String>,
    /// `values[group][series]`; `None` where every seed failed or the case
    /// does not exist.
    pub values: Vec<Vec<Option<Stat>>>,
    /// The paper's value (or range) per `[group][series]`, where it gives
    /// one.
    pub paper: Vec<Vec<Option<PaperMark>>>,
}

/// The charts of one experiment, as `(file name, SVG text)`: one per table
/// metric, named `NAME_METRIC.svg`, then the frontier charts.
pub fn experiment_charts(
    exp: &Experiment,
    r: &ExperimentResult,
) -> Result<Vec<(String, String)>, ChartError> {
    let groups = groups(&r.rows);
    let series = schemes(&r.rows);
    let mut out = Vec::new();
    for metric in exp.table_metrics {
        let values = groups
            .iter()
            .map(|g| {
                series
                    .iter()
                    .map(|s| find(&r.rows, g, s).and_then(|row| row.metrics.get(*metric).copied()))
                    .collect()
            })
            .collect();
        let paper = groups
            .iter()
            .map(|g| {
                series
                    .iter()
                    .map(|s| paper_mark(&r.name, &r.rows, g, s, metric))
                    .collect()
            })
            .collect();
        let note = super::METRICS
            .iter()
            .find(|(m, _)| m == metric)
            .map_or(String::new(), |(m, d)| format!("{m}: {d}"));
        let chart = BarChart {
            title: format!("{}: {metric}", r.name),
            y_label: metric.to_string(),
            note,
            groups: groups.clone(),
            series: series.clone(),
            values,
            paper,
        };
        out.push((chart_file(&r.name, metric), render(&chart)?));
    }
    for cdf in cdf_charts(exp, r) {
        let svg = render_cdf(&cdf.chart)?;
        out.push((cdf.file, svg));
    }
    out.extend(frontier_charts(exp, r)?);
    Ok(out)
}

/// One percentile chart of an experiment, with where it goes.
#[derive(Clone, Debug)]
pub struct CdfOf {
    /// Its file name (report.md links it).
    pub file: String,
    /// The group it shows.
    pub group: String,
    /// The metric family (`dtwait`, `rpc_fct`).
    pub family: String,
    /// The chart.
    pub chart: CdfChart,
}

/// The percentile families among `metrics`: `PREFIX_pNN_ms` metrics sharing
/// a prefix, at least two, as (prefix, [(NN / 100, metric)]) in order.
pub fn percentile_families(metrics: &[&'static str]) -> Vec<(String, Vec<(f64, &'static str)>)> {
    let mut out: Vec<(String, Vec<(f64, &'static str)>)> = Vec::new();
    for m in metrics {
        let Some(stem) = m.strip_suffix("_ms") else {
            continue;
        };
        let Some(i) = stem.rfind("_p") else {
            continue;
        };
        let Ok(p) = stem[i + 2..].parse::<u8>() else {
            continue;
        };
        let prefix = stem[..i].to_string();
        let q = f64::from(p) / 100.0;
        match out.iter_mut().find(|(f, _)| *f == prefix) {
            Some((_, v)) => v.push((q, m)),
            None => out.push((prefix, vec![(q, m)])),
        }
    }
    out.retain(|(_, v)| v.len() >= 2);
    out
}

/// The percentile charts of `exp`: for every family of
/// [`percentile_families`] among its table metrics and every group with
/// data, the family's percentiles as points of a CDF (value against share),
/// a line per scheme, the paper's percentiles beside them. Exists because
/// the papers plot these as CDFs (Figs. 23(b) and 26(b)), and the report
/// has three or so points of each.
pub fn cdf_charts(exp: &Experiment, r: &ExperimentResult) -> Vec<CdfOf> {
    let mut out = Vec::new();
    let groups = groups(&r.rows);
    let series = schemes(&r.rows);
    for (family, members) in percentile_families(exp.table_metrics) {
        for (gi, g) in groups.iter().enumerate() {
            let mut lines = Vec::new();
            let mut paper = Vec::new();
            for s in &series {
                let pts: Vec<(f64, f64)> = members
                    .iter()
                    .filter_map(|(q, m)| {
                        let v = find(&r.rows, g, s)?.metrics.get(*m)?.mean;
                        Some((v, *q))
                    })
                    .collect();
                if !pts.is_empty() {
                    lines.push((s.clone(), pts));
                }
                let pp: Vec<(f64, f64)> = members
                    .iter()
                    .filter_map(|(q, m)| {
                        let p = paper_mark(&r.name, &r.rows, g, s, m)?;
                        // A percentile is drawn as a point of the CDF; a
                        // range has no single point.
                        (p.lo == p.hi).then_some((p.lo, *q))
                    })
                    .collect();
                if !pp.is_empty() {
                    paper.push((s.clone(), pp));
                }
            }
            if lines.is_empty() {
                continue;
            }
            let pcts: Vec<String> = members
                .iter()
                .map(|(q, _)| format!("p{}", (q * 100.0).round()))
                .collect();
            out.push(CdfOf {
                file: format!("{}_cdf{}_{family}.svg", r.name, gi + 1),
                group: g.clone(),
                family: family.clone(),
                chart: CdfChart {
                    title: format!("{}: {family} percentiles, {g}", r.name),
                    x_label: format!("{family} (ms)"),
                    note: format!(
                        "points: the {} over seeds' means, as points of the CDF",
                        pcts.join(", ")
                    ),
                    lines,
                    paper,
                },
            });
        }
    }
    out
}

/// A partial CDF: per series, (value, share of data at or below it).
#[derive(Clone, Debug)]
pub struct CdfChart {
    /// Title line.
    pub title: String,
    /// What x measures (with its unit).
    pub x_label: String,
    /// What the points are, printed under the chart.
    pub note: String,
    /// (scheme, points) per line.
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
    /// (scheme, points) the paper gives.
    pub paper: Vec<(String, Vec<(f64, f64)>)>,
}

/// The partial CDF as a standalone SVG document: a line per scheme through
/// its percentiles, the paper's as hollow diamonds joined in the scheme's
/// colour.
pub fn render_cdf(c: &CdfChart) -> Result<String, ChartError> {
    font_ready()?;
    let colour_of = |name: &str| {
        colour(
            c.lines
                .iter()
                .position(|(s, _)| s == name)
                .unwrap_or(c.lines.len()),
        )
    };
    let mut legend: Vec<(String, Symbol)> = c
        .lines
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (s.clone(), Symbol::Line(colour(i))))
        .collect();
    for (s, _) in &c.paper {
        legend.push((format!("{PAPER_LABEL} ({s})"), Symbol::Paper));
    }
    let caption = vec![c.note.clone()];
    Frame::new(&c.title, legend, &caption).render(|root, plot| {
        let (x_lo, x_hi) = y_range(
            c.lines
                .iter()
                .chain(&c.paper)
                .flat_map(|(_, p)| p.iter().map(|(v, _)| *v)),
        );
        let mut chart = drawn(
            ChartBuilder::on(plot)
                .margin_right(16)
                .margin_top(8)
                .x_label_area_size(2 * TEXT as u32 + 16)
                .y_label_area_size(y_area_width(0.0, 1.0))
                .build_cartesian_2d(x_lo..x_hi, 0.0..1.0),
        )?;
        numeric_axes(&mut chart, &c.x_label, "share of data at or below")?;
        for (i, (_, pts)) in c.lines.iter().enumerate() {
            drawn(chart.draw_series(LineSeries::new(
                pts.iter().copied(),
                colour(i).stroke_width(2),
            )))?;
            drawn(chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, colour(i).filled()))))?;
        }
        for (s, pts) in &c.paper {
            drawn(chart.draw_series(LineSeries::new(
                pts.iter().copied(),
                colour_of(s).stroke_width(1),
            )))?;
            for p in pts {
                diamond(root, chart.backend_coord(p))?;
            }
        }
        Ok(())
    })
}

/// The frontier charts of `exp` (none unless it is one of
/// [`super::artplus::FRONTIERS`]): per group and per y axis, a point per
/// scheme at (mean x, mean y).
fn frontier_charts(
    exp: &Experiment,
    r: &ExperimentResult,
) -> Result<Vec<(String, String)>, ChartError> {
    let Some((x, ys)) = super::artplus::frontier_axes(exp.name) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (gi, g) in groups(&r.rows).iter().enumerate() {
        for y in ys {
            let points = r
                .rows
                .iter()
                .filter(|row| row.group == *g)
                .filter_map(|row| {
                    let px = row.metrics.get(x)?.mean;
                    let py = row.metrics.get(*y)?.mean;
                    Some((row.scheme.clone(), px, py))
                })
                .collect();
            let chart = Scatter {
                title: format!("{g}: {y} against {x}"),
                x_label: x.to_string(),
                y_label: y.to_string(),
                points,
            };
            out.push((frontier_file(&r.name, gi, y), render_scatter(&chart)?));
        }
    }
    Ok(out)
}

/// The file name of the frontier chart of group number `group` (from 0, in
/// the rows' order) against `y` (report.md links it).
pub fn frontier_file(experiment: &str, group: usize, y: &str) -> String {
    format!("{experiment}_frontier{}_{y}.svg", group + 1)
}

/// The file name of `experiment`'s chart of `metric` (report.md links it).
pub fn chart_file(experiment: &str, metric: &str) -> String {
    format!("{experiment}_{metric}.svg")
}

/// A scatter chart: one point per scheme, named in the legend.
#[derive(Clone, Debug)]
pub struct Scatter {
    /// Title line.
    pub title: String,
    /// What x measures.
    pub x_label: String,
    /// What y measures.
    pub y_label: String,
    /// (label, x, y) per point.
    pub points: Vec<(String, f64, f64)>,
}

/// A tick label: integers as integers (`0`, `2`, `4000`), other values
/// with at most four decimals and no trailing zeros (`0.25`).
pub fn tick(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if (v - v.round()).abs() <= 1e-9 * v.abs().max(1.0) {
        let r = v.round();
        return if r == 0.0 {
            "0".into()
        } else {
            format!("{r:.0}")
        };
    }
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// The groups as values of one swept parameter: `(axis title, x values)`
/// when every group is `[words ]KEY=NUMBER[UNIT]` with the same words, key
/// and unit (`p=2%`, `mean p=5%`, `window=8MB`), or a bare number (RCP's
/// beta), at least three distinct values in increasing order.
pub fn sweep_axis(groups: &[String]) -> Option<(String, Vec<f64>)> {
    if groups.len() < 3 {
        return None;
    }
    let mut head: Option<(String, String)> = None;
    let mut xs = Vec::new();
    for g in groups {
        let (prefix, rest) = match g.rfind('=') {
            Some(i) => (g[..i].to_string(), &g[i + 1..]),
            None => (String::new(), g.as_str()),
        };
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .unwrap_or(rest.len());
        let x: f64 = rest[..end].parse().ok()?;
        let unit = rest[end..].to_string();
        if unit.contains(char::is_whitespace) {
            return None;
        }
        match &head {
            None => head = Some((prefix, unit)),
            Some(h) if *h == (prefix.clone(), unit.clone()) => {}
            Some(_) => return None,
        }
        if xs.last().is_some_and(|last| x <= *last) {
            return None;
        }
        xs.push(x);
    }
    let (prefix, unit) = head?;
    let name = if prefix.is_empty() {
        "beta".to_string()
    } else {
        prefix
    };
    let title = if unit.is_empty() {
        name
    } else {
        format!("{name} ({unit})")
    };
    Some((title, xs))
}

/// The text style of size `px`.
fn style(px: f64) -> TextStyle<'static> {
    TextStyle::from((FAMILY, px).into_font())
}

/// The width of `text` at size `px`, by the embedded font's metrics.
fn text_width(text: &str, px: f64) -> u32 {
    style(px)
        .font
        .box_size(text)
        .map_or((text.chars().count() as f64 * px) as u32, |(w, _)| w)
}

/// `text` broken at spaces into lines no wider than `width` at size `px`
/// (a word wider than the line keeps a line of its own), with a fifth of
/// the width to spare for a viewer's font wider than the layout's.
fn wrap(text: &str, px: f64, width: u32) -> Vec<String> {
    let width = width * 4 / 5;
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if text_width(&candidate, px) <= width || line.is_empty() {
            line = candidate;
        } else {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A legend entry's symbol.
#[derive(Clone, Copy)]
enum Symbol {
    /// A filled square in the colour (bars).
    Square(RGBColor),
    /// A line with a dot (lines).
    Line(RGBColor),
    /// A marker of the given shape number (scatter).
    Marker(RGBColor, usize),
    /// The paper's hollow diamond.
    Paper,
}

/// The width the legend of `entries` needs, with a fifth to spare for a
/// viewer's font wider than the layout's (as [`wrap`]).
fn legend_width(entries: &[(String, Symbol)]) -> u32 {
    entries
        .iter()
        .map(|(t, _)| text_width(t, TEXT) * 5 / 4 + 30)
        .max()
        .unwrap_or(0)
}

/// Draws the legend top-down in `area`, one entry per line.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[(String, Symbol)],
) -> Result<(), ChartError> {
    for (i, (text, symbol)) in entries.iter().enumerate() {
        let y = 8 + LINE as i32 * i as i32;
        let c = (8, y);
        match *symbol {
            Symbol::Square(colour) => drawn(area.draw(&Rectangle::new(
                [(c.0 - 6, c.1 - 6), (c.0 + 6, c.1 + 6)],
                colour.filled(),
            )))?,
            Symbol::Line(colour) => {
                drawn(area.draw(&PathElement::new(
                    vec![(c.0 - 8, c.1), (c.0 + 8, c.1)],
                    colour.stroke_width(2),
                )))?;
                drawn(area.draw(&Circle::new(c, 3, colour.filled())))?;
            }
            Symbol::Marker(colour, shape) => marker(area, c, colour, shape)?,
            Symbol::Paper => diamond(area, c)?,
        }
        drawn(area.draw(&Text::new(
            text.clone(),
            (22, y),
            style(TEXT).pos(Pos::new(HPos::Left, VPos::Center)),
        )))?;
    }
    Ok(())
}

/// The paper's value `p` at `x` of `chart`: a hollow diamond, or for a
/// range two joined by a black line.
fn paper_mark_at(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    x: f64,
    p: &PaperMark,
) -> Result<(), ChartError> {
    if p.lo < p.hi {
        let (a, b) = (
            chart.backend_coord(&(x, p.lo)),
            chart.backend_coord(&(x, p.hi)),
        );
        drawn(root.draw(&PathElement::new(vec![a, b], BLACK.stroke_width(2))))?;
        diamond(root, a)?;
        diamond(root, b)
    } else {
        diamond(root, chart.backend_coord(&(x, p.lo)))
    }
}

/// The paper's hollow black diamond centred on `c` (pixels of `area`).
fn diamond<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: (i32, i32),
) -> Result<(), ChartError> {
    let (x, y) = c;
    drawn(area.draw(&Polygon::new(
        vec![(x, y - 7), (x + 7, y), (x, y + 7), (x - 7, y)],
        BLACK.filled(),
    )))?;
    drawn(area.draw(&Polygon::new(
        vec![(x, y - 4), (x + 4, y), (x, y + 4), (x - 4, y)],
        WHITE.filled(),
    )))
}

/// A scatter marker: a disc, square or triangle by `shape`, so that schemes
/// sharing a colour still differ.
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: (i32, i32),
    colour: RGBColor,
    shape: usize,
) -> Result<(), ChartError> {
    let (x, y) = c;
    match shape % 3 {
        0 => drawn(area.draw(&Circle::new(c, 5, colour.filled()))),
        1 => drawn(area.draw(&Rectangle::new(
            [(x - 5, y - 5), (x + 5, y + 5)],
            colour.filled(),
        ))),
        _ => drawn(area.draw(&Polygon::new(
            vec![(x, y - 6), (x + 6, y + 5), (x - 6, y + 5)],
            colour.filled(),
        ))),
    }
}

/// Colour of series `i`.
fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// The y range covering `values` (and 0), with a little headroom.
fn y_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi - lo <= 0.0 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.06;
    (if lo < 0.0 { lo - pad } else { lo }, hi + pad)
}

/// The width of the y axis's tick labels and title for the range.
fn y_area_width(lo: f64, hi: f64) -> u32 {
    let widest = (0..=10)
        .map(|i| tick(lo + (hi - lo) * f64::from(i) / 10.0))
        .chain([tick(lo), tick(hi)])
        .map(|t| text_width(&t, TEXT) + 4)
        .max()
        .unwrap_or(20);
    // Ticks are at most four decimals; allow for that, then the title.
    widest.max(text_width("0.0000", TEXT)) + 10 + 2 * TEXT as u32
}

/// Draws the axes of a chart with numbers on both (lines, CDFs, scatter):
/// their titles, ticks as [`tick`] writes them, the charts' text style.
fn numeric_axes(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    x_desc: &str,
    y_desc: &str,
) -> Result<(), ChartError> {
    drawn(
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .label_style(style(TEXT))
            .axis_desc_style(style(TEXT))
            .light_line_style(WHITE)
            .draw(),
    )
}

/// A drawing area of an SVG chart.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The layout every chart shares: the title on top, the plot on the left,
/// the legend beside it, then caption lines under the plot.
struct Frame {
    width: u32,
    height: u32,
    title: Vec<String>,
    caption: Vec<String>,
    legend: Vec<(String, Symbol)>,
}

impl Frame {
    fn new(title: &str, legend: Vec<(String, Symbol)>, caption: &[String]) -> Frame {
        let width = PLOT_W + legend_width(&legend) + 3 * MARGIN;
        let title = wrap(title, TEXT + 2.0, width - 2 * MARGIN);
        let caption = caption
            .iter()
            .flat_map(|c| wrap(c, SMALL, width - 2 * MARGIN))
            .collect::<Vec<_>>();
        let legend_h = LINE * legend.len() as u32 + 8;
        let height = MARGIN
            + LINE * title.len() as u32
            + 6
            + PLOT_H.max(legend_h)
            + 6
            + (SMALL as u32 + 4) * caption.len() as u32
            + MARGIN;
        Frame {
            width,
            height,
            title,
            caption,
            legend,
        }
    }

    /// A new SVG document with this frame (title, legend, caption), the
    /// chart drawn in it by `chart` (given the document's area and the
    /// plot's): the one place every chart type is put on a page.
    fn render(
        &self,
        chart: impl FnOnce(&Area<'_>, &Area<'_>) -> Result<(), ChartError>,
    ) -> Result<String, ChartError> {
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (self.width, self.height)).into_drawing_area();
            let plot = self.draw(&root)?;
            chart(&root, &plot)?;
            drawn(root.present())?;
        }
        Ok(svg)
    }

    /// Draws title, legend and caption on `root`; returns the plot's area.
    fn draw<'a>(&self, root: &Area<'a>) -> Result<Area<'a>, ChartError> {
        drawn(root.fill(&WHITE))?;
        let mut y = MARGIN as i32;
        for line in &self.title {
            drawn(root.draw(&Text::new(
                line.clone(),
                (MARGIN as i32, y),
                style(TEXT + 2.0).pos(Pos::new(HPos::Left, VPos::Top)),
            )))?;
            y += LINE as i32;
        }
        y += 6;
        let top = y as u32;
        let plot = root.clone().shrink((MARGIN, top), (PLOT_W, PLOT_H));
        let legend = root.clone().shrink(
            (MARGIN + PLOT_W + MARGIN, top + 10),
            (
                legend_width(&self.legend),
                LINE * self.legend.len() as u32 + 8,
            ),
        );
        draw_legend(&legend, &self.legend)?;
        let legend_h = LINE * self.legend.len() as u32 + 8;
        let mut cy = (top + PLOT_H.max(legend_h) + 6) as i32;
        for line in &self.caption {
            drawn(root.draw(&Text::new(
                line.clone(),
                (MARGIN as i32, cy),
                style(SMALL).pos(Pos::new(HPos::Left, VPos::Top)),
            )))?;
            cy += SMALL as i32 + 4;
        }
        Ok(plot)
    }
}

/// The chart of one metric as a standalone SVG document: lines against the
/// swept parameter when [`sweep_axis`] finds one, grouped bars otherwise.
pub fn render(c: &BarChart) -> Result<String, ChartError> {
    font_ready()?;
    let paper_at = |g: usize, s: usize| {
        c.paper
            .get(g)
            .and_then(|r| r.get(s))
            .and_then(Option::as_ref)
    };
    let value_at = |g: usize, s: usize| c.values.get(g).and_then(|r| r.get(s)).copied().flatten();
    let has_paper =
        (0..c.groups.len()).any(|g| (0..c.series.len()).any(|s| paper_at(g, s).is_some()));
    let has_range = c.paper.iter().flatten().flatten().any(|p| p.lo < p.hi);
    let sweep = sweep_axis(&c.groups);
    let mut legend: Vec<(String, Symbol)> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let sym = if sweep.is_some() {
                Symbol::Line(colour(i))
            } else {
                Symbol::Square(colour(i))
            };
            (s.clone(), sym)
        })
        .collect();
    if has_paper {
        legend.push((PAPER_LABEL.to_string(), Symbol::Paper));
    }
    let mut caption = vec![c.note.clone()];
    caption.push(format!(
        "{}: mean over seeds; whiskers: min-max over seeds{}",
        if sweep.is_some() { "points" } else { "bars" },
        match (has_paper, has_range) {
            (true, true) => "; hollow diamonds: the paper's values (two joined: a range)",
            (true, false) => "; hollow diamonds: the paper's values",
            _ => "",
        }
    ));
    // A paper value stated as a change against another scheme is drawn
    // from our value of that scheme: say how, once per rule.
    let mut bases: Vec<&str> = Vec::new();
    for b in c
        .paper
        .iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.basis.as_deref())
    {
        if !bases.contains(&b) {
            bases.push(b);
        }
    }
    if !bases.is_empty() {
        caption.push(format!(
            "the paper states these as changes against another scheme, drawn from our mean of it: {}",
            bases.join("; ")
        ));
    }
    // A group where no scheme has data is named (and marked in the plot);
    // a missing bar within a group shows as a gap.
    let empty: Vec<&str> = c
        .groups
        .iter()
        .enumerate()
        .filter(|(g, _)| (0..c.series.len()).all(|s| value_at(*g, s).is_none()))
        .map(|(_, name)| name.as_str())
        .collect();
    if !empty.is_empty() {
        caption.push(format!(
            "no data (no run succeeded, or none was run): {}",
            empty.join("; ")
        ));
    }
    // Bar charts: group names under their clusters when they fit, else
    // numbers with a key in the caption.
    let slot = (PLOT_W - 100) / c.groups.len().max(1) as u32;
    let group_lines: Vec<Vec<String>> = c.groups.iter().map(|g| wrap(g, TEXT, slot - 6)).collect();
    let keyed = sweep.is_none()
        && (group_lines
            .iter()
            .flatten()
            .any(|l| text_width(l, TEXT) > slot - 6)
            || group_lines.iter().any(|l| l.len() > 3));
    if keyed {
        for (i, g) in c.groups.iter().enumerate() {
            caption.push(format!("{}: {g}", i + 1));
        }
    }
    Frame::new(&c.title, legend, &caption).render(|root, plot| {
        let (lo, hi) = y_range(
            c.values
                .iter()
                .flatten()
                .flatten()
                .flat_map(|s| [s.min, s.max, s.mean])
                .chain(
                    c.paper
                        .iter()
                        .flatten()
                        .flatten()
                        .flat_map(|p| [p.lo, p.hi]),
                ),
        );
        let y_area = y_area_width(lo, hi);
        match &sweep {
            Some((x_title, xs)) => {
                let (x0, x1) = (xs[0], xs[xs.len() - 1]);
                let pad = (x1 - x0) * 0.05;
                let mut chart = drawn(
                    ChartBuilder::on(plot)
                        .margin_right(12)
                        .margin_top(8)
                        .x_label_area_size(2 * TEXT as u32 + 16)
                        .y_label_area_size(y_area)
                        .build_cartesian_2d(x0 - pad..x1 + pad, lo..hi),
                )?;
                numeric_axes(&mut chart, x_title, &c.y_label)?;
                for s in 0..c.series.len() {
                    let col = colour(s);
                    let pts: Vec<(f64, Stat)> = xs
                        .iter()
                        .enumerate()
                        .filter_map(|(g, x)| value_at(g, s).map(|v| (*x, v)))
                        .collect();
                    drawn(chart.draw_series(LineSeries::new(
                        pts.iter().map(|(x, v)| (*x, v.mean)),
                        col.stroke_width(2),
                    )))?;
                    drawn(
                        chart.draw_series(
                            pts.iter()
                                .map(|(x, v)| Circle::new((*x, v.mean), 3, col.filled())),
                        ),
                    )?;
                    drawn(
                        chart.draw_series(pts.iter().filter(|(_, v)| v.min < v.max).map(
                            |(x, v)| {
                                PathElement::new(
                                    vec![(*x, v.min), (*x, v.max)],
                                    col.stroke_width(1),
                                )
                            },
                        )),
                    )?;
                }
                for (g, x) in xs.iter().enumerate() {
                    for s in 0..c.series.len() {
                        if let Some(p) = paper_at(g, s) {
                            paper_mark_at(root, &chart, *x, p)?;
                        }
                    }
                }
            }
            None => {
                let n = c.groups.len().max(1);
                let label_lines = if keyed {
                    1
                } else {
                    group_lines.iter().map(Vec::len).max().unwrap_or(1)
                };
                let mut chart = drawn(
                    ChartBuilder::on(plot)
                        .margin_right(12)
                        .margin_top(8)
                        .x_label_area_size(LINE * label_lines as u32 + 10)
                        .y_label_area_size(y_area)
                        .build_cartesian_2d(0.0..n as f64, lo..hi),
                )?;
                drawn(
                    chart
                        .configure_mesh()
                        .disable_x_mesh()
                        .x_labels(0)
                        .y_desc(c.y_label.as_str())
                        .y_label_formatter(&|v| tick(*v))
                        .label_style(style(TEXT))
                        .axis_desc_style(style(TEXT))
                        .light_line_style(WHITE)
                        .draw(),
                )?;
                let ns = c.series.len().max(1) as f64;
                let w = 0.8 / ns;
                for (g, names) in group_lines.iter().enumerate() {
                    for s in 0..c.series.len() {
                        let x0 = g as f64 + 0.1 + w * s as f64;
                        let (xa, xb, xc) = (x0 + w * 0.05, x0 + w * 0.95, x0 + w * 0.5);
                        if let Some(v) = value_at(g, s) {
                            let (ya, yb) = (v.mean.min(0.0), v.mean.max(0.0));
                            drawn(chart.draw_series(std::iter::once(Rectangle::new(
                                [(xa, ya), (xb, yb)],
                                colour(s).filled(),
                            ))))?;
                            if v.min < v.max {
                                drawn(chart.draw_series(std::iter::once(PathElement::new(
                                    vec![(xc, v.min), (xc, v.max)],
                                    BLACK.stroke_width(1),
                                ))))?;
                            }
                        }
                        if let Some(p) = paper_at(g, s) {
                            paper_mark_at(root, &chart, xc, p)?;
                        }
                    }
                    // Labels under the cluster, or the cluster's number.
                    let (px, py) = chart.backend_coord(&(g as f64 + 0.5, lo));
                    let lines = if keyed {
                        vec![(g + 1).to_string()]
                    } else {
                        names.clone()
                    };
                    for (i, line) in lines.iter().enumerate() {
                        drawn(root.draw(&Text::new(
                            line.clone(),
                            (px, py + 6 + LINE as i32 * i as i32),
                            style(TEXT).pos(Pos::new(HPos::Center, VPos::Top)),
                        )))?;
                    }
                    if (0..c.series.len()).all(|s| value_at(g, s).is_none()) {
                        let (mx, my) = chart.backend_coord(&(g as f64 + 0.5, (lo + hi) / 2.0));
                        drawn(root.draw(&Text::new(
                            "no data",
                            (mx, my),
                            style(SMALL).pos(Pos::new(HPos::Center, VPos::Center)),
                        )))?;
                    }
                }
            }
        }
        Ok(())
    })
}

/// The scatter chart as a standalone SVG document: both axes from 0, each
/// scheme a marker (colour and shape) named in the legend.
pub fn render_scatter(c: &Scatter) -> Result<String, ChartError> {
    font_ready()?;
    let legend: Vec<(String, Symbol)> = c
        .points
        .iter()
        .enumerate()
        .map(|(i, (label, _, _))| {
            (
                label.clone(),
                Symbol::Marker(colour(i), i / COLOURS.len() + i),
            )
        })
        .collect();
    let caption = vec!["points: means over seeds; lower and further left is better".to_string()];
    Frame::new(&c.title, legend, &caption).render(|root, plot| {
        let finite = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
        let (_, x_hi) = y_range(c.points.iter().map(|p| finite(p.1)));
        let (_, y_hi) = y_range(c.points.iter().map(|p| finite(p.2)));
        let mut chart = drawn(
            ChartBuilder::on(plot)
                .margin_right(16)
                .margin_top(8)
                .x_label_area_size(2 * TEXT as u32 + 16)
                .y_label_area_size(y_area_width(0.0, y_hi))
                .build_cartesian_2d(0.0..x_hi, 0.0..y_hi),
        )?;
        numeric_axes(&mut chart, &c.x_label, &c.y_label)?;
        for (i, (_, x, y)) in c.points.iter().enumerate() {
            let at = chart.backend_coord(&(finite(*x), finite(*y)));
            marker(root, at, colour(i), i / COLOURS.len() + i)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of `svg`, trimmed (plotters writes each on its own line).
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|c| c.split_once('>'))
            .map(|(_, rest)| {
                rest.split("</text>")
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .collect()
    }

    fn has(svg: &str, text: &str) -> usize {
        texts(svg).iter().filter(|t| *t == text).count()
    }

    fn point(v: f64) -> PaperMark {
        PaperMark {
            lo: v,
            hi: v,
            basis: None,
        }
    }

    fn stat(mean: f64, min: f64, max: f64) -> Option<Stat> {
        Some(Stat {
            mean,
            sd: 0.0,
            min,
            max,
        })
    }

    fn chart(
        groups: &[&str],
        values: Vec<Vec<Option<Stat>>>,
        paper: Vec<Vec<Option<PaperMark>>>,
    ) -> BarChart {
        BarChart {
            title: "fig: redundancy".into(),
            y_label: "redundancy".into(),
            note: "redundancy: cost".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            series: vec!["or3".into(), "art".into()],
            values,
            paper,
        }
    }

    #[test]
    fn ticks_write_integers_as_integers() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(-0.0), "0");
        assert_eq!(tick(4000.0), "4000");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.025), "0.025");
        assert_eq!(tick(-0.2), "-0.2");
        assert_eq!(tick(0.1 + 0.2), "0.3");
        assert_eq!(tick(f64::NAN), "");
    }

    #[test]
    fn swept_groups_become_an_x_axis() {
        let s = |v: &[&str]| v.iter().map(|g| g.to_string()).collect::<Vec<_>>();
        assert_eq!(
            sweep_axis(&s(&["p=2%", "p=5%", "p=8%", "p=10%"])),
            Some(("p (%)".to_string(), vec![2.0, 5.0, 8.0, 10.0]))
        );
        assert_eq!(
            sweep_axis(&s(&["mean p=1%", "mean p=3%", "mean p=10%"])),
            Some(("mean p (%)".to_string(), vec![1.0, 3.0, 10.0]))
        );
        assert_eq!(
            sweep_axis(&s(&["0.0", "0.5", "1.0"])),
            Some(("beta".to_string(), vec![0.0, 0.5, 1.0]))
        );
        // Mixed settings, too few values, or not increasing: bars.
        assert_eq!(
            sweep_axis(&s(&["rpc p=1%", "rpc p=3%", "3MB file p=2%"])),
            None
        );
        assert_eq!(sweep_axis(&s(&["p=2%", "p=5%"])), None);
        assert_eq!(sweep_axis(&s(&["p=5%", "p=2%", "p=8%"])), None);
        assert_eq!(sweep_axis(&s(&["default", "loss=3%", "loss=10%"])), None);
    }

    #[test]
    fn paper_values_are_drawn_and_named_in_the_legend() {
        let with = chart(
            &["size=1MB", "size=200KB"],
            vec![
                vec![stat(100.0, 80.0, 100.0), stat(50.0, 50.0, 50.0)],
                vec![stat(10.0, 5.0, 15.0), stat(9.0, 9.0, 9.0)],
            ],
            vec![vec![Some(point(90.0)), None], vec![None, None]],
        );
        let svg = render(&with).expect("drawn");
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{svg}"
        );
        assert_eq!(has(&svg, PAPER_LABEL), 1, "{svg}");
        // One diamond in the plot and one in the legend, each two polygons.
        assert_eq!(svg.matches("<polygon").count(), 4, "{svg}");
        let without = chart(
            &["size=1MB", "size=200KB"],
            with.values.clone(),
            vec![vec![None, None], vec![None, None]],
        );
        let svg = render(&without).expect("drawn");
        assert_eq!(has(&svg, PAPER_LABEL), 0);
        assert_eq!(svg.matches("<polygon").count(), 0);
        // Same input, same bytes.
        assert_eq!(render(&with), render(&with));
    }

    #[test]
    fn a_paper_range_is_two_joined_diamonds_with_its_basis_under_the_chart() {
        let range = PaperMark {
            lo: 10.0,
            hi: 25.0,
            basis: Some("art = our or3 x 0.1-0.25".into()),
        };
        let c = chart(
            &["size=1MB", "size=200KB"],
            vec![
                vec![stat(100.0, 80.0, 100.0), stat(50.0, 50.0, 50.0)],
                vec![stat(10.0, 5.0, 15.0), stat(9.0, 9.0, 9.0)],
            ],
            vec![vec![None, Some(range)], vec![None, None]],
        );
        let svg = render(&c).expect("drawn");
        // Two diamonds in the plot, one in the legend.
        assert_eq!(svg.matches("<polygon").count(), 6, "{svg}");
        let all = texts(&svg).join(" ");
        assert!(all.contains("art = our or3 x 0.1-0.25"), "{all}");
        assert!(all.contains("two joined: a range"), "{all}");
    }

    #[test]
    fn a_group_without_data_is_a_note_not_bars() {
        let c = chart(
            &["size=1MB", "size=200KB"],
            vec![
                vec![stat(100.0, 80.0, 100.0), stat(50.0, 50.0, 50.0)],
                vec![None, None],
            ],
            vec![],
        );
        let svg = render(&c).expect("drawn");
        assert_eq!(has(&svg, "no data"), 1, "{svg}");
        assert!(svg.contains("no data (no run succeeded, or none was run): size=200KB"));
        assert!(!svg.contains("n/a"));
        // Two bars (and the two legend squares, the background, the plot
        // and legend areas): the empty group draws none.
        let bars = |svg: &str| svg.matches("<rect").count();
        let full = chart(
            &["size=1MB", "size=200KB"],
            vec![
                vec![stat(100.0, 80.0, 100.0), stat(50.0, 50.0, 50.0)],
                vec![stat(1.0, 1.0, 1.0), stat(2.0, 2.0, 2.0)],
            ],
            vec![],
        );
        assert_eq!(bars(&render(&full).expect("drawn")) - bars(&svg), 2);
    }

    #[test]
    fn long_group_names_are_numbered_with_a_key() {
        let groups = [
            "path=Verizon-LTE-short.down loss=1%",
            "path=Verizon-LTE-short.up loss=10%",
            "x",
        ];
        let c = chart(
            &groups,
            vec![vec![stat(1.0, 1.0, 1.0), stat(2.0, 2.0, 2.0)]; 3],
            vec![],
        );
        let svg = render(&c).expect("drawn");
        assert_eq!(
            has(&svg, "1: path=Verizon-LTE-short.down loss=1%"),
            1,
            "{svg}"
        );
        assert_eq!(has(&svg, "3: x"), 1, "{svg}");
    }

    #[test]
    fn scatter_names_schemes_in_the_legend_not_beside_points() {
        let c = Scatter {
            title: "fig24".into(),
            x_label: "redundancy_ratio".into(),
            y_label: "share_n_ge_2".into(),
            points: vec![("quic".into(), 0.05, 0.05), ("art+".into(), 0.07, f64::NAN)],
        };
        let svg = render_scatter(&c).expect("drawn");
        assert_eq!(has(&svg, "art+"), 1, "{svg}");
        assert_eq!(has(&svg, "quic"), 1, "{svg}");
        assert_eq!(render_scatter(&c), render_scatter(&c));
    }

    #[test]
    fn percentile_metrics_form_cdf_families() {
        let f = percentile_families(&[
            "fct_ms",
            "dtwait_p50_ms",
            "dtwait_p95_ms",
            "dtwait_p99_ms",
            "t_wait_p99_ms",
            "rpc_fct_mean_ms",
        ]);
        assert_eq!(
            f,
            vec![(
                "dtwait".to_string(),
                vec![
                    (0.5, "dtwait_p50_ms"),
                    (0.95, "dtwait_p95_ms"),
                    (0.99, "dtwait_p99_ms")
                ]
            )]
        );
    }

    #[test]
    fn cdf_draws_the_papers_percentiles_beside_ours() {
        let c = CdfChart {
            title: "art-fig23".into(),
            x_label: "dtwait (ms)".into(),
            note: "points".into(),
            lines: vec![(
                "quic-art".into(),
                vec![(10.0, 0.5), (100.0, 0.95), (200.0, 0.99)],
            )],
            paper: vec![(
                "quic-art".into(),
                vec![(3.23, 0.5), (32.83, 0.95), (78.48, 0.99)],
            )],
        };
        let svg = render_cdf(&c).expect("drawn");
        assert_eq!(has(&svg, "paper (quic-art)"), 1, "{svg}");
        assert_eq!(has(&svg, "quic-art"), 1, "{svg}");
        // Three diamonds in the plot, one in the legend: two polygons each.
        assert_eq!(svg.matches("<polygon").count(), 8, "{svg}");
    }
}
