//! Writers of `artq reproduce`'s outputs: per experiment a CSV of raw runs
//! (`NAME_runs.csv`), of aggregated rows (`NAME_summary.csv`) and an SVG
//! chart per table metric (`NAME_METRIC.svg`, see [`plot`]), then
//! `results.json`, `report.md` and `report.html` (the same report as one
//! self-contained page, charts inline) for all experiments run; and
//! [`render_outputs`], which redraws the charts and reports of a previous
//! run from its results.json.
//!
//! Why here and not in the CLI: the formats are part of the experiment layer
//! (tests and other tools read them), and they must be deterministic: fixed
//! float formatting, `BTreeMap` order, no wall times.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::common::{groups, num};
use super::{plot, Experiment, ExperimentResult, Scale, METRICS};

/// Quotes a CSV cell when it needs it (RFC 4180).
fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The raw-runs CSV of one experiment.
pub fn runs_csv(r: &ExperimentResult) -> String {
    let mut out = String::from("experiment,group,scheme,seed,error");
    for (m, _) in METRICS {
        out.push(',');
        out.push_str(m);
    }
    out.push('\n');
    for run in &r.runs {
        let _ = write!(
            out,
            "{},{},{},{},{}",
            cell(&r.name),
            cell(&run.group),
            cell(&run.scheme),
            run.seed,
            cell(run.error.as_deref().unwrap_or(""))
        );
        for (m, _) in METRICS {
            out.push(',');
            if let Some(v) = run.metrics.get(*m) {
                let _ = write!(out, "{v:.6}");
            }
        }
        out.push('\n');
    }
    out
}

