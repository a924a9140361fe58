//! No gpuhost call waits on its caller's thread for kernels it did not launch (issues #9, #11).
//!
//! On NVIDIA's driver, cuMemFree and cuModuleUnload wait until every kernel running in the
//! context has ended (bench/h200-runs/2026-12-02-s12/unload-stall/), and a sandboxed guest's
//! kernel may legally run for seconds. Each test here runs a kernel on one stream that spins
//! until a control-block word is set (or a 10 s `%globaltimer` deadline passes), makes the call
//! under test on another thread, and sets the word only once that call has returned: the kernel
//! reports which of the two stopped it. "The word" proves the call returned while the kernel
//! ran; "the deadline" means the call waited for it. Ordering facts, no timing thresholds.
//!
//! Each test runs alone (`exclusive`): a module load by a test running beside it waits for the
//! spinner and holds every thread's driver calls meanwhile, the call under test's too (seen on
//! the H200 in the parallel run at 04d46f5), which is the very stall these tests rule out for
//! gpuhost's own calls.

use std::sync::Arc;

use gpuhost::{Arg, ControlBlock, Host, LaunchConfig, ModuleImage, ModuleSource, Registry};

use crate::common::{bundle, exclusive, host, read_u32s, settled_stats};

/// Spins until `ctl[0]` is nonzero (then writes 1 to `out`) or `ns` nanoseconds of
/// `%globaltimer` have passed (then writes 2).
const SPIN: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry spin_until(.param .u64 ctl, .param .u64 out, .param .u64 ns)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<7>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [ctl];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd3, [ns];
    mov.u64 %rd4, %globaltimer;
    add.u64 %rd5, %rd4, %rd3;
    mov.u32 %r2, 2;
$L_spin:
    ld.volatile.global.u32 %r1, [%rd1];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_word;
    mov.u64 %rd6, %globaltimer;
    setp.lt.u64 %p2, %rd6, %rd5;
    @%p2 bra $L_spin;
    bra.uni $L_end;
$L_word:
    mov.u32 %r2, 1;
$L_end:
    st.global.u32 [%rd2], %r2;
    ret;
}
"#;

/// The deadline: only reached when the call under test waited for the kernel.
const DEADLINE_NS: u64 = 10_000_000_000;
const BY_WORD: u32 = 1;

/// A running spinner: its control block, its output word and its completion.
struct Spinner {
    ctl: ControlBlock,
    out: gpuhost::DeviceBuffer,
    done: gpuhost::Completion,
    _stream: gpuhost::Stream,
    _registry: Arc<Registry>,
}

impl Spinner {
    fn start(host: &Arc<Host>) -> Spinner {
        let registry = Registry::from_sources(
            host,
            "spinner",
            vec![ModuleSource::new(
                "spin_until",
                ModuleImage::Ptx(SPIN.into()),
            )],
        )
        .expect("load the spinner");
        let k = registry.kernel("spin_until").unwrap();
        let ctl = host.control_block().unwrap();
        let out = host.alloc(4).unwrap();
        out.fill(0, 4, 0).unwrap();
        let stream = host.stream().unwrap();
        let done = stream
            .launch(
                &k,
                LaunchConfig::for_elements(1, 1),
                &[
                    Arg::Buffer(&ctl.anchor(), 0),
                    Arg::Buffer(&out, 0),
                    Arg::U64(DEADLINE_NS),
                ],
            )
            .unwrap();
        Spinner {
            ctl,
            out,
            done,
            _stream: stream,
            _registry: registry,
        }
    }

    /// Runs `call` on another thread, then sets the word; true when the word (set after `call`
    /// returned) is what stopped the kernel.
    fn call_returned_while_running(self, call: impl FnOnce() + Send + 'static) -> bool {
        let ctl = self.ctl.clone();
        let caller = std::thread::spawn(move || {
            call();
            ctl.store_u32(0, 1);
        });
        caller.join().expect("the call under test");
        self.done.wait().unwrap();
        read_u32s(&self.out, 1)[0] == BY_WORD
    }
}

#[test]
fn dropping_a_large_buffer_while_another_streams_kernel_runs_returns_before_that_kernel_ends() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    // Larger than the allocation cache keeps (a quarter of its default limit): freed for real.
    let big = host.alloc(80 << 20).unwrap();
    let spinner = Spinner::start(&host);
    assert!(
        spinner.call_returned_while_running(move || drop(big)),
        "dropping the buffer waited for a kernel running on another stream"
    );
}

#[test]
fn trimming_the_allocation_cache_while_another_streams_kernel_runs_returns_before_that_kernel_ends()
{
    let _g = exclusive();
    let Some(host) = host() else { return };
    drop(host.alloc(4096).unwrap());
    let spinner = Spinner::start(&host);
    let h = Arc::clone(&host);
    assert!(
        spinner.call_returned_while_running(move || {
            h.trim_alloc_cache();
        }),
        "freeing kept allocations waited for a kernel running on another stream"
    );
}

#[test]
fn a_registry_release_does_not_wait_on_the_callers_thread_for_other_streams_kernels() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let registry = Registry::load(&host, bundle("stamp-b")).unwrap();
    let spinner = Spinner::start(&host);
    assert!(
        spinner.call_returned_while_running(move || {
            gpuhost::release(registry).unwrap();
        }),
        "release waited on its caller's thread for a kernel of another registry"
    );
}

#[test]
fn dropping_a_registrys_last_handle_does_not_wait_for_other_streams_kernels() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let registry = Registry::load(&host, bundle("stamp-a")).unwrap();
    drop(registry.kernel("stamp").unwrap());
    let spinner = Spinner::start(&host);
    assert!(
        spinner.call_returned_while_running(move || drop(registry)),
        "dropping the registry waited for a kernel of another registry"
    );
}

#[test]
fn queued_unloads_leave_the_live_module_count_exact_once_drained() {
    // Alone: no other test loads or unloads modules meanwhile.
    let _g = exclusive();
    let Some(host) = host() else { return };
    host.wait_unloads();
    let before = settled_stats(&host);
    let released = Registry::load(&host, bundle("stamp-a")).unwrap();
    let dropped = Registry::load(&host, bundle("stamp-b")).unwrap();
    assert_eq!(host.stats().live_modules, before.live_modules + 2);
    let report = gpuhost::release(released).unwrap();
    assert_eq!((report.modules_queued, report.context_lost), (1, false));
    drop(dropped);
    host.wait_unloads();
    let after = host.stats();
    assert_eq!(
        after.live_modules, before.live_modules,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.drop_errors, before.drop_errors, "{after:?}");
}
