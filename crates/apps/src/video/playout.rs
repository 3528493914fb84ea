//! [`Playout`]: the player model both video workloads share (the live
//! stream's frames and DASH's segments are both "units" of media).
//!
//! A unit covers `[media_time, media_time + duration)` of the presentation.
//! Playback starts `startup_delay` after the first unit has fully arrived
//! (1 s for the live player; 0 for DASH, which starts as soon as its first
//! segment is in). From then on the unit at media time `m` is due at
//! `start + (m - m0) + stalled`, where `m0` is the first unit's media time
//! and `stalled` the time playback has been frozen so far. A stall (a
//! *freeze* for the live stream, a *rebuffering* event for DASH) starts
//! when a unit's due time passes before the unit has fully arrived, and
//! ends once the player has buffered again what it waited for at start-up:
//! `startup_delay` of media from the frozen playhead on (or the stream has
//! ended). Playback resumes then, and every later due time moves back by
//! the stall's length.
//!
//! Why resume only with a refilled buffer: a player that resumes the
//! moment the awaited unit arrives plays on with an empty buffer, and a
//! live stream arrives no faster than it plays, so the buffer never grows
//! back. Every later frame that comes later than the one it waited for (a
//! bigger I-frame, a queue that has grown, a second retransmission) is
//! then a freeze of its own, and one deep stall turns into a cluster of
//! freezes that lasts the rest of the stream: freeze counts then measure
//! whether a first deep stall happened, not how many there were (in the
//! simulator, at AutoRec's default setting with a 300 ms start-up delay,
//! 21 of 32 runs never froze, one froze once and ten 8 to 28 times).
//! Real players refill first
//! (ExoPlayer waits for `bufferForPlaybackAfterRebufferMs`, 5 s by
//! default, twice its 2.5 s start-up buffer); we refill what start-up
//! buffered, the least that restores the player's slack. DASH starts with
//! no start-up delay, so it resumes with the awaited segment.
//!
//! Units must be handed over in presentation order (frames on one stream,
//! segments fetched one after another arrive that way). The model keeps
//! only counters: constant memory for a stream of any length.

use wire::time::{Duration, Instant};

/// The playout buffer and stall accounting of one player.
#[derive(Clone, Debug)]
pub struct Playout {
    startup_delay: Duration,
    /// When the player asked for the stream (the reference of start-up
    /// time).
    origin: Option<Instant>,
    /// When playback starts (or started): `startup_delay` after the first
    /// unit arrived.
    start: Option<Instant>,
    /// Media time of the first unit.
    media_origin: Duration,
    /// End of the media received so far (media time).
    media_end: Duration,
    /// Stalls so far (not counting one in progress).
    stalls: u64,
    /// Time frozen so far (not counting a stall in progress).
    stalled: Duration,
    /// The stall in progress, if any.
    stall: Option<Stall>,
}

/// A stall in progress: playback froze at `since` with the playhead at
/// media time `playhead`, and resumes once `startup_delay` of media from
/// there has arrived.
#[derive(Clone, Copy, Debug)]
struct Stall {
    since: Instant,
    playhead: Duration,
    /// The latest arrival during the stall: where the stall ends if the
    /// stream ends before the buffer refills.
    last_arrival: Instant,
}

/// What a [`Playout`] has measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlayoutStats {
    /// From the request to the start of playback; `None` before playback
    /// could start.
    pub startup: Option<Duration>,
    /// Media received (and so played, or playable), from the first unit to
    /// the end of the last.
    pub played: Duration,
    /// Stalls (freezes, rebufferings) after playback started.
    pub stalls: u64,
    /// Their total length.
    pub stalled: Duration,
}

impl PlayoutStats {
    /// `x` per 100 s of playback (0 when nothing was played).
    pub fn per_100s(&self, x: f64) -> f64 {
        let s = self.played.as_secs_f64();
        if s > 0.0 {
            x * 100.0 / s
        } else {
            0.0
        }
    }
}

impl Playout {
    /// A player that starts `startup_delay` after its first unit arrived,
    /// and after a stall resumes once `startup_delay` of media is buffered
    /// again.
    pub fn new(startup_delay: Duration) -> Playout {
        Playout {
            startup_delay,
            origin: None,
            start: None,
            media_origin: Duration::ZERO,
            media_end: Duration::ZERO,
            stalls: 0,
            stalled: Duration::ZERO,
            stall: None,
        }
    }

    /// The player asked for the stream at `now` (start-up time counts from
    /// the first call).
    pub fn requested(&mut self, now: Instant) {
        self.origin.get_or_insert(now);
    }

    /// When the unit at `media_time` is (or was) due, given the stalls so
    /// far; `None` before the first unit.
    fn due(&self, media_time: Duration) -> Option<Instant> {
        let start = self.start?;
        Some(start + media_time.saturating_sub(self.media_origin) + self.stalled)
    }

