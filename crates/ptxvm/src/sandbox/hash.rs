//! The sandbox's hash maps and sets: std's, with foldhash's hasher. The rewrite keys nearly
//! every map by a register, label or variable name, and SipHash (std's default) cost more than
//! any pass but the rewrite itself (issue #9's profile: about 6% of a module's time). foldhash's
//! `fast::RandomState` is still seeded per process, so hostile PTX cannot pick names that collide.
//! Nothing the rewrite prints depends on a map's order (it sorts where order shows), as with
//! std's per-process seed before.

pub(crate) use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
