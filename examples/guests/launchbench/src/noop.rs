//! What launchbench's guests start from (main.rs and bin/launchloop.rs, which includes this
//! file): the empty kernel, a buffer and a stream to launch it with, and the launch bound.

use gpuhost_guest::{BoundLaunch, DeviceBuffer, Error, Kernel, Launch, Module, Stream};

const NOOP: &str = include_str!("../../kernels/noop.ptx");

/// `r`'s value, or the process ends with `what` and the error.
pub fn check<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{what}: {e:?}");
        std::process::exit(1)
    })
}

/// The empty kernel's module and kernel, a 256-float buffer, a stream, and the launch every
/// pattern makes (one block of 32, the buffer and its length) bound once.
pub struct Noop {
    /// Kept for as long as the kernel is used.
    pub _module: Module,
    pub kernel: Kernel,
    pub buf: DeviceBuffer<f32>,
    pub stream: Stream,
    pub bound: BoundLaunch,
}

impl Noop {
    pub fn new() -> Self {
        let module = check(Module::from_ptx(NOOP), "load noop");
        let kernel = check(module.kernel("noop"), "kernel noop");
        let buf = check(DeviceBuffer::<f32>::zeroed(256), "alloc");
        let stream = check(Stream::create(), "stream");
        let bound = check(
            Launch::new(&kernel)
                .block1(32)
                .buffer(&buf)
                .scalar(256u32)
                .bind(),
            "bind",
        );
        Self {
            _module: module,
            kernel,
            buf,
            stream,
            bound,
        }
    }
}