    /// The unit covering `[media_time, media_time + duration)` has fully
    /// arrived at `now`.
    pub fn arrived(&mut self, now: Instant, media_time: Duration, duration: Duration) {
        self.media_end = self.media_end.max(media_time.saturating_add(duration));
        if let Some(stall) = &mut self.stall {
            stall.last_arrival = now;
            self.try_resume(now);
            return;
        }
        match self.due(media_time) {
            None => {
                self.origin.get_or_insert(now);
                self.start = Some(now + self.startup_delay);
                self.media_origin = media_time;
            }
            Some(due) if now > due => {
                self.stall = Some(Stall {
                    since: due,
                    playhead: media_time,
                    last_arrival: now,
                });
                self.try_resume(now);
            }
            Some(_) => {}
        }
    }

    /// Ends the stall in progress at `now` once the buffer has refilled.
    fn try_resume(&mut self, now: Instant) {
        if let Some(stall) = self.stall {
            if self.media_end.saturating_sub(stall.playhead) >= self.startup_delay {
                self.stalls += 1;
                self.stalled += now.saturating_duration_since(stall.since);
                self.stall = None;
            }
        }
    }

    /// Media buffered ahead of the playhead at `now`: what can still play
    /// without a new unit (everything received, before playback starts).
    pub fn buffered(&self, now: Instant) -> Duration {
        if let Some(stall) = self.stall {
            return self.media_end.saturating_sub(stall.playhead);
        }
        match self.due(self.media_end) {
            None => Duration::ZERO,
            Some(end) => match self.start {
                Some(start) if now < start => self.media_end.saturating_sub(self.media_origin),
                _ => end.saturating_duration_since(now),
            },
        }
    }

