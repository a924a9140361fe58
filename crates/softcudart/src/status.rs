//! Runtime error codes (`cudaError_t`): the driver's codes mapped to the runtime's, each thread's
//! last error (`cudaGetLastError` / `cudaPeekAtLastError`), and the names and messages of
//! `cudaGetErrorName` / `cudaGetErrorString`.
//!
//! The runtime's codes were laid out to share the driver's numbers wherever both have the error
//! (invalid value 1, no device 100, illegal address 700, …), so a driver code the runtime also
//! has passes through unchanged, and one it lacks is `cudaErrorUnknown`. A sticky error (a
//! kernel fault: the context is unusable) needs no memory here: the driver keeps failing every
//! later call in that context, and each failure is the thread's last error again.

use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int};
use std::panic::AssertUnwindSafe;

use crate::driver::CuResult;

/// A runtime error: a non-zero `cudaError_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rt(pub(crate) c_int);

/// The runtime codes this crate returns itself (not passed through from the driver).
pub(crate) mod code {
    use super::Rt;
    pub(crate) const INVALID_VALUE: Rt = Rt(1);
    pub(crate) const INVALID_CONFIGURATION: Rt = Rt(9);
    pub(crate) const INVALID_PITCH_VALUE: Rt = Rt(12);
    pub(crate) const INVALID_SYMBOL: Rt = Rt(13);
    pub(crate) const INVALID_MEMCPY_DIRECTION: Rt = Rt(21);
    pub(crate) const INSUFFICIENT_DRIVER: Rt = Rt(35);
    pub(crate) const DEVICES_UNAVAILABLE: Rt = Rt(46);
    pub(crate) const MISSING_CONFIGURATION: Rt = Rt(52);
    pub(crate) const INVALID_DEVICE_FUNCTION: Rt = Rt(98);
    pub(crate) const NO_DEVICE: Rt = Rt(100);
    pub(crate) const INVALID_DEVICE: Rt = Rt(101);
    pub(crate) const INVALID_KERNEL_IMAGE: Rt = Rt(200);
    pub(crate) const INVALID_RESOURCE_HANDLE: Rt = Rt(400);
    pub(crate) const SYMBOL_NOT_FOUND: Rt = Rt(500);
    pub(crate) const NOT_READY: Rt = Rt(600);
    pub(crate) const UNKNOWN: Rt = Rt(999);
}

thread_local! {
    /// This thread's last error (0: none since the last `cudaGetLastError`).
    static LAST_ERROR: Cell<c_int> = const { Cell::new(0) };
}

/// Maps a driver result to the runtime's: success is `Ok`, a code the runtime shares is kept,
/// anything else is `cudaErrorUnknown`.
pub(crate) fn check(r: CuResult) -> Result<(), Rt> {
    if r == 0 {
        return Ok(());
    }
    let e = if entry(r).is_some() {
        Rt(r)
    } else {
        code::UNKNOWN
    };
    Err(e)
}

/// Runs the body of an exported runtime call: its error becomes the thread's last error and the
/// return value; a panic (a bug here) is `cudaErrorUnknown` rather than unwinding into C.
pub(crate) fn api(body: impl FnOnce() -> Result<(), Rt>) -> c_int {
    let r = std::panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(code::UNKNOWN));
    match r {
        Ok(()) => 0,
        // "Not ready" answers a query; it is not an error to remember.
        Err(code::NOT_READY) => code::NOT_READY.0,
        Err(Rt(e)) => {
            LAST_ERROR.set(e);
            e
        }
    }
}

/// Writes `value` through the program's out-pointer `out`; NULL is `cudaErrorInvalidValue`.
///
/// # Safety
/// `out` is NULL or valid for writing a `T` (alignment is not assumed).
pub(crate) unsafe fn put<T>(out: *mut T, value: T) -> Result<(), Rt> {
    if out.is_null() {
        return Err(code::INVALID_VALUE);
    }
    // SAFETY: non-NULL, and valid for a write by the caller's contract.
    unsafe { out.write_unaligned(value) };
    Ok(())
}

/// `cudaGetLastError`: the thread's last error, reset to success. A kernel fault is no
/// exception: NVIDIA's runtime 13 returned cudaErrorIllegalAddress once and then cudaSuccess,
/// while every later call that needs the context fails with it again, as the driver's calls do
/// (runtime_semantics.cu on the H200, bench/h200-runs/2026-12-02-s12/).
pub(crate) fn take_last() -> c_int {
    LAST_ERROR.replace(0)
}

/// `cudaPeekAtLastError`: the same answer, without the reset.
pub(crate) fn peek_last() -> c_int {
    LAST_ERROR.get()
}

