//! The calling thread's CPU clock, which times a sampled guest run's polls (invoke.rs): the
//! run's CPU time until its response, against the respond phase's wall time.

use std::time::Duration;

/// A reading of the calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`). Where the clock
/// cannot be read (it always can on Linux), every reading is zero and the run's CPU time reads
/// as zero rather than failing the request.
pub(crate) struct ThreadCpu(Duration);

impl ThreadCpu {
    pub(crate) fn now() -> Self {
        // Through the C library, not rustix: rustix's raw backend finds the vDSO from the aux
        // vector on first use and faults under valgrind, whose aux vector names a vDSO it does not
        // map (scripts/probes/serve-callgrind.sh ends in SIGSEGV at the first sampled request).
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a live, writable timespec for the whole call, and the clock id is a
        // constant the C library defines; clock_gettime writes only `t`.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
            return Self(Duration::ZERO);
        }
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
        Self(Duration::new(secs, nanos))
    }

    /// The thread's CPU time since `self` was read (zero if read on another thread since: a
    /// poll runs on one thread, so it never is).
    pub(crate) fn elapsed(&self) -> Duration {
        Self::now().0.saturating_sub(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_cpu_clock_counts_the_threads_work_and_not_its_sleep() {
        let start = ThreadCpu::now();
        assert!(
            start.0 > Duration::ZERO,
            "a running thread has used some CPU"
        );
        let asleep = ThreadCpu::now();
        std::thread::sleep(Duration::from_millis(50));
        let slept = asleep.elapsed();
        // Busy until the clock shows 20 ms, or 5 s of wall time if it never does.
        let (busy, wall) = (ThreadCpu::now(), std::time::Instant::now());
        let mut x = 0u64;
        while busy.elapsed() < Duration::from_millis(20) && wall.elapsed() < Duration::from_secs(5)
        {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(
            slept < Duration::from_millis(20),
            "50 ms asleep read {slept:?} of CPU"
        );
        assert!(
            busy.elapsed() >= Duration::from_millis(20),
            "{:?} of wall time busy read {:?} of CPU",
            wall.elapsed(),
            busy.elapsed()
        );
        assert!(x > 0);
    }
}
