//! The three macros that generate softcuda's exports: implemented functions, aliases (other
//! names for one export) and functions that answer `CUDA_ERROR_NOT_SUPPORTED`. They live apart
//! from `exports` so that file is the list itself.

/// Declares exports whose bodies return `CuResult<()>`. A body is safe code: each unsafe
/// operation in it (a write through an out-pointer, a read of an input struct, a C string) has
/// its own `unsafe` block and `SAFETY` comment, which rests on the export's `cuda.h` contract
/// for that pointer (the contract of the `unsafe extern "C" fn` the macro declares).
macro_rules! exports {
    ($( $(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block )*) => {
        $(
            $(#[$meta])*
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> ::cudarc::driver::sys::CUresult {
                $crate::abi::guard(|| -> $crate::abi::CuResult<()> {
                    $body
                })
            }
        )*
    };
}

/// Declares other names for an export (mostly the unversioned names older headers and cudarc's
/// symbol list use), each forwarding unchanged to the export.
macro_rules! aliases {
    ($( $alias:ident => $target:ident($($arg:ident : $ty:ty),* $(,)?); )*) => {
        $(
            #[doc = concat!("Same as [`", stringify!($target), "`].")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $alias($($arg: $ty),*) -> ::cudarc::driver::sys::CUresult {
                // SAFETY: the target has the same contract; arguments are forwarded unchanged.
                unsafe { $target($($arg),*) }
            }
        )*
    };
}

/// Declares exports softcuda does not implement: each returns `CUDA_ERROR_NOT_SUPPORTED`.
macro_rules! unsupported {
    ($( $name:ident($($arg:ident : $ty:ty),* $(,)?); )*) => {
        $(
            #[doc = concat!("Not implemented by softcuda: returns `CUDA_ERROR_NOT_SUPPORTED`.")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($(#[allow(unused_variables)] $arg: $ty),*) -> ::cudarc::driver::sys::CUresult {
                ::cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_SUPPORTED
            }
        )*
    };
}
