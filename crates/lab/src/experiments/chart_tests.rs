//! Tests of the report as a reader sees it: the paper's values as data
//! match the sentences the report quotes, no two texts of any chart of the
//! committed full-scale report overlap or leave the chart, the committed
//! charts and reports are what the code draws from the committed
//! results.json, and report.html is one self-contained page.

use std::path::{Path, PathBuf};

use super::common::{AggRow, Stat};
use super::paper::{all_paper_values, in_setting, paper_mark, paper_values, Given};
use super::*;

/// The committed report of the full-scale run (docs/reproduce).
fn committed_report() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reproduce")
}

#[test]
fn paper_values_are_the_numbers_the_report_quotes() {
    for p in all_paper_values() {
        let e = experiment(p.experiment, Scale::Full)
            .unwrap_or_else(|| panic!("{}: no such experiment", p.experiment));
        assert!(
            e.paper_numbers.iter().any(|s| s.contains(p.written)),
            "{p:?}: {:?} is not in {}'s paper numbers",
            p.written,
            p.experiment
        );
        assert!(
            e.table_metrics.contains(&p.metric),
            "{p:?}: {} is not charted",
            p.metric
        );
        for scale in [Scale::Full, Scale::Quick] {
            let e = experiment(p.experiment, scale).expect("registered");
            let has = |scheme: &str, setting: Option<&str>| {
                e.cases
                    .iter()
                    .any(|c| c.scheme == scheme && in_setting(setting, &c.group))
            };
            assert!(has(p.scheme, p.group), "{p:?}: no such case at {scale:?}");
            if let Given::Relative { scheme, group, .. } = p.given {
                // The reference is in the value's own groups, or in its own.
                assert!(
                    has(scheme, group.or(p.group)),
                    "{p:?}: no reference case at {scale:?}"
                );
            }
        }
        if let Given::Relative { lo, hi, .. } = p.given {
            assert!(0.0 < lo && lo <= hi, "{p:?}");
        }
    }
    // Table IV: eleven betas, seven metrics each.
    assert_eq!(paper_values("rcp-fig5").count(), 77);
}

#[test]
fn a_change_is_drawn_from_our_reference_and_only_where_it_has_data() {
    let row = |group: &str, scheme: &str, metric: &str, v: f64| AggRow {
        group: group.into(),
        scheme: scheme.into(),
        runs: 1,
        failed: 0,
        metrics: [(
            metric.to_string(),
            Stat {
                mean: v,
                sd: 0.0,
                min: v,
                max: v,
            },
        )]
        .into(),
    };
    let rows = [
        row("size=200KB files=100", "or3", "redundancy", 200.0),
        row("size=200KB files=100", "art", "redundancy", 30.0),
        row("theta=100ms", "autorec:theta=100", "goodput_mbps", 10.0),
    ];
    // Fig. 20: 75%-90% lower than OR3, at every scale's group name.
    let m = paper_mark("fig20", &rows, "size=200KB files=100", "art", "redundancy").expect("drawn");
    assert!(
        (m.lo - 20.0).abs() < 1e-9 && (m.hi - 50.0).abs() < 1e-9,
        "{m:?}"
    );
    assert_eq!(m.basis.as_deref(), Some("art = our or3 x 0.1-0.25"));
    // No OR3 run in that group: nothing to draw from.
    assert_eq!(
        paper_mark("fig20", &rows, "size=1MB files=100", "art", "redundancy"),
        None
    );
    // Against another group's scheme (Fig. 13: theta 50 against 100 ms).
    let m = paper_mark(
        "autorec-fig13",
        &rows,
        "theta=50ms",
        "autorec",
        "goodput_mbps",
    )
    .expect("drawn");
    assert!((m.lo - 9.14).abs() < 1e-9 && m.lo == m.hi, "{m:?}");
    assert_eq!(
        m.basis.as_deref(),
        Some("autorec = our autorec:theta=100 (theta=100ms) x 0.914")
    );
    // A stated number needs no data of ours.
    let m = paper_mark("art-fig25", &[], "video=20s", "art", "rebuffer_s").expect("drawn");
    assert_eq!((m.lo, m.hi, m.basis), (251.0, 251.0, None));
    // Words, not substrings: `p=1%` is not `p=15%`.
    assert!(in_setting(Some("p=15%"), "rpc p=15%"));
    assert!(!in_setting(Some("p=1%"), "rpc p=15%"));
}

