//! SVG charts of an experiment's aggregated rows: for every metric of the
//! experiment's table, one grouped bar chart (a cluster per group, a bar per
//! scheme, the mean as the bar and the seeds' min-max as a whisker); and,
//! for the experiments that trace a cost/latency frontier
//! ([`super::artplus::FRONTIERS`]), one scatter chart per group and latency
//! axis (a point per scheme: redundancy against rounds or t_wait).
//!
//! Why SVG written here rather than a plotting crate: plotters, the obvious
//! candidate, lays text out with font metrics, which needs either system
//! fonts at run time (absent on a bare CI machine) or an embedded font file.
//! A bar chart in SVG is a few rectangles and `<text>` elements that the
//! viewer lays out itself, so this module needs neither, and its output is
//! deterministic text (fixed number formats, no timestamps) like every other
//! file `artq reproduce` writes.

use std::fmt::Write as _;

use super::common::{find, groups, num, schemes, Experiment, Stat};
use super::ExperimentResult;

/// Chart size in SVG user units (pixels).
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 96.0;

/// Bar fills, one per scheme in order (colour-blind-safe Okabe-Ito palette).
const COLOURS: &[&str] = &[
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

/// One grouped bar chart: `values[g][s]` is scheme `s` in group `g`.
///
/// Exists as plain data so the layout can be tested without an experiment.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Title line.
    pub title: String,
    /// What the bars measure (the metric's name and meaning).
    pub y_label: String,
    /// Cluster labels, left to right.
    pub groups: Vec<String>,
    /// Bar labels within a cluster (the legend), left to right.
    pub series: Vec<String>,
    /// `values[group][series]`; `None` where every seed failed or the case
    /// does not exist.
    pub values: Vec<Vec<Option<Stat>>>,
}

/// The charts of one experiment, as `(file name, SVG text)`: one per table
/// metric, named `NAME_METRIC.svg`.
pub fn experiment_charts(exp: &Experiment, r: &ExperimentResult) -> Vec<(String, String)> {
    let groups = groups(&r.rows);
    let series = schemes(&r.rows);
    exp.table_metrics
        .iter()
        .map(|metric| {
            let values = groups
                .iter()
                .map(|g| {
                    series
                        .iter()
                        .map(|s| {
                            find(&r.rows, g, s).and_then(|row| row.metrics.get(*metric).copied())
                        })
                        .collect()
                })
                .collect();
            let meaning = super::METRICS
                .iter()
                .find(|(m, _)| m == metric)
                .map_or(String::new(), |(_, d)| format!(": {d}"));
            let chart = BarChart {
                title: format!("{} — {metric}", r.title),
                y_label: format!("{metric}{meaning}"),
                groups: groups.clone(),
                series: series.clone(),
                values,
            };
            (chart_file(&r.name, metric), render(&chart))
        })
        .chain(frontier_charts(exp, r))
        .collect()
}

/// The frontier charts of `exp` (none unless it is one of
/// [`super::artplus::FRONTIERS`]): per group and per y axis, a point per
/// scheme at (mean x, mean y).
fn frontier_charts(exp: &Experiment, r: &ExperimentResult) -> Vec<(String, String)> {
    let Some((x, ys)) = super::artplus::frontier_axes(exp.name) else {
        return Vec::new();
    };
    let mut groups: Vec<&str> = Vec::new();
    for row in &r.rows {
        if !groups.contains(&row.group.as_str()) {
            groups.push(&row.group);
        }
    }
    let mut out = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
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
                title: format!("{g}: {x} against {y}"),
                x_label: x.to_string(),
                y_label: y.to_string(),
                points,
            };
            out.push((frontier_file(&r.name, gi, y), render_scatter(&chart)));
        }
    }
    out
}

/// The file name of the frontier chart of group number `group` (from 0, in
/// the rows' order) against `y` (report.md links it).
pub fn frontier_file(experiment: &str, group: usize, y: &str) -> String {
    format!("{experiment}_frontier{}_{y}.svg", group + 1)
}

/// A scatter chart: one labelled point per scheme.
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

