//! CPU time of a child process, read from `/proc/<pid>/stat` (Linux), and
//! of this process and its ended children (`getrusage`).
//!
//! Why: the loopback benchmark reports a server's CPU time per megabyte
//! delivered, for `artq serve` and for the quinn server, both child
//! processes. `utime + stime` in `/proc/<pid>/stat` count every thread the
//! process has had, including threads that have already exited (quinn's
//! per-request file readers), which per-thread counters would miss. The
//! resolution is one clock tick (10 ms at the usual 100 Hz), so a
//! measurement should last well over a second of CPU for a figure to within
//! a few percent.

use std::io;
use std::time::Duration;

/// User plus system CPU time `pid` has used so far (all its threads).
///
/// Fails where there is no `/proc` (not Linux) or the process is gone.
pub fn process_cpu_time(pid: u32) -> io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_stat_ticks(&stat).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot read utime and stime from /proc/{pid}/stat: {stat:?}"),
        )
    })?;
    Ok(ticks_to_duration(ticks, clock_ticks_per_second()))
}

/// User plus system CPU time of this process's children that have ended
/// and been waited for (`getrusage(RUSAGE_CHILDREN)`): around a batch of
/// `artq get` children, the delta is the clients' CPU.
pub fn ended_children_cpu_time() -> io::Result<Duration> {
    rusage(libc::RUSAGE_CHILDREN)
}

/// User plus system CPU time of this process, all its threads
/// (`getrusage(RUSAGE_SELF)`): around in-process quinn clients, the delta
/// is the clients' CPU.
pub fn own_cpu_time() -> io::Result<Duration> {
    rusage(libc::RUSAGE_SELF)
}

fn rusage(who: libc::c_int) -> io::Result<Duration> {
    // SAFETY: getrusage writes one `rusage` into the zeroed value we own
    // and reads nothing else; `who` is one of the two constants above.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut usage) != 0 {
            return Err(io::Error::last_os_error());
        }
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ok(time(usage.ru_utime) + time(usage.ru_stime))
}

/// `utime + stime` (fields 14 and 15, in clock ticks) of a `/proc/<pid>/stat`
/// line. The command name (field 2) is parenthesised and may itself contain
/// spaces and parentheses, so fields are counted from its last `)`.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(11); // field 3 is index 0
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// `ticks` clock ticks at `per_second` ticks per second.
fn ticks_to_duration(ticks: u64, per_second: u64) -> Duration {
    let per_second = per_second.max(1);
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(per_second);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The kernel's clock-tick rate for `/proc` times (`getconf CLK_TCK`).
fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_odd_command_name_is_parsed() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime ...
        let line = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 70 0 0 20 0 3 0";
        assert_eq!(parse_stat_ticks(line), Some(320));
        assert_eq!(parse_stat_ticks("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat_ticks("no parenthesis"), None);
        assert_eq!(ticks_to_duration(250, 100), Duration::from_millis(2500));
    }

    #[test]
    fn own_cpu_time_is_readable_and_grows() {
        let pid = std::process::id();
        let before = process_cpu_time(pid).expect("own /proc stat");
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = process_cpu_time(pid).expect("own /proc stat");
        assert!(after >= before, "{before:?} -> {after:?}");
        assert!(process_cpu_time(u32::MAX).is_err(), "no such process");
        let own = own_cpu_time().expect("getrusage");
        assert!(
            own >= Duration::from_millis(90),
            "{own:?} after 100 ms of work"
        );
        let children_before = ended_children_cpu_time().expect("getrusage");
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        let children = ended_children_cpu_time().expect("getrusage") - children_before;
        assert!(children > Duration::ZERO, "the child's CPU was not counted");
    }
}
