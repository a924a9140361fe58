//! The CUDA runtime's device functions the VM provides: `__assertfail` (a failed `assert`) and
//! `vprintf` (device `printf`). Both take `.param` arguments that the call sequence stored in the
//! lane's local memory; strings and the printf argument buffer are generic addresses.

use super::exec::BlockMem;
use super::mem::Mem;
use super::warp::Warp;
use crate::api::{AssertFailure, FaultKind};
use crate::devio::{self, DeviceRead, MAX_STRING};
use crate::ir::Space;

/// One lane's view of memory for reading strings and arguments.
struct LaneReader<'m, 'a> {
    mem: &'m mut Mem<'a>,
    lane: super::mem::LaneMem,
}

impl DeviceRead for LaneReader<'_, '_> {
    fn scalar(&mut self, addr: u64, len: u64) -> Option<u64> {
        let loc = self
            .mem
            .locate(Space::Generic, addr, len, &self.lane, false)
            .ok()?;
        Some(self.mem.load(&loc, len))
    }

    fn string(&mut self, addr: u64) -> Option<Vec<u8>> {
        let mut s = Vec::new();
        for i in 0..MAX_STRING as u64 {
            match self.scalar(addr.checked_add(i)?, 1)? as u8 {
                0 => return Some(s),
                b => s.push(b),
            }
        }
        Some(s)
    }
}

impl Warp {
    /// Reads a `len`-byte `.param` argument at local offset `off` of lane `l`.
    fn param_arg(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        l: usize,
        off: u32,
        len: u64,
    ) -> Result<u64, FaultKind> {
        let lane = self.lane_mem(bm, l);
        let loc = mem.locate(Space::Local, u64::from(off), len, &lane, false)?;
        Ok(mem.load(&loc, len))
    }

    fn reader<'m, 'a>(
        &mut self,
        mem: &'m mut Mem<'a>,
        bm: &BlockMem,
        l: usize,
    ) -> LaneReader<'m, 'a> {
        LaneReader {
            lane: self.lane_mem(bm, l),
            mem,
        }
    }

    /// `__assertfail(message, file, line, function, charSize)` on lane `l`: the fault that
    /// stops the kernel, carrying what NVIDIA's driver prints.
    pub(crate) fn assert_fail(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        l: usize,
        args: &[u32],
    ) -> Result<FaultKind, FaultKind> {
        let &[message, file, line, function, _] = args else {
            return Err(FaultKind::Trap);
        };
        let message = self.param_arg(mem, bm, l, message, 8)?;
        let file = self.param_arg(mem, bm, l, file, 8)?;
        let line = self.param_arg(mem, bm, l, line, 4)? as u32;
        let function = self.param_arg(mem, bm, l, function, 8)?;
        let mut r = self.reader(mem, bm, l);
        let mut text = |addr: u64| {
            let bytes = r.string(addr).unwrap_or_else(|| b"?".to_vec());
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Ok(FaultKind::AssertFailed(Box::new(AssertFailure {
            expression: text(message),
            file: text(file),
            line,
            function: text(function),
        })))
    }

    /// `vprintf(format, args)` on lane `l`: formats and records the output, writes the result
    /// (arguments consumed, or -1 for a NULL format) when the call takes it.
    pub(crate) fn vprintf(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        l: usize,
        format: u32,
        args: u32,
        ret: Option<u32>,
    ) -> Result<(), FaultKind> {
        let format = self.param_arg(mem, bm, l, format, 8)?;
        let args = self.param_arg(mem, bm, l, args, 8)?;
        let result = if format == 0 {
            -1
        } else {
            let out = mem.out;
            let mut r = self.reader(mem, bm, l);
            let fmt = r.string(format).unwrap_or_default();
            let (text, count, arg_bytes) = devio::format(&fmt, args, &mut r);
            out.push(devio::record_cost(arg_bytes), &text);
            count
        };
        if let Some(off) = ret {
            let lane = self.lane_mem(bm, l);
            let loc = mem.locate(Space::Local, u64::from(off), 4, &lane, true)?;
            mem.store(&loc, 4, u64::from(result as u32));
        }
        Ok(())
    }
}
