//! Slow synchronous work a guest's call does on an executor thread (a PTX rewrite, the driver's
//! JIT of a module, a new sandbox arena, locking a guest's memory), done so that it holds up no
//! other task of that thread.
//!
//! Guests' calls run on the embedder's tokio workers (`gpuhost serve`'s, `gpuhost run`'s). A task
//! that a worker's running task wakes goes into that worker's LIFO slot, and in tokio 1.54 no
//! other worker steals from a LIFO slot (stealing it was added in 1.51 and reverted, #8100): the
//! woken task waits until the worker's current poll returns, however many workers are idle. A
//! request task that wakes another (its connection, another request's body) and then JITs a
//! module for 200 ms held that other request for 200 ms; under a loaded GPU a driver call takes
//! seconds (session 48's cut-short body test, a streamed response that stalled 3 s while other
//! processes loaded the GPU, fits this; this module's test shows the stall itself).
//! `block_in_place` hands the worker's queue, LIFO slot included, to another thread for the
//! call's length, so those tasks run meanwhile.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which may take milliseconds or block in the driver, without holding up the tasks
/// queued on this thread's tokio worker: through `block_in_place` on a multi-thread runtime's
/// thread; directly elsewhere (a current-thread runtime, which has no other thread to hand them
/// to, or no runtime).
///
/// Only for work that is slow: handing a worker's queue over costs a thread's wake-up (tens of
/// microseconds), more than a cached module's look-up or a pooled pair's reuse take.
///
/// tokio panics in one nesting this cannot see: a multi-thread runtime's handle entered (not
/// `block_on`) on a thread that runs a current-thread runtime's `block_on`. No embedder of this
/// crate should nest runtimes so; gpuhost's own never do.
pub(crate) fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::off_worker;

    /// Task A wakes task B (into A's worker's LIFO slot), then does `work` on its thread, which
    /// is given a wait for B to have run (up to a time) and returns whether it did.
    fn woken_task_ran_while_the_waker_worked(work: fn(&dyn Fn(Duration) -> bool) -> bool) -> bool {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let (ready, parked) = tokio::sync::oneshot::channel::<()>();
            let (wake, woken) = tokio::sync::oneshot::channel::<()>();
            let (ran, has_run) = mpsc::channel::<()>();
            let b = tokio::spawn(async move {
                let _ = ready.send(());
                if woken.await.is_ok() {
                    let _ = ran.send(());
                }
            });
            parked.await.expect("task B started");
            // B goes from its `ready` to waiting on `woken` in nanoseconds; tokio tells no one
            // that a task is idle, so give it far more than that.
            std::thread::sleep(Duration::from_millis(50));
            let a = tokio::spawn(async move {
                let _ = wake.send(());
                work(&|patience| has_run.recv_timeout(patience).is_ok())
            });
            let ran = a.await.expect("task A");
            b.await.expect("task B");
            ran
        })
    }

    #[test]
    fn a_task_woken_before_slow_work_runs_during_it_when_the_work_is_off_the_worker() {
        // Ten seconds is only waited out when the woken task is stranded: the test's failure.
        assert!(
            woken_task_ran_while_the_waker_worked(|wait| off_worker(|| wait(Duration::from_secs(
                10
            )))),
            "the woken task did not run while its waker's work was off the worker"
        );
    }

    #[test]
    fn without_it_the_woken_task_waits_in_the_lifo_slot_for_the_whole_work() {
        // What off_worker is for: the same work done in place strands the woken task, with an
        // idle worker beside it. If a tokio release lets idle workers steal the LIFO slot, this
        // fails, and off_worker may no longer be needed.
        assert!(
            !woken_task_ran_while_the_waker_worked(|wait| wait(Duration::from_secs(1))),
            "the woken task ran while its waker blocked in place: tokio now steals the LIFO slot"
        );
    }

    #[test]
    fn on_a_current_thread_runtime_and_outside_any_runtime_the_work_runs_in_place() {
        assert_eq!(off_worker(|| 7), 7);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        assert_eq!(rt.block_on(async { off_worker(|| 8) }), 8);
    }
}