/// The aggregated CSV of one experiment: mean, min, max of every metric.
pub fn summary_csv(r: &ExperimentResult) -> String {
    let mut out = String::from("experiment,group,scheme,runs,failed");
    for (m, _) in METRICS {
        let _ = write!(out, ",{m}_mean,{m}_min,{m}_max");
    }
    out.push('\n');
    for row in &r.rows {
        let _ = write!(
            out,
            "{},{},{},{},{}",
            cell(&r.name),
            cell(&row.group),
            cell(&row.scheme),
            row.runs,
            row.failed
        );
        for (m, _) in METRICS {
            match row.metrics.get(*m) {
                Some(s) => {
                    let _ = write!(out, ",{:.6},{:.6},{:.6}", s.mean, s.min, s.max);
                }
                None => out.push_str(",,,"),
            }
        }
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scale: Scale,
    metrics: BTreeMap<&'static str, &'static str>,
    experiments: BTreeMap<&'a str, &'a ExperimentResult>,
}

/// `results.json`: the scale, the metric definitions and every experiment's
/// runs, rows and judged claims.
pub fn results_json(scale: Scale, results: &[ExperimentResult]) -> String {
    let doc = ResultsJson {
        scale,
        metrics: METRICS.iter().copied().collect(),
        experiments: results.iter().map(|r| (r.name.as_str(), r)).collect(),
    };
    let mut s = serde_json::to_string_pretty(&doc)
        .unwrap_or_else(|e| format!("{{\"error\":\"cannot serialise the results: {e}\"}}"));
    s.push('\n');
    s
}

/// The report's title (both report.md and report.html).
pub const TITLE: &str =
    "artq reproduce: the evaluations of ART (journal and ICNP), AutoRec and RCP";

/// `report.md`: per experiment the setting, the paper's numbers, our table
/// (mean [min-max] over seeds) and one verdict line per claim.
pub fn report_md(scale: Scale, experiments: &[Experiment], results: &[ExperimentResult]) -> String {
    let mut out = md_head(scale, results);
    for r in results {
        out.push_str(&md_experiment(experiments, r));
    }
    out
}

/// The title, the words on how to read the numbers, and the verdict table.
fn md_head(scale: Scale, results: &[ExperimentResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {TITLE}\n");
    let _ = writeln!(
        out,
        "Scale: **{}**. Every number below comes from the simulated runs of this \
         invocation (mean over seeds, [min-max] in brackets); the paper's numbers and \
         claims are transcribed with the section and figure they come from. Redundancy \
         cost = replicas (every retransmitted packet) + FEC repair packets. Where our \
         numbers differ from the paper's beyond the spread over seeds, docs/reproduce.md \
         gives the reason the runs measured (one section per figure).\n",
        scale.name()
    );
    let _ = writeln!(out, "## Verdicts\n");
    let _ = writeln!(out, "| experiment | claim | verdict |");
    let _ = writeln!(out, "|---|---|---|");
    for r in results {
        for c in &r.claims {
            let _ = writeln!(
                out,
                "| {} | {} ({}) | {} |",
                r.name,
                c.paper,
                c.source,
                c.verdict.word()
            );
        }
    }
    out.push('\n');
    out
}

/// One experiment's section of report.md.
fn md_experiment(experiments: &[Experiment], r: &ExperimentResult) -> String {
    let mut out = String::new();
    let exp = experiments.iter().find(|e| e.name == r.name);
    let _ = writeln!(out, "## {}: {}\n", r.name, r.title);
    let _ = writeln!(out, "Setting: {}.\n", r.setting);
    let seeds: Vec<String> = r.seeds.iter().map(u64::to_string).collect();
    let _ = writeln!(out, "Seeds: {}.\n", seeds.join(", "));
    if let Some(e) = exp {
        let _ = writeln!(out, "What the paper reports:\n");
        for p in e.paper_numbers {
            let _ = writeln!(out, "- {p}");
        }
        out.push('\n');
        let metrics = e.table_metrics;
        let _ = write!(out, "| group | scheme | runs |");
        for m in metrics {
            let _ = write!(out, " {m} |");
        }
        let _ = write!(out, "\n|---|---|---|");
        for _ in metrics.iter() {
            out.push_str("---|");
        }
        out.push('\n');
        for row in &r.rows {
            let _ = write!(out, "| {} | {} | {} |", row.group, row.scheme, row.runs);
            for m in metrics {
                match row.metrics.get(*m) {
                    Some(s) if s.min == s.max => {
                        let _ = write!(out, " {} |", num(s.mean));
                    }
                    Some(s) => {
                        let _ = write!(out, " {} [{}-{}] |", num(s.mean), num(s.min), num(s.max));
                    }
                    None => out.push_str(" - |"),
                }
            }
            out.push('\n');
        }
        out.push('\n');
        let charts: Vec<String> = metrics
            .iter()
            .map(|m| format!("![{} {m}]({})", r.name, plot::chart_file(&r.name, m)))
            .collect();
        let _ = writeln!(out, "{}\n", charts.join(" "));
        let cdfs = plot::cdf_charts(e, r);
        if !cdfs.is_empty() {
            let _ = writeln!(
                out,
                "Percentiles as points of the CDF (the paper plots the CDF), one per setting:\n"
            );
            for c in &cdfs {
                let _ = writeln!(
                    out,
                    "- {}: ![{} {} percentiles]({})",
                    c.group, c.group, c.family, c.file
                );
            }
            out.push('\n');
        }
        if let Some((x, ys)) = super::artplus::frontier_axes(&r.name) {
            let _ = writeln!(
                out,
                "Frontiers ({x} against {}), one per setting:\n",
                ys.join(", ")
            );
            for (gi, g) in groups(&r.rows).iter().enumerate() {
                let links: Vec<String> = ys
                    .iter()
                    .map(|y| format!("![{g} {y}]({})", plot::frontier_file(&r.name, gi, y)))
                    .collect();
                let _ = writeln!(out, "- {g}: {}", links.join(" "));
            }
            out.push('\n');
        }
    }
    let _ = writeln!(out, "Claims:\n");
    for c in &r.claims {
        let _ = writeln!(
            out,
            "- **{}**: {} ({}). Ours: {}.",
            c.verdict.word(),
            c.paper,
            c.source,
            c.ours
        );
    }
    if !r.asides.is_empty() {
        let _ = writeln!(
            out,
            "\nFurther readings of the same runs (not claims of the paper):\n"
        );
        for (what, ours) in &r.asides {
            let _ = writeln!(out, "- {what}: {ours}.");
        }
    }
    let failed: Vec<String> = r
        .runs
        .iter()
        .filter_map(|run| {
            run.error
                .as_ref()
                .map(|e| format!("- {} {} seed {}: {e}", run.group, run.scheme, run.seed))
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\nFailed runs (left out of the means):\n");
        for f in failed {
            let _ = writeln!(out, "{f}");
        }
    }
    out.push('\n');
    out
}

/// docs/reproduce.md, built in: report.html carries the sections that
/// explain where our numbers differ from the papers', so the report reads
/// offline and cannot point at a section that no longer exists.
const REPRODUCE_DOC: &str = include_str!("../../../../docs/reproduce.md");

/// The sections of docs/reproduce.md (by the start of their `## ` heading)
/// that explain differences, and the experiments each explains. Sections
/// that concern every experiment list none.
pub const DIFFERENCES: &[(&str, &[&str])] = &[
    ("How claims are judged", &[]),
    ("Known problems", &[]),
    ("Figs. 20-21:", &["fig20", "fig21"]),
    ("Fig. 25:", &["art-fig25"]),
    ("Fig. 27:", &["art-fig27"]),
    ("art-dqn-heldout:", &["art-dqn-heldout"]),
    ("Fig. 24:", &["fig24", "art-fig24a"]),
    ("Fig. 19:", &["fig19"]),
    ("Fig. 26:", &["art-fig26"]),
    ("Fig. 23:", &["art-fig23"]),
    ("Fig. 15:", &["art-fig15"]),
    (
        "RCP (rcp.md):",
        &[
            "rcp-table2",
            "rcp-fig5",
            "rcp-fig7",
            "rcp-fig8",
            "rcp-fig9",
            "rcp-exp4",
        ],
    ),
    (
        "AutoRec Figs. 11-13:",
        &["autorec-fig11", "autorec-fig12", "autorec-fig13"],
    ),
];

/// The `## ` sections of docs/reproduce.md as (heading, Markdown body).
pub fn doc_sections() -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    // Sections start at a line beginning with "## ".
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in REPRODUCE_DOC.split_inclusive('\n') {
        if line.starts_with("## ") {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(REPRODUCE_DOC.len());
    for w in starts.windows(2) {
        let section = &REPRODUCE_DOC[w[0]..w[1]];
        let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
        out.push((heading.trim_start_matches("## ").trim(), body));
    }
    out
}

/// The anchor of the docs/reproduce.md section number `i` in report.html.
fn doc_anchor(i: usize) -> String {
    format!("why-{}", i + 1)
}

/// Escapes text for HTML.
fn html_esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Markdown to HTML (tables on); images whose destination is a chart of
/// `charts` become `data:` URIs of the chart's SVG.
fn md_html(md: &str, charts: &BTreeMap<String, String>) -> String {
    use base64::Engine as _;
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};
    let events = Parser::new_ext(md, Options::ENABLE_TABLES).map(|ev| match ev {
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => {
            let dest_url = match charts.get(dest_url.as_ref()) {
                Some(svg) => CowStr::from(format!(
                    "data:image/svg+xml;base64,{}",
                    base64::engine::general_purpose::STANDARD.encode(svg)
                )),
                None => dest_url,
            };
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            })
        }
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// The style sheet of report.html (no external resource).
const CSS: &str = "body{font-family:sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 48px;\
line-height:1.45;color:#222}table{border-collapse:collapse;margin:8px 0;font-size:14px}\
td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}th{background:#f2f2f2}\
img{display:block;max-width:100%;height:auto;margin:12px 0;border:1px solid #eee}\
section{border-top:2px solid #ddd;margin-top:32px}.why{background:#f7f7f2;padding:4px 12px}\
code{background:#f2f2f2;padding:0 3px}";

/// `report.html`: report.md as one self-contained page (charts inline as
/// `data:` URIs, no script, no external resource): the verdict table first,
/// then per experiment its section of report.md and links to the sections
/// of docs/reproduce.md that explain its differences, which follow at the
/// end of the page.
pub fn report_html(
    scale: Scale,
    experiments: &[Experiment],
    results: &[ExperimentResult],
    charts: &BTreeMap<String, String>,
) -> String {
    let sections = doc_sections();
    let explained: Vec<(usize, &str, &[&str])> = DIFFERENCES
        .iter()
        .filter_map(|(prefix, exps)| {
            let i = sections.iter().position(|(h, _)| h.starts_with(prefix))?;
            let relevant =
                exps.is_empty() || results.iter().any(|r| exps.contains(&r.name.as_str()));
            relevant.then_some((i, sections[i].0, *exps))
        })
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n",
        html_esc(TITLE)
    );
    out.push_str(&md_html(&md_head(scale, results), charts));
    for r in results {
        let _ = writeln!(
            out,
            "<section id=\"{}\" data-experiment=\"{}\" data-paper-values=\"{}\">",
            html_esc(&format!("exp-{}", r.name)),
            html_esc(&r.name),
            super::paper::paper_values(&r.name).count()
        );
        out.push_str(&md_html(&md_experiment(experiments, r), charts));
        let why: Vec<String> = explained
            .iter()
            .filter(|(_, _, exps)| exps.contains(&r.name.as_str()))
            .map(|(i, h, _)| format!("<a href=\"#{}\">{}</a>", doc_anchor(*i), html_esc(h)))
            .collect();
        if !why.is_empty() {
            let _ = writeln!(
                out,
                "<p>Where our numbers differ from the paper's, and why (docs/reproduce.md): {}.</p>",
                why.join("; ")
            );
        }
        out.push_str("</section>\n");
    }
    if !explained.is_empty() {
        out.push_str(
            "<section id=\"differences\">\n<h2>Why our numbers differ (from docs/reproduce.md)</h2>\n",
        );
        for (i, heading, _) in &explained {
            let _ = writeln!(
                out,
                "<div class=\"why\" id=\"{}\">\n<h3>{}</h3>",
                doc_anchor(*i),
                html_esc(heading)
            );
            // The section's own headings go one level down.
            let body = sections[*i].1.replace("\n### ", "\n#### ");
            out.push_str(&md_html(&body, charts));
            out.push_str("</div>\n");
        }
        out.push_str("</section>\n");
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

/// Writes every output into `dir` (created if missing) and returns the
/// paths written.
pub fn write_outputs(
    dir: &Path,
    scale: Scale,
    experiments: &[Experiment],
    results: &[ExperimentResult],
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: String, text: String| -> io::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        written.push(path);
        Ok(())
    };
    for r in results {
        put(format!("{}_runs.csv", r.name), runs_csv(r))?;
        put(format!("{}_summary.csv", r.name), summary_csv(r))?;
    }
    put("results.json".into(), results_json(scale, results))?;
    written.extend(write_report(dir, scale, experiments, results)?);
    Ok(written)
}

/// Writes the charts, report.md and report.html of `results` into `dir`
/// (which must exist) and returns the paths written.
fn write_report(
    dir: &Path,
    scale: Scale,
    experiments: &[Experiment],
    results: &[ExperimentResult],
) -> io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut charts = BTreeMap::new();
    for r in results {
        if let Some(e) = experiments.iter().find(|e| e.name == r.name) {
            for (name, svg) in plot::experiment_charts(e, r).map_err(io::Error::other)? {
                let path = dir.join(&name);
                std::fs::write(&path, &svg)?;
                written.push(path);
                charts.insert(name, svg);
            }
        }
    }
    for (name, text) in [
        ("report.md", report_md(scale, experiments, results)),
        (
            "report.html",
            report_html(scale, experiments, results, &charts),
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// A previous run's results.json, read back: its scale and experiments.
#[derive(serde::Deserialize)]
struct ResultsFile {
    scale: Scale,
    experiments: BTreeMap<String, ExperimentResult>,
}

/// Re-renders the charts, report.md and report.html of the run whose
/// outputs are in `dir`, from its results.json (left unchanged, as are the
/// CSVs): for a chart or report change without running the simulations
/// again. The experiments' claims and paper numbers come from this build's
/// registry, the numbers and verdicts from the file. Returns the paths
/// written.
pub fn render_outputs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)?;
    let file: ResultsFile = serde_json::from_str(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is not the results.json of artq reproduce: {e}",
                path.display()
            ),
        )
    })?;
    let mut results: Vec<ExperimentResult> = file.experiments.into_values().collect();
    // The order artq reproduce runs them in (the registry's), variants last.
    results.sort_by_key(|r| {
        (
            super::EXPERIMENTS
                .iter()
                .position(|n| *n == r.name)
                .unwrap_or(usize::MAX),
            r.name.clone(),
        )
    });
    let mut experiments = Vec::new();
    for r in &results {
        match super::experiment(&r.name, file.scale) {
            Some(e) => experiments.push(e),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} names an experiment this build does not know: {}",
                        path.display(),
                        r.name
                    ),
                ))
            }
        }
    }
    write_report(dir, file.scale, &experiments, &results)
}