/// The scatter chart as a standalone SVG document: both axes from 0, each
/// point a dot in its scheme's colour with the scheme's name beside it.
pub fn render_scatter(c: &Scatter) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let finite = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
    let (x_top, x_step) = nice_axis(c.points.iter().map(|p| finite(p.1)).fold(0.0, f64::max));
    let (y_top, y_step) = nice_axis(c.points.iter().map(|p| finite(p.2)).fold(0.0, f64::max));
    let px = |v: f64| LEFT + plot_w * (finite(v) / x_top).clamp(0.0, 1.0);
    let py = |v: f64| TOP + plot_h * (1.0 - (finite(v) / y_top).clamp(0.0, 1.0));
    let mut o = String::new();
    svg_open(&mut o, &c.title);
    y_gridlines(&mut o, y_top, y_step, &py);
    let mut v = 0.0;
    while v <= x_top + x_step / 2.0 {
        let xx = px(v);
        let _ = writeln!(
            o,
            "<line x1=\"{xx:.1}\" y1=\"{TOP}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#dddddd\"/>",
            TOP + plot_h
        );
        let _ = writeln!(
            o,
            "<text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            TOP + plot_h + 16.0,
            esc(&num(v))
        );
        v += x_step;
    }
    let _ = writeln!(
        o,
        "<text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        TOP + plot_h / 2.0,
        esc(&c.y_label)
    );
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        LEFT + plot_w / 2.0,
        TOP + plot_h + 36.0,
        esc(&c.x_label)
    );
    for (i, (label, x, y)) in c.points.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let (cx, cy) = (px(*x), py(*y));
        let _ = writeln!(
            o,
            "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"5\" fill=\"{colour}\"><title>{}: {}, {}</title></circle>",
            esc(label),
            esc(&num(*x)),
            esc(&num(*y))
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            cx + 7.0,
            cy - 5.0,
            esc(label)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">points: means \
         over seeds; lower and further left is better</text>",
        WIDTH - RIGHT,
        HEIGHT - 8.0
    );
    o.push_str("</svg>\n");
    o
}

/// The file name of `experiment`'s chart of `metric` (report.md links it).
pub fn chart_file(experiment: &str, metric: &str) -> String {
    format!("{experiment}_{metric}.svg")
}

/// A "nice" axis top at or above `max`: 1, 2, 2.5 or 5 times a power of ten,
/// and the gridline step (about five steps up to the top). Returns (top, step).
fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let raw_step = max / 5.0;
    let magnitude = 10f64.powf(raw_step.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw_step)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

/// Escapes text for SVG character data and attribute values.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The chart as a standalone SVG document.
pub fn render(c: &BarChart) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let top_value = c
        .values
        .iter()
        .flatten()
        .flatten()
        .map(|s| s.max.max(s.mean))
        .fold(0.0, f64::max);
    let (axis_top, step) = nice_axis(top_value);
    let y = |v: f64| TOP + plot_h * (1.0 - (v / axis_top).clamp(0.0, 1.0));
    let mut o = String::new();
    svg_open(&mut o, &c.title);
    // Y axis: gridlines, tick labels, label.
    y_gridlines(&mut o, axis_top, step, &y);
    let _ = writeln!(
        o,
        "<text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        TOP + plot_h / 2.0,
        esc(&c.y_label)
    );
    let _ = writeln!(
        o,
        "<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
        TOP + plot_h,
        LEFT + plot_w,
        TOP + plot_h
    );
    // Bars.
    let n_groups = c.groups.len().max(1) as f64;
    let n_series = c.series.len().max(1) as f64;
    let slot = plot_w / n_groups;
    let bar = slot * 0.8 / n_series;
    for (g, label) in c.groups.iter().enumerate() {
        let x0 = LEFT + slot * g as f64 + slot * 0.1;
        for (s, _) in c.series.iter().enumerate() {
            let x = x0 + bar * s as f64;
            let colour = COLOURS[s % COLOURS.len()];
            match c
                .values
                .get(g)
                .and_then(|row| row.get(s))
                .copied()
                .flatten()
            {
                Some(stat) => {
                    let top = y(stat.mean);
                    let _ = writeln!(
                        o,
                        "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                         fill=\"{colour}\"><title>{}: {}</title></rect>",
                        bar * 0.9,
                        TOP + plot_h - top,
                        esc(&c.series[s]),
                        esc(&num(stat.mean))
                    );
                    if stat.min < stat.max {
                        let cx = x + bar * 0.45;
                        let _ = writeln!(
                            o,
                            "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" \
                             stroke=\"black\"/>",
                            y(stat.min),
                            y(stat.max)
                        );
                    }
                }
                None => {
                    let _ = writeln!(
                        o,
                        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
                         font-size=\"10\">n/a</text>",
                        x + bar * 0.45,
                        TOP + plot_h - 4.0
                    );
                }
            }
        }
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            LEFT + slot * (g as f64 + 0.5),
            TOP + plot_h + 18.0,
            esc(label)
        );
    }
    // Legend, below the group labels.
    let per_item = plot_w / n_series;
    for (s, name) in c.series.iter().enumerate() {
        let x = LEFT + per_item * s as f64;
        let yy = HEIGHT - 30.0;
        let _ = writeln!(
            o,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>",
            yy - 10.0,
            COLOURS[s % COLOURS.len()]
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{yy:.1}\">{}</text>",
            x + 16.0,
            esc(name)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">bars: mean over \
         seeds; whiskers: min-max</text>",
        WIDTH - RIGHT,
        HEIGHT - 8.0
    );
    o.push_str("</svg>\n");
    o
}

