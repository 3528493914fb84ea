//! Writers of `artq reproduce`'s outputs: per experiment a CSV of raw runs
//! (`NAME_runs.csv`), of aggregated rows (`NAME_summary.csv`) and an SVG
//! chart per table metric (`NAME_METRIC.svg`, see [`plot`]), then
//! `results.json` and `report.md` for all experiments run.
//!
//! Why here and not in the CLI: the formats are part of the experiment layer
//! (tests and other tools read them), and they must be deterministic: fixed
//! float formatting, `BTreeMap` order, no wall times.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::common::num;
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

/// `report.md`: per experiment the setting, the paper's numbers, our table
/// (mean [min-max] over seeds) and one verdict line per claim.
pub fn report_md(scale: Scale, experiments: &[Experiment], results: &[ExperimentResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# artq reproduce: the ART journal's evaluation\n");
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
    for r in results {
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
                            let _ =
                                write!(out, " {} [{}-{}] |", num(s.mean), num(s.min), num(s.max));
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
            if let Some((x, ys)) = super::artplus::frontier_axes(&r.name) {
                let mut groups: Vec<&str> = Vec::new();
                for row in &r.rows {
                    if !groups.contains(&row.group.as_str()) {
                        groups.push(&row.group);
                    }
                }
                let _ = writeln!(
                    out,
                    "Frontiers ({x} against {}), one per setting:\n",
                    ys.join(", ")
                );
                for (gi, g) in groups.iter().enumerate() {
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
    }
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
        if let Some(e) = experiments.iter().find(|e| e.name == r.name) {
            for (name, svg) in plot::experiment_charts(e, r) {
                put(name, svg)?;
            }
        }
    }
    put("results.json".into(), results_json(scale, results))?;
    put("report.md".into(), report_md(scale, experiments, results))?;
    Ok(written)
}