    /// The statistics so far. With `ended_at`, the stream stopped there
    /// before its end (the connection failed): a stall in progress then
    /// counts up to that time.
    pub fn stats(&self, ended_at: Option<Instant>) -> PlayoutStats {
        let mut s = PlayoutStats {
            startup: match (self.origin, self.start) {
                (Some(o), Some(s)) => Some(s.saturating_duration_since(o)),
                _ => None,
            },
            played: self.media_end.saturating_sub(self.media_origin),
            stalls: self.stalls,
            stalled: self.stalled,
        };
        if let Some(stall) = self.stall {
            // Broken off: frozen up to the break. Complete: the player
            // plays what it has once nothing more can come, from the last
            // arrival on.
            let end = ended_at.unwrap_or(stall.last_arrival);
            s.stalls += 1;
            s.stalled += end.saturating_duration_since(stall.since);
        } else if let (Some(now), Some(due)) = (ended_at, self.due(self.media_end)) {
            if now > due {
                s.stalls += 1;
                s.stalled += now - due;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn at(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    /// Frames of 100 ms each arriving at the given times (ms).
    fn play(startup: u64, arrivals: &[u64]) -> Playout {
        let mut p = Playout::new(ms(startup));
        p.requested(at(0));
        for (i, &t) in arrivals.iter().enumerate() {
            p.arrived(at(t), ms(100 * i as u64), ms(100));
        }
        p
    }

    #[test]
    fn on_time_arrivals_never_stall() {
        // Frames produced every 100 ms, arriving 50 ms later; 1 s start-up.
        let p = play(1000, &[50, 150, 250, 350, 450]);
        let s = p.stats(None);
        assert_eq!(s.stalls, 0);
        assert_eq!(s.stalled, Duration::ZERO);
        assert_eq!(s.startup, Some(ms(1050)));
        assert_eq!(s.played, ms(500));
    }

    #[test]
    fn a_late_frame_freezes_until_it_arrives_and_shifts_the_rest() {
        // Start-up 200 ms: playback at 250; frame 3 due at 550, arrives at
        // 900 (350 ms freeze); frame 4 is now due at 1000 and arrives with
        // frame 3: no second freeze. Frame 5 due 1100, arrives 1150: 50 ms.
        let p = play(200, &[50, 150, 250, 900, 900, 1150]);
        let s = p.stats(None);
        assert_eq!((s.stalls, s.stalled), (2, ms(400)));
        assert!((s.per_100s(s.stalls as f64) - 2.0 * 100.0 / 0.6).abs() < 1e-9);
    }

    /// Frames 0..30 of 100 ms: 0 and 1 on time, 2 stalls (in at 800), and
    /// from then on every third frame later than the last late one by
    /// 20 ms more (a latency that creeps up, as a queue that builds).
    fn creeping(extra: &[u64]) -> Vec<u64> {
        let mut arrivals = vec![50, 150, 800];
        arrivals.extend_from_slice(extra);
        for i in (3 + extra.len() as u64)..30 {
            let late = if i % 3 == 0 { 20 * (i / 3) } else { 0 };
            arrivals.push(800 + 100 * (i - 2) + late);
        }
        arrivals
    }

    #[test]
    fn after_a_freeze_playback_waits_for_the_startup_buffer_again() {
        // Start-up 300 ms: playback at 350. Frame 2 due at 550 arrives at
        // 800: frozen from 550 with the playhead at 200 ms of media.
        let mut p = play(300, &[50, 150, 800, 900]);
        assert_eq!(p.stats(None).stalls, 1, "a stall in progress counts");
        assert_eq!(p.buffered(at(950)), ms(200), "refilling: 2 frames in");
        // Frame 4 (media 400..500) completes 300 ms at 1000: playback
        // resumes, one freeze of 450 ms, the buffer full again.
        p.arrived(at(1000), ms(400), ms(100));
        let s = p.stats(None);
        assert_eq!((s.stalls, s.stalled), (1, ms(450)));
        assert_eq!(p.buffered(at(1000)), ms(300));
        // Latency creeping up by 180 ms over the rest of the stream: the
        // refilled buffer absorbs it.
        assert_eq!(play(300, &creeping(&[900, 1000])).stats(None).stalls, 1);
    }

    #[test]
    fn resuming_with_an_empty_buffer_freezes_at_every_new_worst_delay() {
        // The same schedule for a player that resumes as soon as the
        // awaited frame is in (no start-up delay, as DASH): each later
        // frame that is later than any before freezes again.
        let s = play(0, &creeping(&[])).stats(None);
        assert_eq!(s.stalls, 1 + 9, "{s:?}");
    }

    #[test]
    fn a_stall_that_outlasts_the_stream_ends_at_the_last_arrival() {
        // Start-up 300: playback at 350; frame 2 due at 550 arrives at 700
        // and is the last: the stream is complete, so the player plays it
        // at once.
        let p = play(300, &[50, 150, 700]);
        assert_eq!(p.stats(None).stalls, 1);
        assert_eq!(p.stats(None).stalled, ms(150));
        // Broken off at 2000 instead: frozen until then.
        assert_eq!(p.stats(Some(at(2000))).stalled, ms(1450));
    }

    #[test]
    fn the_startup_delay_absorbs_jitter() {
        // A 600 ms hole in arrivals that a 1 s buffer hides.
        let p = play(1000, &[0, 100, 700, 750, 760]);
        assert_eq!(p.stats(None).stalls, 0);
        // The same schedule with no start-up delay stalls once (frame 2
        // due at 200, in at 700).
        let s = play(0, &[0, 100, 700, 750, 760]).stats(None);
        assert_eq!((s.stalls, s.stalled), (1, ms(500)));
    }

    #[test]
    fn the_buffer_grows_before_playback_and_drains_after() {
        let mut p = Playout::new(ms(0));
        p.requested(at(0));
        assert_eq!(p.buffered(at(0)), Duration::ZERO);
        // A 2 s segment in at 1 s: playback starts at once, 2 s buffered.
        p.arrived(at(1000), ms(0), ms(2000));
        assert_eq!(p.buffered(at(1000)), ms(2000));
        assert_eq!(p.buffered(at(2500)), ms(500));
        p.arrived(at(2500), ms(2000), ms(2000));
        assert_eq!(p.buffered(at(2500)), ms(2500));
        assert_eq!(p.buffered(at(9000)), Duration::ZERO);
        // Segment 3 due at 5000, arrives at 6000: one rebuffering of 1 s.
        p.arrived(at(6000), ms(4000), ms(2000));
        let s = p.stats(None);
        assert_eq!((s.stalls, s.stalled, s.played), (1, ms(1000), ms(6000)));
        assert_eq!(
            s.startup,
            Some(ms(1000)),
            "from the request to the first unit"
        );
        // Before playback starts, the buffer is what arrived.
        let mut q = Playout::new(ms(1000));
        q.arrived(at(0), ms(0), ms(40));
        q.arrived(at(10), ms(40), ms(40));
        assert_eq!(q.buffered(at(20)), ms(80));
    }

    #[test]
    fn a_stream_cut_short_counts_the_stall_in_progress() {
        let p = play(0, &[0, 100]);
        // Media ends at 200 ms of playback; the stream died at 700.
        let s = p.stats(Some(at(700)));
        assert_eq!((s.stalls, s.stalled), (1, ms(500)));
        // Died while the buffer still played: no stall.
        assert_eq!(p.stats(Some(at(150))).stalls, 0);
        // Nothing ever arrived: no playback, no start-up time.
        let empty = Playout::new(ms(1000)).stats(Some(at(5000)));
        assert_eq!(empty, PlayoutStats::default());
    }
}