/// The start of every chart: the `<svg>` element, a white background and
/// the title.
fn svg_open(o: &mut String, title: &str) {
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(
        o,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{}</text>",
        WIDTH / 2.0,
        esc(title)
    );
}

/// Horizontal gridlines and tick labels of a y axis from 0 to `top` in
/// steps of `step`, `y` mapping a value to its pixel row.
fn y_gridlines(o: &mut String, top: f64, step: f64, y: &dyn Fn(f64) -> f64) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let yy = y(v);
        let _ = writeln!(
            o,
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#dddddd\"/>",
            LEFT + plot_w
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            yy + 4.0,
            esc(&num(v))
        );
        v += step;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mean: f64, min: f64, max: f64) -> Option<Stat> {
        Some(Stat {
            mean,
            sd: 0.0,
            min,
            max,
        })
    }

    #[test]
    fn axis_tops_are_round_and_cover_the_data() {
        assert_eq!(nice_axis(3806.0), (4000.0, 1000.0));
        assert_eq!(nice_axis(2.33), (2.5, 0.5));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(f64::NAN), (1.0, 0.2));
        for max in [0.013, 1.0, 7.7, 99.0, 123_080.0] {
            let (top, step) = nice_axis(max);
            assert!(
                top >= max && top <= max + step + 1e-9,
                "{max}: {top} {step}"
            );
        }
    }

    #[test]
    fn scatter_has_a_labelled_point_per_scheme() {
        let c = Scatter {
            title: "fig24".into(),
            x_label: "redundancy_ratio".into(),
            y_label: "share_n_ge_2".into(),
            points: vec![("quic".into(), 0.05, 0.05), ("art+".into(), 0.07, f64::NAN)],
        };
        let svg = render_scatter(&c);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains(">art+<") && svg.contains(">quic<"));
        assert_eq!(svg, render_scatter(&c));
    }

    #[test]
    fn bars_whiskers_legend_and_escaping() {
        let c = BarChart {
            title: "a <b> & c".into(),
            y_label: "redundancy".into(),
            groups: vec!["size=1MB".into(), "size=200KB".into()],
            series: vec!["or3".into(), "art".into()],
            values: vec![
                vec![stat(100.0, 80.0, 100.0), stat(50.0, 50.0, 50.0)],
                vec![None, stat(10.0, 5.0, 15.0)],
            ],
        };
        let svg = render(&c);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        // Three bars, two whiskers (the 50/50/50 bar has none), one n/a.
        assert_eq!(svg.matches("<title>").count(), 3);
        assert_eq!(
            svg.matches("stroke=\"black\"/>").count(),
            2 + 1,
            "whiskers + x axis"
        );
        assert_eq!(svg.matches(">n/a<").count(), 1);
        assert!(svg.contains(">size=200KB<") && svg.contains(">art<"));
        // The tallest bar reaches the axis top of 100 (step 20): y = TOP.
        assert!(svg.contains(&format!("y=\"{TOP:.1}\" width")), "{svg}");
        // Same input, same bytes.
        assert_eq!(svg, render(&c));
    }
}
