//! The progress bar of long commands (`artq reproduce`, `artq train`) on
//! stderr: redrawn in place on a terminal, one line per step otherwise
//! (logs, CI).

/// Width of the bar, characters.
const BAR_WIDTH: usize = 30;

/// The progress display of `artq reproduce` and `artq train` on stderr: a bar redrawn in
/// place on a terminal, plain lines otherwise (logs, CI).
pub struct ProgressBar {
    total: usize,
    /// What is counted (`runs`, `episodes`).
    unit: &'static str,
    done: usize,
    terminal: bool,
    /// The bar is on screen (the next plain line must start on a new line).
    drawn: bool,
}

impl ProgressBar {
    /// A bar over `total` steps of `unit` (`runs`).
    pub fn new(total: usize, unit: &'static str, terminal: bool) -> ProgressBar {
        ProgressBar {
            total: total.max(1),
            unit,
            done: 0,
            terminal,
            drawn: false,
        }
    }

    /// A line that stays (an experiment starts).
    pub fn note(&mut self, line: &str) {
        if self.drawn {
            eprint!("\r\x1b[2K");
            self.drawn = false;
        }
        eprintln!("{line}");
    }

    /// One step finished: a line off a terminal, the bar redrawn on one.
    pub fn step_done(&mut self, line: &str, experiment: &str, elapsed: std::time::Duration) {
        self.done += 1;
        if !self.terminal {
            eprintln!("{line}");
            return;
        }
        eprint!("\r\x1b[2K{}", self.render(experiment, elapsed));
        self.drawn = true;
    }

    /// `[=========>          ] 12/40 runs  art-fig23  0:31 elapsed, ~1:10 left`
    fn render(&self, experiment: &str, elapsed: std::time::Duration) -> String {
        let filled = (self.done * BAR_WIDTH / self.total).min(BAR_WIDTH);
        let mut bar = "=".repeat(filled);
        if filled < BAR_WIDTH {
            bar.push('>');
            bar.push_str(&" ".repeat(BAR_WIDTH - filled - 1));
        }
        let secs = elapsed.as_secs_f64();
        let left = if self.done == 0 {
            String::new()
        } else {
            let rest = secs / self.done as f64 * (self.total - self.done.min(self.total)) as f64;
            format!(", ~{} left", clock(rest))
        };
        format!(
            "[{bar}] {}/{} {}  {experiment}  {} elapsed{left}",
            self.done,
            self.total,
            self.unit,
            clock(secs)
        )
    }

    pub fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

/// `m:ss`.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    format!("{}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_with_the_runs() {
        let mut b = ProgressBar::new(4, "runs", false);
        let zero = b.render("x", std::time::Duration::from_secs(0));
        assert!(zero.starts_with("[>"), "{zero}");
        assert!(zero.contains("0/4 runs"));
        b.done = 2;
        let half = b.render("art-fig23", std::time::Duration::from_secs(30));
        assert!(
            half.contains(&format!("[{}>", "=".repeat(BAR_WIDTH / 2))),
            "{half}"
        );
        assert!(
            half.contains("2/4 runs  art-fig23  0:30 elapsed, ~0:30 left"),
            "{half}"
        );
        b.done = 4;
        let full = b.render("x", std::time::Duration::from_secs(75));
        assert!(
            full.contains(&format!("[{}]", "=".repeat(BAR_WIDTH))),
            "{full}"
        );
        assert!(full.contains("1:15 elapsed, ~0:00 left"), "{full}");
    }
}
