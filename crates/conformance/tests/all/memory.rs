//! Memory accounting: cuMemGetInfo's free count drops by at least an allocation's size and
//! comes back after the free; the total does not move.

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;

use crate::support::env_or_skip;

#[test]
fn mem_get_info_free_drops_by_the_allocation_and_recovers_after_free() {
    // Exclusive: a concurrent test's allocations would move the free count.
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    const SIZE: usize = 64 << 20;
    let (free0, total0) = ctx.mem_info().expect("cuMemGetInfo");
    assert!(free0 <= total0 && total0 > 0, "free {free0} total {total0}");
    let buf = DeviceBuffer::alloc(&ctx, SIZE).expect("alloc 64 MiB");
    let (free1, total1) = ctx.mem_info().expect("cuMemGetInfo");
    assert_eq!(total1, total0, "total changed with an allocation");
    assert!(
        free1 + SIZE <= free0,
        "free went {free0} → {free1} for a {SIZE}-byte allocation"
    );
    drop(buf);
    let (free2, _) = ctx.mem_info().expect("cuMemGetInfo");
    assert!(
        free2 >= free1 + SIZE,
        "free went {free1} → {free2} after freeing {SIZE} bytes"
    );
}
