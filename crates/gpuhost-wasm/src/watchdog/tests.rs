//! Tests of the watchdog (the parent module): a launch stopped at its own limit counted from its
//! start, not charged while held off the device, and one waiting in the driver keeping no
//! other guest's runaway from being stopped.

use super::*;

/// Waits up to `within` for `ctl`'s epoch to change; whether it did.
fn stopped_within(ctl: &ControlBlock, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if ctl.load_u32(CTL_EPOCH) != 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Counts a launch's start in start counter `counter` of `ctl` and stores a new value in its
/// time word, as a sandboxed kernel's first thread does (`ptxvm::sandbox::CTL_STARTED`,
/// `CTL_STARTED_AT`).
fn count_start(ctl: &ControlBlock, counter: u32) {
    let base = ctl.device_ptr() as usize;
    let at = base + gpuhost::START_COUNTER_OFFSET + 4 * counter as usize;
    // SAFETY: a start counter of a live control block: managed memory, which the CPU reaches
    // at its device address, 4-aligned, and changed by anyone only with atomics.
    unsafe { AtomicU32::from_ptr(at as *mut u32) }.fetch_add(1, Ordering::SeqCst);
    let at = base + gpuhost::START_TIME_OFFSET + 8 * counter as usize;
    // SAFETY: the counter's time word in the same block, 8-aligned.
    let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(at as *mut u64) };
    word.fetch_add(1, Ordering::SeqCst);
}

/// What a stand-in kernel (a stream callback) is given: its guest's control block, its
/// stream's start counter, how long it waits before it starts (held off the device by
/// another guest's work), and where it notes when it started and whether it was stopped
/// before.
struct Standin {
    ctl: ControlBlock,
    counter: u32,
    queued: Duration,
    started: Mutex<Option<Instant>>,
    stopped_while_queued: AtomicBool,
}

/// A stream callback (cuLaunchHostFunc) standing in for a sandboxed endless kernel: it waits
/// `queued`, counts its start, then holds its stream until its guest is stopped, which only
/// the watchdog does.
unsafe extern "C" fn hold_until_stopped(standin: *mut std::ffi::c_void) {
    // SAFETY: the test passes an `Arc<Standin>` turned into a raw pointer, which this call,
    // made once, takes back.
    let s = unsafe { Arc::from_raw(standin.cast::<Standin>()) };
    if stopped_within(&s.ctl, s.queued) {
        s.stopped_while_queued.store(true, Ordering::SeqCst);
    }
    count_start(&s.ctl, s.counter);
    *lock(&s.started) = Some(Instant::now());
    stopped_within(&s.ctl, Duration::from_secs(20));
}

/// Queues a [`hold_until_stopped`] stand-in on `stream`.
fn queue_standin(stream: &gpuhost::Stream, standin: &Arc<Standin>) {
    let raw = Arc::into_raw(standin.clone()).cast_mut().cast();
    // SAFETY: a live stream of the host's current context (bound by host.stream() on this
    // thread), and a callback that takes its argument back exactly once.
    let r = unsafe { gpuhost::sys::cuLaunchHostFunc(stream.raw(), Some(hold_until_stopped), raw) };
    assert_eq!(r, gpuhost::sys::CUresult::CUDA_SUCCESS);
}

