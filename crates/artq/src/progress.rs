//! The progress display of long commands (`artq reproduce`, `artq train`) on
//! stderr: indicatif's bars on a terminal (one over every step with its rate
//! and ETA, and one per stage in progress: the experiments of `artq
//! reproduce`, whose runs go in parallel from one queue, so two or three
//! are under way at a time), one plain line per step otherwise (logs, CI),
//! exactly as before indicatif: tests and scripts read those lines.

use std::collections::BTreeMap;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars' layout: what is counted, how far, how fast, how long left.
const TOTAL_TEMPLATE: &str =
    "{prefix:>10} [{bar:30.cyan/blue}] {pos}/{len} {msg}  {per_sec}  {elapsed} elapsed, ETA {eta}";
/// A stage's bar under the total.
const STAGE_TEMPLATE: &str = "{prefix:>10} [{bar:30.green/white}] {pos}/{len} {msg}";

/// The progress display of a long command: bars on a terminal, plain lines
/// otherwise.
pub struct Progress {
    /// The bars, when stderr is a terminal.
    bars: Option<Bars>,
}

/// The terminal's bars.
struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    /// The stages' lengths, from [`Progress::stage`], and the bars of those
    /// in progress (shown from their first step to their last).
    stages: BTreeMap<String, (usize, Option<ProgressBar>)>,
}

/// A style from `template`, or indicatif's default if the template is
/// refused (it is a constant: only a change of indicatif could do that).
fn bar_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Progress {
    /// A display over `total` steps of `unit` (`runs`, `episodes`): bars
    /// when `terminal`, plain lines otherwise.
    pub fn new(total: usize, unit: &'static str, terminal: bool) -> Progress {
        let bars = terminal.then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let total = multi.add(ProgressBar::new(total as u64));
            total.set_style(bar_style(TOTAL_TEMPLATE));
            total.set_prefix("total");
            total.set_message(unit);
            total.enable_steady_tick(Duration::from_millis(250));
            Bars {
                multi,
                total,
                stages: BTreeMap::new(),
            }
        });
        Progress { bars }
    }

    /// A line that stays (an experiment starts), printed above the bars.
    pub fn note(&mut self, line: &str) {
        match &self.bars {
            Some(b) => {
                if b.multi.println(line).is_err() {
                    eprintln!("{line}");
                }
            }
            None => eprintln!("{line}"),
        }
    }

    /// Declares a stage of `len` steps called `name` (an experiment of
    /// `artq reproduce`): on a terminal, its bar appears under the total's
    /// with its first step ([`Progress::step_done_in`]) and leaves with its
    /// last.
    pub fn stage(&mut self, name: &str, len: usize) {
        if let Some(b) = &mut self.bars {
            b.stages.insert(name.to_string(), (len, None));
        }
    }

    /// One step finished: `line` off a terminal, the total's bar moved on
    /// one on it.
    pub fn step_done(&mut self, line: &str) {
        self.step_done_in(None, line);
    }

    /// One step of `stage` finished: `line` off a terminal, the total's
    /// bar and the stage's moved on one on it.
    pub fn step_done_in(&mut self, stage: Option<&str>, line: &str) {
        let Some(b) = &mut self.bars else {
            eprintln!("{line}");
            return;
        };
        b.total.inc(1);
        let Some((len, bar)) = stage.and_then(|s| b.stages.get_mut(s)) else {
            return;
        };
        let bar = bar.get_or_insert_with(|| {
            let bar = b.multi.add(ProgressBar::new(*len as u64));
            bar.set_style(bar_style(STAGE_TEMPLATE));
            bar.set_prefix(stage.unwrap_or_default().to_string());
            bar.set_message("runs");
            bar
        });
        bar.inc(1);
        if bar.position() >= *len as u64 {
            bar.finish_and_clear();
        }
    }

    /// The work is over: the bars leave the screen.
    pub fn finish(&mut self) {
        if let Some(b) = self.bars.take() {
            for (_, bar) in b.stages.into_values() {
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
            }
            b.total.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_valid() {
        assert!(ProgressStyle::with_template(TOTAL_TEMPLATE).is_ok());
        assert!(ProgressStyle::with_template(STAGE_TEMPLATE).is_ok());
    }

    #[test]
    fn bars_count_the_steps_of_the_total_and_of_the_stage() {
        let mut p = Progress::new(5, "runs", true);
        // Hidden: the test's stderr is not the user's screen.
        if let Some(b) = &p.bars {
            b.multi.set_draw_target(ProgressDrawTarget::hidden());
        }
        p.stage("fig19", 2);
        p.stage("fig20", 3);
        p.step_done_in(Some("fig19"), "a");
        // Two stages in progress at once, each with its own bar.
        p.step_done_in(Some("fig20"), "c");
        p.step_done_in(Some("fig19"), "b");
        let b = p.bars.as_ref().expect("bars on a terminal");
        assert_eq!(b.total.position(), 3);
        assert_eq!(b.total.length(), Some(5));
        let bar = |name: &str| b.stages[name].1.clone().expect("a stage bar");
        assert_eq!(
            (bar("fig20").position(), bar("fig20").length()),
            (1, Some(3))
        );
        assert_eq!(bar("fig20").prefix(), "fig20");
        assert!(!bar("fig20").is_finished());
        // fig19's last step took its bar off the screen.
        assert!(bar("fig19").is_finished());
        p.finish();
        assert!(p.bars.is_none());
    }

    #[test]
    fn off_a_terminal_there_are_no_bars() {
        let mut p = Progress::new(2, "runs", false);
        p.stage("fig19", 2);
        p.step_done_in(Some("fig19"), "line");
        assert!(p.bars.is_none());
    }
}