/// What NVIDIA's runtime answers for a code it does not know, as name and as message.
const UNRECOGNISED: &CStr = c"unrecognized error code";

/// The name of `e` (`cudaGetErrorName`).
pub(crate) fn name(e: c_int) -> *const c_char {
    entry(e).map_or(UNRECOGNISED, |(n, _)| n).as_ptr()
}

/// The message for `e` (`cudaGetErrorString`).
pub(crate) fn message(e: c_int) -> *const c_char {
    entry(e).map_or(UNRECOGNISED, |(_, m)| m).as_ptr()
}

fn entry(e: c_int) -> Option<(&'static CStr, &'static CStr)> {
    ERRORS
        .binary_search_by_key(&e, |&(c, _, _)| c)
        .ok()
        .map(|i| (ERRORS[i].1, ERRORS[i].2))
}

/// Every `cudaError_t` of CUDA 13.0's driver_types.h, in code order: (code, name, message). The
/// messages of common errors are the runtime's usual texts; the others say the name in words.
#[rustfmt::skip]
const ERRORS: &[(c_int, &CStr, &CStr)] = &[
    (0, c"cudaSuccess", c"no error"),
    (1, c"cudaErrorInvalidValue", c"invalid argument"),
    (2, c"cudaErrorMemoryAllocation", c"out of memory"),
    (3, c"cudaErrorInitializationError", c"initialization error"),
    (4, c"cudaErrorCudartUnloading", c"driver shutting down"),
    (5, c"cudaErrorProfilerDisabled", c"profiler disabled"),
    (6, c"cudaErrorProfilerNotInitialized", c"profiler not initialized"),
    (7, c"cudaErrorProfilerAlreadyStarted", c"profiler already started"),
    (8, c"cudaErrorProfilerAlreadyStopped", c"profiler already stopped"),
    (9, c"cudaErrorInvalidConfiguration", c"invalid configuration argument"),
    (12, c"cudaErrorInvalidPitchValue", c"invalid pitch value"),
    (13, c"cudaErrorInvalidSymbol", c"invalid device symbol"),
    (16, c"cudaErrorInvalidHostPointer", c"invalid host pointer"),
    (17, c"cudaErrorInvalidDevicePointer", c"invalid device pointer"),
    (18, c"cudaErrorInvalidTexture", c"invalid texture"),
    (19, c"cudaErrorInvalidTextureBinding", c"invalid texture binding"),
    (20, c"cudaErrorInvalidChannelDescriptor", c"invalid channel descriptor"),
    (21, c"cudaErrorInvalidMemcpyDirection", c"invalid copy direction for memcpy"),
    (22, c"cudaErrorAddressOfConstant", c"address of constant"),
    (23, c"cudaErrorTextureFetchFailed", c"texture fetch failed"),
    (24, c"cudaErrorTextureNotBound", c"texture not bound"),
    (25, c"cudaErrorSynchronizationError", c"synchronization error"),
    (26, c"cudaErrorInvalidFilterSetting", c"invalid filter setting"),
    (27, c"cudaErrorInvalidNormSetting", c"invalid norm setting"),
    (28, c"cudaErrorMixedDeviceExecution", c"mixed device execution"),
    (31, c"cudaErrorNotYetImplemented", c"not yet implemented"),
    (32, c"cudaErrorMemoryValueTooLarge", c"memory value too large"),
    (34, c"cudaErrorStubLibrary", c"CUDA driver is a stub library"),
    (35, c"cudaErrorInsufficientDriver", c"CUDA driver version is insufficient for CUDA runtime version"),
    (36, c"cudaErrorCallRequiresNewerDriver", c"call requires newer driver"),
    (37, c"cudaErrorInvalidSurface", c"invalid surface"),
    (43, c"cudaErrorDuplicateVariableName", c"duplicate variable name"),
    (44, c"cudaErrorDuplicateTextureName", c"duplicate texture name"),
    (45, c"cudaErrorDuplicateSurfaceName", c"duplicate surface name"),
    (46, c"cudaErrorDevicesUnavailable", c"CUDA-capable device(s) is/are busy or unavailable"),
    (49, c"cudaErrorIncompatibleDriverContext", c"incompatible driver context"),
    (52, c"cudaErrorMissingConfiguration", c"__global__ function call is not configured"),
    (53, c"cudaErrorPriorLaunchFailure", c"prior launch failure"),
    (65, c"cudaErrorLaunchMaxDepthExceeded", c"launch max depth exceeded"),
    (66, c"cudaErrorLaunchFileScopedTex", c"launch file scoped tex"),
    (67, c"cudaErrorLaunchFileScopedSurf", c"launch file scoped surf"),
    (68, c"cudaErrorSyncDepthExceeded", c"sync depth exceeded"),
    (69, c"cudaErrorLaunchPendingCountExceeded", c"launch pending count exceeded"),
    (98, c"cudaErrorInvalidDeviceFunction", c"invalid device function"),
    (100, c"cudaErrorNoDevice", c"no CUDA-capable device is detected"),
    (101, c"cudaErrorInvalidDevice", c"invalid device ordinal"),
    (102, c"cudaErrorDeviceNotLicensed", c"device not licensed"),
    (103, c"cudaErrorSoftwareValidityNotEstablished", c"software validity not established"),
    (127, c"cudaErrorStartupFailure", c"startup failure"),
    (200, c"cudaErrorInvalidKernelImage", c"device kernel image is invalid"),
    (201, c"cudaErrorDeviceUninitialized", c"invalid device context"),
    (205, c"cudaErrorMapBufferObjectFailed", c"map buffer object failed"),
    (206, c"cudaErrorUnmapBufferObjectFailed", c"unmap buffer object failed"),
    (207, c"cudaErrorArrayIsMapped", c"array is mapped"),
    (208, c"cudaErrorAlreadyMapped", c"already mapped"),
    (209, c"cudaErrorNoKernelImageForDevice", c"no kernel image is available for execution on the device"),
    (210, c"cudaErrorAlreadyAcquired", c"already acquired"),
    (211, c"cudaErrorNotMapped", c"not mapped"),
    (212, c"cudaErrorNotMappedAsArray", c"not mapped as array"),
    (213, c"cudaErrorNotMappedAsPointer", c"not mapped as pointer"),
    (214, c"cudaErrorECCUncorrectable", c"ECC uncorrectable"),
    (215, c"cudaErrorUnsupportedLimit", c"unsupported limit"),
    (216, c"cudaErrorDeviceAlreadyInUse", c"device already in use"),
    (217, c"cudaErrorPeerAccessUnsupported", c"peer access unsupported"),
    (218, c"cudaErrorInvalidPtx", c"a PTX JIT compilation failed"),
    (219, c"cudaErrorInvalidGraphicsContext", c"invalid graphics context"),
    (220, c"cudaErrorNvlinkUncorrectable", c"nvlink uncorrectable"),
    (221, c"cudaErrorJitCompilerNotFound", c"jit compiler not found"),
    (222, c"cudaErrorUnsupportedPtxVersion", c"the provided PTX was compiled with an unsupported toolchain."),
    (223, c"cudaErrorJitCompilationDisabled", c"jit compilation disabled"),
    (224, c"cudaErrorUnsupportedExecAffinity", c"unsupported exec affinity"),
    (225, c"cudaErrorUnsupportedDevSideSync", c"unsupported dev side sync"),
    (226, c"cudaErrorContained", c"contained"),
    (300, c"cudaErrorInvalidSource", c"invalid source"),
    (301, c"cudaErrorFileNotFound", c"file not found"),
    (302, c"cudaErrorSharedObjectSymbolNotFound", c"shared object symbol not found"),
    (303, c"cudaErrorSharedObjectInitFailed", c"shared object init failed"),
    (304, c"cudaErrorOperatingSystem", c"operating system"),
    (400, c"cudaErrorInvalidResourceHandle", c"invalid resource handle"),
    (401, c"cudaErrorIllegalState", c"illegal state"),
    (402, c"cudaErrorLossyQuery", c"lossy query"),
    (500, c"cudaErrorSymbolNotFound", c"named symbol not found"),
    (600, c"cudaErrorNotReady", c"device not ready"),
    (700, c"cudaErrorIllegalAddress", c"an illegal memory access was encountered"),
    (701, c"cudaErrorLaunchOutOfResources", c"too many resources requested for launch"),
    (702, c"cudaErrorLaunchTimeout", c"the launch timed out and was terminated"),
    (703, c"cudaErrorLaunchIncompatibleTexturing", c"launch incompatible texturing"),
    (704, c"cudaErrorPeerAccessAlreadyEnabled", c"peer access already enabled"),
    (705, c"cudaErrorPeerAccessNotEnabled", c"peer access not enabled"),
    (708, c"cudaErrorSetOnActiveProcess", c"cannot set while device is active in this process"),
    (709, c"cudaErrorContextIsDestroyed", c"context is destroyed"),
    (710, c"cudaErrorAssert", c"device-side assert triggered"),
    (711, c"cudaErrorTooManyPeers", c"too many peers"),
    (712, c"cudaErrorHostMemoryAlreadyRegistered", c"host memory already registered"),
    (713, c"cudaErrorHostMemoryNotRegistered", c"host memory not registered"),
    (714, c"cudaErrorHardwareStackError", c"hardware stack error"),
    (715, c"cudaErrorIllegalInstruction", c"an illegal instruction was encountered"),
    (716, c"cudaErrorMisalignedAddress", c"misaligned address"),
    (717, c"cudaErrorInvalidAddressSpace", c"operation not supported on global/shared address space"),
    (718, c"cudaErrorInvalidPc", c"invalid program counter"),
    (719, c"cudaErrorLaunchFailure", c"unspecified launch failure"),
    (720, c"cudaErrorCooperativeLaunchTooLarge", c"cooperative launch too large"),
    (721, c"cudaErrorTensorMemoryLeak", c"tensor memory leak"),
    (800, c"cudaErrorNotPermitted", c"operation not permitted"),
    (801, c"cudaErrorNotSupported", c"operation not supported"),
    (802, c"cudaErrorSystemNotReady", c"system not ready"),
    (803, c"cudaErrorSystemDriverMismatch", c"system driver mismatch"),
    (804, c"cudaErrorCompatNotSupportedOnDevice", c"compat not supported on device"),
    (805, c"cudaErrorMpsConnectionFailed", c"mps connection failed"),
    (806, c"cudaErrorMpsRpcFailure", c"mps rpc failure"),
    (807, c"cudaErrorMpsServerNotReady", c"mps server not ready"),
    (808, c"cudaErrorMpsMaxClientsReached", c"mps max clients reached"),
    (809, c"cudaErrorMpsMaxConnectionsReached", c"mps max connections reached"),
    (810, c"cudaErrorMpsClientTerminated", c"mps client terminated"),
    (811, c"cudaErrorCdpNotSupported", c"cdp not supported"),
    (812, c"cudaErrorCdpVersionMismatch", c"cdp version mismatch"),
    (900, c"cudaErrorStreamCaptureUnsupported", c"stream capture unsupported"),
    (901, c"cudaErrorStreamCaptureInvalidated", c"stream capture invalidated"),
    (902, c"cudaErrorStreamCaptureMerge", c"stream capture merge"),
    (903, c"cudaErrorStreamCaptureUnmatched", c"stream capture unmatched"),
    (904, c"cudaErrorStreamCaptureUnjoined", c"stream capture unjoined"),
    (905, c"cudaErrorStreamCaptureIsolation", c"stream capture isolation"),
    (906, c"cudaErrorStreamCaptureImplicit", c"stream capture implicit"),
    (907, c"cudaErrorCapturedEvent", c"captured event"),
    (908, c"cudaErrorStreamCaptureWrongThread", c"stream capture wrong thread"),
    (909, c"cudaErrorTimeout", c"timeout"),
    (910, c"cudaErrorGraphExecUpdateFailure", c"graph exec update failure"),
    (911, c"cudaErrorExternalDevice", c"external device"),
    (912, c"cudaErrorInvalidClusterSize", c"invalid cluster size"),
    (913, c"cudaErrorFunctionNotLoaded", c"function not loaded"),
    (914, c"cudaErrorInvalidResourceType", c"invalid resource type"),
    (915, c"cudaErrorInvalidResourceConfiguration", c"invalid resource configuration"),
    (999, c"cudaErrorUnknown", c"unknown error"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_table_is_sorted_so_lookups_find_every_code() {
        assert!(ERRORS.windows(2).all(|w| w[0].0 < w[1].0));
        for &(c, n, _) in ERRORS {
            assert_eq!(entry(c).map(|(n, _)| n), Some(n));
        }
    }

    #[test]
    fn driver_codes_the_runtime_shares_pass_through_and_others_are_unknown() {
        assert_eq!(check(0), Ok(()));
        assert_eq!(check(1), Err(code::INVALID_VALUE));
        assert_eq!(check(400), Err(Rt(400)));
        // CUDA_ERROR_CONTEXT_ALREADY_CURRENT has no runtime counterpart.
        assert_eq!(check(202), Err(code::UNKNOWN));
    }

    #[test]
    fn get_last_error_resets_a_plain_error_and_peek_does_not() {
        std::thread::spawn(|| {
            assert_eq!(api(|| Err(code::INVALID_VALUE)), 1);
            assert_eq!(peek_last(), 1);
            assert_eq!(take_last(), 1);
            assert_eq!(take_last(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn unknown_codes_have_the_unrecognised_name_and_message() {
        // SAFETY: name/message return pointers to 'static NUL-terminated strings.
        let (n, m) = unsafe { (CStr::from_ptr(name(12345)), CStr::from_ptr(message(12345))) };
        assert_eq!(n, UNRECOGNISED);
        assert_eq!(m, UNRECOGNISED);
        // SAFETY: as above.
        let ok = unsafe { CStr::from_ptr(name(0)) };
        assert_eq!(ok, c"cudaSuccess");
    }
}