#[test]
fn a_launch_waiting_in_the_driver_does_not_keep_the_watchdog_from_stopping_another_guest() {
    let host = gpuhost::host(0).unwrap();
    // B first: the watchdog looks at guests in the order they came, so it reaches B's
    // stream before A's.
    let watch_b = StoreWatch::new(host.control_block().unwrap(), Duration::from_secs(60));
    let ctl_a = host.control_block().unwrap();
    let watch_a = StoreWatch::new(ctl_a.clone(), Duration::from_millis(20));
    let (stream_a, stream_b) = (host.stream().unwrap(), host.stream().unwrap());
    let (sa, sb) = (watch_a.stream(), watch_b.stream());
    let name: Arc<str> = Arc::from("k");
    let inside = std::sync::Barrier::new(2);
    let seen = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // B's launch waits inside the driver until A is stopped: on NVIDIA a launch that
        // loads its module or grows local memory waits for the device, i.e. for A's kernel.
        let b = scope.spawn(|| {
            sb.launch(&watch_b, &name, 1, |_epoch| {
                inside.wait();
                let stopped = stopped_within(&ctl_a, Duration::from_secs(20));
                seen.store(stopped, Ordering::SeqCst);
                stream_b.fence()
            })
        });
        inside.wait();
        // A's launch: its work ends only once A is stopped, 20 ms after it began.
        let standin = Arc::new(standin(&ctl_a, sa.counter, Duration::ZERO));
        queue_standin(&stream_a, &standin);
        let done = sa
            .launch(&watch_a, &name, 1, |_epoch| stream_a.fence())
            .unwrap();
        let b_done = b.join().unwrap().unwrap();
        assert!(
            seen.load(Ordering::SeqCst),
            "the watchdog never stopped A while B's launch was in the driver"
        );
        done.wait().unwrap();
        b_done.wait().unwrap();
    });
    assert!(sa.take_stopped().is_some(), "A's stream was not told");
    assert!(sb.take_stopped().is_none(), "B was stopped too");
}

#[test]
fn a_launch_held_off_the_device_is_not_charged_until_it_starts_and_then_runs_its_limit() {
    let limit = Duration::from_millis(40);
    let (ctl, watch, stream, s) = one_stream(limit);
    assert_ne!(s.counter, UNTRACKED);
    // Another guest's kernels hold every SM for 300 ms, over seven times this one's limit;
    // then it starts, and never ends by itself.
    let standin = Arc::new(standin(&ctl, s.counter, Duration::from_millis(300)));
    queue_standin(&stream, &standin);
    let name: Arc<str> = Arc::from("k");
    let done = s.launch(&watch, &name, 1, |_stamp| stream.fence()).unwrap();
    done.wait().unwrap();
    let ended = Instant::now();
    assert!(
        !standin.stopped_while_queued.load(Ordering::SeqCst),
        "the launch was stopped before it reached the device"
    );
    let started = lock(&standin.started).expect("the stand-in started");
    assert!(
        ended.duration_since(started) >= limit,
        "stopped {:?} after it started, before its limit of {limit:?}",
        ended.duration_since(started)
    );
    assert_ne!(
        ctl.load_u32(CTL_EPOCH),
        0,
        "never stopped: it ended by itself"
    );
    assert!(s.take_stopped().is_some(), "the stream was not told");
}

#[test]
fn a_stream_past_its_guests_start_counters_still_has_its_runaway_stopped() {
    let limit = Duration::from_millis(40);
    let (ctl, watch, stream, _first) = one_stream(limit);
    // A guest that opened more streams than there are counters: this one has none.
    lock(&watch.free_counters).clear();
    let s = watch.stream();
    assert_eq!(s.counter, UNTRACKED);
    let endless = Arc::new(standin(&ctl, s.counter, Duration::ZERO));
    queue_standin(&stream, &endless);
    let name: Arc<str> = Arc::from("k");
    let done = s.launch(&watch, &name, 1, |_stamp| stream.fence()).unwrap();
    done.wait().unwrap();
    assert_ne!(
        ctl.load_u32(CTL_EPOCH),
        0,
        "never stopped: it ended by itself"
    );
    assert!(s.take_stopped().is_some(), "the stream was not told");
}