/// One `<text>` element of an SVG: its box in the chart, by a conservative
/// estimate of the glyphs' widths, and its content.
#[derive(Debug)]
struct TextBox {
    text: String,
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

/// The value of attribute `name` in the element's attribute text.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')?;
    Some(&tag[at..at + end])
}

/// A width per character, in em, at or above DejaVu Sans's (the widest
/// common sans-serif face): narrow, wide and ordinary glyphs.
fn em_width(c: char) -> f64 {
    match c {
        'i' | 'l' | 'j' | 't' | 'f' | 'r' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' '
        | '(' | ')' | '[' | ']' | 'I' => 0.42,
        'm' | 'w' | 'M' | 'W' | '%' | '@' => 1.0,
        _ => 0.68,
    }
}

/// The text boxes of `svg`.
fn text_boxes(svg: &str) -> Vec<TextBox> {
    let mut out = Vec::new();
    for chunk in svg.split("<text").skip(1) {
        let Some((tag, rest)) = chunk.split_once('>') else {
            continue;
        };
        let text = rest
            .split("</text>")
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let num = |n: &str| {
            attr(tag, n)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let (x, y, fs) = (num("x"), num("y"), num("font-size"));
        let dy = match attr(tag, "dy") {
            Some("0.76em") => 0.76 * fs,
            Some("0.5ex") => 0.25 * fs,
            Some("-0.5ex") => -0.25 * fs,
            _ => 0.0,
        };
        let unescaped = text
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        let w: f64 = unescaped.chars().map(em_width).sum::<f64>() * fs;
        let (a0, a1) = match attr(tag, "text-anchor") {
            Some("middle") => (-w / 2.0, w / 2.0),
            Some("end") => (-w, 0.0),
            _ => (0.0, w),
        };
        // Along the text: a0..a1; across it: ascent 0.9 em, descent 0.25 em
        // around the baseline at dy.
        let (c0, c1) = (dy - 0.9 * fs, dy + 0.25 * fs);
        let b = match attr(tag, "transform") {
            Some(t) if t.starts_with("rotate(270") => TextBox {
                text: unescaped,
                x0: x + c0,
                x1: x + c1,
                y0: y - a1,
                y1: y - a0,
            },
            Some(t) if t.starts_with("rotate(90") => TextBox {
                text: unescaped,
                x0: x - c1,
                x1: x - c0,
                y0: y + a0,
                y1: y + a1,
            },
            _ => TextBox {
                text: unescaped,
                x0: x + a0,
                x1: x + a1,
                y0: y + c0,
                y1: y + c1,
            },
        };
        out.push(b);
    }
    out
}

/// The chart's width and height from its `<svg>` element.
fn svg_size(svg: &str) -> (f64, f64) {
    let head = svg.split('>').next().unwrap_or("");
    let n = |name: &str| attr(head, name).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    (n("width"), n("height"))
}

/// Every overlap of two texts and every text not wholly inside the chart.
fn layout_faults(svg: &str) -> Vec<String> {
    let boxes = text_boxes(svg);
    let (w, h) = svg_size(svg);
    let mut faults = Vec::new();
    for b in &boxes {
        if b.x0 < 0.0 || b.y0 < 0.0 || b.x1 > w || b.y1 > h {
            faults.push(format!("{:?} leaves the {w}x{h} chart: {b:?}", b.text));
        }
    }
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            if a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 {
                faults.push(format!("{:?} overlaps {:?}: {a:?} {b:?}", a.text, b.text));
            }
        }
    }
    faults
}

#[test]
fn the_overlap_check_sees_overlaps() {
    let two = |x2: f64, y2: f64| {
        format!(
            "<svg width=\"200\" height=\"100\"><text x=\"10\" y=\"50\" font-size=\"10\">quic</text>\
             <text x=\"{x2}\" y=\"{y2}\" font-size=\"10\">or3</text></svg>"
        )
    };
    assert_eq!(layout_faults(&two(40.0, 50.0)), Vec::<String>::new());
    assert_eq!(layout_faults(&two(20.0, 52.0)).len(), 1);
    assert_eq!(
        layout_faults(&two(195.0, 50.0)).len(),
        1,
        "off the right edge"
    );
    let rotated = "<svg width=\"200\" height=\"100\"><text x=\"5\" y=\"50\" font-size=\"10\" \
                   text-anchor=\"middle\" transform=\"rotate(270, 5, 50)\">y axis title</text></svg>";
    assert_eq!(layout_faults(rotated).len(), 1, "cut off at the left edge");
}

