//! Per-call timing of the gpuhost:cuda host calls a guest makes, for an embedder that wants to
//! see where a guest's time on the host goes (`gpuhost serve`'s
//! `gpuhost_host_call_seconds_total{call}`). Each call is named once, as a [`HostCall`], so an
//! observer indexes its counters by it instead of building a label per call; a context without
//! an observer pays one branch per call.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sees each gpuhost:cuda host call of the guests it was given to, with the wall time the host
/// spent in it (including the await of an async call's device work).
pub trait CallObserver: Send + Sync {
    /// One call of `call` that took `elapsed`. Called on the guest's thread at the end of every
    /// call: keep it to a few atomic operations.
    fn observe(&self, call: HostCall, elapsed: Duration);
}

macro_rules! host_calls {
    ($($variant:ident => $name:literal,)*) => {
        /// A gpuhost:cuda import, one per WIT function (resource drops included).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum HostCall {
            $(#[doc = concat!("`", $name, "`")] $variant,)*
        }

        impl HostCall {
            /// Every call, in the order of their `as usize` values (0, 1, …).
            pub const ALL: &[HostCall] = &[$(HostCall::$variant,)*];

            /// `interface/resource.function`, as the WIT names it.
            pub fn name(self) -> &'static str {
                match self {
                    $(HostCall::$variant => $name,)*
                }
            }
        }
    };
}

host_calls! {
    DeviceInfo => "device/info",
    DeviceMemory => "device/memory",
    DeviceQuotas => "device/quotas",
    ModuleFromPtx => "module/module.from-ptx",
    ModuleFromCubin => "module/module.from-cubin",
    ModuleKernel => "module/module.kernel",
    ModuleDrop => "module/module.drop",
    KernelName => "module/kernel.name",
    KernelParams => "module/kernel.params",
    KernelDrop => "module/kernel.drop",
    BufferCreate => "memory/buffer.create",
    BufferLen => "memory/buffer.len",
    BufferWrite => "memory/buffer.write",
    BufferRead => "memory/buffer.read",
    BufferReadStream => "memory/buffer.read-stream",
    BufferFill => "memory/buffer.fill",
    BufferCopyFrom => "memory/buffer.copy-from",
    BufferDrop => "memory/buffer.drop",
    ReadingWait => "memory/reading.wait",
    ReadingDrop => "memory/reading.drop",
    StreamCreate => "stream/stream.create",
    StreamLaunch => "stream/stream.launch",
    StreamEnqueue => "stream/stream.enqueue",
    StreamSynchronize => "stream/stream.synchronize",
    StreamReadAfter => "stream/stream.read-after",
    StreamRecordEvent => "stream/stream.record-event",
    StreamWait => "stream/stream.wait",
    StreamDrop => "stream/stream.drop",
    EventElapsedMsSince => "stream/event.elapsed-ms-since",
    EventDrop => "stream/event.drop",
    BoundLaunchBind => "stream/bound-launch.bind",
    BoundLaunchSetArg => "stream/bound-launch.set-arg",
    BoundLaunchSetConfig => "stream/bound-launch.set-config",
    BoundLaunchSetStream => "stream/bound-launch.set-stream",
    BoundLaunchEnqueue => "stream/bound-launch.enqueue",
    BoundLaunchDrop => "stream/bound-launch.drop",
    BundleKernelNames => "bundle/kernel-names",
    BundleGetKernel => "bundle/get-kernel",
}

/// Times one host call: reports it to the observer when dropped, however the call ends (an
/// early `?` return, or a dropped async call).
pub(crate) struct CallTimer(Option<(Arc<dyn CallObserver>, HostCall, Instant)>);

impl CallTimer {
    pub(crate) fn start(observer: Option<&Arc<dyn CallObserver>>, call: HostCall) -> Self {
        Self(observer.map(|o| (o.clone(), call, Instant::now())))
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        if let Some((observer, call, started)) = self.0.take() {
            observer.observe(call, started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    #[test]
    fn every_call_has_its_own_name_and_its_index_in_all() {
        let names: HashSet<_> = HostCall::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), HostCall::ALL.len());
        for (i, call) in HostCall::ALL.iter().enumerate() {
            assert_eq!(*call as usize, i, "{}", call.name());
        }
    }

    #[derive(Default)]
    struct Seen(Mutex<Vec<HostCall>>);

    impl CallObserver for Seen {
        fn observe(&self, call: HostCall, _elapsed: Duration) {
            self.0.lock().unwrap().push(call);
        }
    }

    #[test]
    fn a_timer_reports_its_call_once_when_dropped_and_nothing_without_an_observer() {
        let seen = Arc::new(Seen::default());
        let observer: Arc<dyn CallObserver> = seen.clone();
        let timer = CallTimer::start(Some(&observer), HostCall::BufferFill);
        assert!(seen.0.lock().unwrap().is_empty());
        drop(timer);
        drop(CallTimer::start(None, HostCall::BufferRead));
        assert_eq!(*seen.0.lock().unwrap(), vec![HostCall::BufferFill]);
    }
}