#[test]
fn each_launch_of_a_segment_gets_its_own_limit_from_its_own_start() {
    let limit = Duration::from_millis(100);
    let (ctl, watch, stream, s) = one_stream(limit);
    let name: Arc<str> = Arc::from("k");
    // Two launches within a tick, so one segment: the first runs 20 ms and ends, the second
    // never ends by itself. Under the segment rule the second ran until 200 ms after the
    // first began (180 ms of its own); now it is stopped at its own 100 ms.
    let short = Arc::new(standin(&ctl, s.counter, Duration::ZERO));
    let endless = Arc::new(standin(&ctl, s.counter, Duration::ZERO));
    queue_short(&stream, &short, Duration::from_millis(20));
    let first = s.launch(&watch, &name, 1, |_stamp| stream.fence()).unwrap();
    queue_standin(&stream, &endless);
    let done = s.launch(&watch, &name, 1, |_stamp| stream.fence()).unwrap();
    done.wait().unwrap();
    let ended = Instant::now();
    first.wait().unwrap();
    let began = lock(&endless.started).expect("the second launch started");
    let ran = ended.duration_since(began);
    assert!(
        ran >= limit,
        "stopped {ran:?} after it began, before its limit"
    );
    // Not a timing goal: half a limit of slack for a loaded machine, and still well short of
    // the 180 ms the segment rule gave it.
    assert!(
        ran < limit + limit / 2,
        "ran {ran:?} past its start: the segment's limits were shared"
    );
}

/// A new guest watched with `limit`, its control block, and one stream of it with its watch.
fn one_stream(
    limit: Duration,
) -> (
    ControlBlock,
    Arc<StoreWatch>,
    gpuhost::Stream,
    Arc<StreamWatch>,
) {
    let host = gpuhost::host(0).unwrap();
    let ctl = host.control_block().unwrap();
    let watch = StoreWatch::new(ctl.clone(), limit);
    let (stream, s) = (host.stream().unwrap(), watch.stream());
    (ctl, watch, stream, s)
}

/// A stand-in for a launch on start counter `counter` of `ctl`, held off the device for
/// `queued` first.
fn standin(ctl: &ControlBlock, counter: u32, queued: Duration) -> Standin {
    Standin {
        ctl: ctl.clone(),
        counter,
        queued,
        started: Mutex::new(None),
        stopped_while_queued: AtomicBool::new(false),
    }
}

/// A stream callback standing in for a sandboxed kernel that counts its start and ends
/// after the time it is given.
unsafe extern "C" fn run_then_end(arg: *mut std::ffi::c_void) {
    // SAFETY: `queue_short` passes an `(Arc<Standin>, Duration)` box, taken back once here.
    let b = unsafe { Box::from_raw(arg.cast::<(Arc<Standin>, Duration)>()) };
    count_start(&b.0.ctl, b.0.counter);
    *lock(&b.0.started) = Some(Instant::now());
    std::thread::sleep(b.1);
}

/// Queues a [`run_then_end`] stand-in running `for_` on `stream`.
fn queue_short(stream: &gpuhost::Stream, standin: &Arc<Standin>, for_: Duration) {
    let raw = Box::into_raw(Box::new((standin.clone(), for_))).cast();
    // SAFETY: a live stream of the host's current context, and a callback that takes its
    // argument back exactly once.
    let r = unsafe { gpuhost::sys::cuLaunchHostFunc(stream.raw(), Some(run_then_end), raw) };
    assert_eq!(r, gpuhost::sys::CUresult::CUDA_SUCCESS);
}

#[test]
fn a_store_dropped_after_its_launches_ended_leaves_its_epoch_alone() {
    let host = gpuhost::host(0).unwrap();
    let ctl = host.control_block().unwrap();
    let watch = StoreWatch::new(ctl.clone(), Duration::from_secs(5));
    let stream = host.stream().unwrap();
    let s = watch.stream();
    let name: Arc<str> = Arc::from("k");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // Two launches' worth of work on the stream, both ended before the drop, and no tick
    // in between need have closed them into a segment.
    for _ in 0..2 {
        let done = s.launch(&watch, &name, 1, |_epoch| stream.fence()).unwrap();
        // Awaited, as a guest's synchronize does: then it is known to have ended.
        rt.block_on(done).unwrap();
    }
    watch.store_dropped();
    assert_eq!(
        ctl.load_u32(CTL_EPOCH),
        0,
        "dropping an idle Store stored a new epoch (a CPU store to the block's page)"
    );
}
