//! The host's deferred releases: one background thread per host makes the driver calls that
//! wait until every kernel running on the device has ended, so that no caller's thread (a tokio
//! worker, a request, a release) waits for kernels it did not launch.
//!
//! On the H200 (driver 580), cuModuleUnload waits for every running kernel, not only its own
//! module's, and cuMemHostUnregister and cuMemFree wait too and hold every other thread's driver
//! calls meanwhile (bench/h200-runs/2026-12-02-s12/unload-stall/README.md). A sandboxed guest's
//! kernel may legally run for its whole `max_kernel_time` (10 s by default), so each of these
//! made on a request's thread could stall that request, or a tokio worker and every task on it,
//! for as long. They run here instead:
//! - module unloads (a registry's last handle dropped, or [`release`](crate::release));
//! - unregistering a page-locked region the host's pool does not keep (pinned.rs);
//! - cuMemFree, only on a driver without stream-ordered pools (device_alloc.rs).
//!
//! Jobs run in the order queued; each binds the context itself and skips handles of a lost
//! generation. [`Host::wait_unloads`] waits for every job queued before it (tests that count
//! live modules, a server's shutdown). If the thread cannot be started, a job runs on the
//! caller's thread, as every one did before.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use crate::host::Host;

/// A deferred release.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A host's queue of deferred releases and the thread that runs them.
#[derive(Default)]
pub(crate) struct Deferred {
    state: Mutex<State>,
    changed: Condvar,
    /// Whether the thread runs (set on the first job).
    started: OnceLock<bool>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Jobs queued and jobs finished, ever: a waiter waits for `finished` to reach `queued` as
    /// it was when it began, so jobs queued after it never hold it.
    queued: u64,
    finished: u64,
}

impl Deferred {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Each critical section leaves the state consistent; jobs run outside the lock.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job` for the background thread of host `ordinal` (started on the first job);
    /// runs it here when no thread could be started.
    pub(crate) fn push(self: &Arc<Self>, ordinal: usize, job: Job) {
        let started = *self.started.get_or_init(|| {
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name(format!("gpuhost-release-{ordinal}"))
                .spawn(move || me.run())
                .is_ok()
        });
        if !started {
            job();
            return;
        }
        let mut st = self.lock();
        st.queued += 1;
        st.queue.push_back(job);
        self.changed.notify_all();
    }

    /// The thread's loop: one job at a time, for the life of the process (a host is never
    /// dropped).
    fn run(&self) {
        loop {
            let job = {
                let mut st = self.lock();
                loop {
                    if let Some(job) = st.queue.pop_front() {
                        break job;
                    }
                    st = self
                        .changed
                        .wait(st)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            // A panicking job must still count as finished, or waiters would wait forever.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            let mut st = self.lock();
            st.finished += 1;
            self.changed.notify_all();
        }
    }

    /// Blocks until every job queued before this call has run.
    pub(crate) fn wait(&self) {
        let mut st = self.lock();
        let target = st.queued;
        while st.finished < target {
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Host {
    /// Blocks until every module unload queued so far (by [`release`](crate::release) or by a
    /// registry's last handle going) and every other deferred release has been made, so that
    /// [`Host::stats`] counts them. These wait for the kernels running on the device when they
    /// are made, which is why they are made on a background thread and not by their caller;
    /// this waits as long. For tests that count live modules, and for a server's shutdown.
    pub fn wait_unloads(&self) {
        self.deferred.wait();
    }

    /// Queues a deferred release on this host's background thread.
    pub(crate) fn defer(&self, job: Job) {
        self.deferred.push(self.ordinal(), job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn jobs_run_in_order_and_a_wait_covers_every_job_queued_before_it() {
        let d = Arc::new(Deferred::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        {
            let gate = Arc::clone(&gate);
            d.push(
                0,
                Box::new(move || {
                    let (open, cv) = &*gate;
                    let mut o = open.lock().unwrap();
                    while !*o {
                        o = cv.wait(o).unwrap();
                    }
                }),
            );
        }
        for i in 0..3 {
            let log = Arc::clone(&log);
            d.push(0, Box::new(move || log.lock().unwrap().push(i)));
        }
        assert!(log.lock().unwrap().is_empty(), "queued behind the first");
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        d.wait();
        assert_eq!(*log.lock().unwrap(), [0, 1, 2]);
    }

    #[test]
    fn a_panicking_job_still_counts_as_finished() {
        let d = Arc::new(Deferred::default());
        let ran = Arc::new(AtomicUsize::new(0));
        d.push(0, Box::new(|| panic!("a failing release")));
        let r = Arc::clone(&ran);
        d.push(
            0,
            Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }),
        );
        d.wait();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