#[test]
fn no_chart_of_the_committed_report_has_overlapping_or_cut_text_and_it_is_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = committed_report().join("results.json");
    std::fs::copy(&results, dir.path().join("results.json")).expect("the committed results.json");
    let written = report::render_outputs(dir.path()).expect("rendered");
    let charts: Vec<&PathBuf> = written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    assert!(charts.len() >= 100, "{} charts", charts.len());
    let mut faults = Vec::new();
    for path in &charts {
        let svg = std::fs::read_to_string(path).expect("chart");
        assert!(svg.contains("<text"), "{} has no text", path.display());
        for f in layout_faults(&svg) {
            faults.push(format!("{}: {f}", path.display()));
        }
    }
    assert!(
        faults.is_empty(),
        "{} faults:\n{}",
        faults.len(),
        faults.join("\n")
    );
    // The committed charts and reports are what this code draws (redraw
    // them with `artq reproduce --render docs/reproduce`), and no chart of
    // an older layout lingers beside them.
    let mut stale = Vec::new();
    for path in &written {
        let name = path.file_name().expect("a file name");
        let committed = std::fs::read(committed_report().join(name)).unwrap_or_default();
        if committed != std::fs::read(path).expect("written") {
            stale.push(name.to_string_lossy().into_owned());
        }
    }
    for entry in std::fs::read_dir(committed_report()).expect("docs/reproduce") {
        let name = entry.expect("entry").file_name();
        let drawn = name.to_string_lossy().ends_with(".svg") || name == "report.html";
        if drawn
            && !written
                .iter()
                .any(|p| p.file_name() == Some(name.as_os_str()))
        {
            stale.push(format!("{} (no longer drawn)", name.to_string_lossy()));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/reproduce is not what this code draws; run `artq reproduce --render \
         docs/reproduce`: {stale:?}"
    );
    // The results are read, never rewritten.
    assert_eq!(
        std::fs::read(&results).expect("committed"),
        std::fs::read(dir.path().join("results.json")).expect("copy")
    );
}

#[test]
fn every_difference_section_exists_once_and_names_real_experiments() {
    let sections = report::doc_sections();
    for (prefix, exps) in report::DIFFERENCES {
        let n = sections
            .iter()
            .filter(|(h, _)| h.starts_with(prefix))
            .count();
        assert_eq!(n, 1, "docs/reproduce.md sections starting {prefix:?}: {n}");
        for e in *exps {
            assert!(experiment(e, Scale::Tiny).is_some(), "{e}");
        }
    }
}

#[test]
fn report_html_is_one_self_contained_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        committed_report().join("results.json"),
        dir.path().join("results.json"),
    )
    .expect("the committed results.json");
    // Rendering twice gives the same bytes.
    report::render_outputs(dir.path()).expect("rendered");
    let html = std::fs::read_to_string(dir.path().join("report.html")).expect("report.html");
    report::render_outputs(dir.path()).expect("rendered again");
    assert_eq!(
        html,
        std::fs::read_to_string(dir.path().join("report.html")).expect("again")
    );
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(&format!("<title>{}</title>", report::TITLE)));
    assert!(!html.contains("the ART journal's evaluation"));
    // The verdicts come first, then the experiments.
    let verdicts = html.find("<h2>Verdicts</h2>").expect("verdict table");
    let first = html.find("<section id=\"exp-").expect("experiments");
    assert!(verdicts < first);
    // Nothing is fetched: no script, every image inline.
    assert!(!html.contains("<script"));
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    let images = html.matches("<img ").count();
    assert!(images >= 100, "{images} images");
    assert_eq!(
        html.matches("<img src=\"data:image/svg+xml;base64,")
            .count(),
        images
    );
    // Every experiment that docs/reproduce.md explains links its section.
    for (_, exps) in report::DIFFERENCES {
        for e in *exps {
            let at = html.find(&format!("<section id=\"exp-{e}\"")).expect(e);
            let end = at + html[at..].find("</section>").expect("closed");
            assert!(
                html[at..end].contains("href=\"#why-"),
                "{e} has no explanation link"
            );
        }
    }
}
