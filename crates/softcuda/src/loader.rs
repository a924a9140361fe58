//! Chooses which libcuda the process uses — NVIDIA's or softcuda — before cudarc's first call.
//!
//! cudarc opens the driver lazily with `dlopen("libcuda.so")` (then other names). glibc answers a
//! bare-name `dlopen` with an already-loaded object whose SONAME is that name, so opening
//! `libsoftcuda.so` (SONAME `libcuda.so`) with `RTLD_GLOBAL` first makes cudarc bind to softcuda.
//! The selection is process-wide: once a driver is chosen it stays (the library is never closed);
//! failures are not remembered, so a later call can try again. This module is pure Rust and is
//! never called by softcuda's own C ABI.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, OnceLock, PoisonError};

use libloading::os::unix::{Library as UnixLibrary, RTLD_GLOBAL, RTLD_NOW};

use crate::error::LoaderError;

/// The symbol every softcuda build exports; its presence tells softcuda apart from NVIDIA's driver.
pub const MARKER_SYMBOL: &str = "softcuda_abi_version";

/// The environment variable holding the driver preference.
pub const PREFERENCE_ENV: &str = "GPUHOST_DRIVER";

/// The environment variable that may name `libsoftcuda.so` explicitly.
pub const SOFT_LIB_ENV: &str = "SOFTCUDA_LIB";

/// glibc's `RTLD_NOLOAD`: answer only from already-loaded objects.
const RTLD_NOLOAD: c_int = 4;

/// The file name cargo gives softcuda's cdylib.
const SOFT_LIB_FILE: &str = "libsoftcuda.so";

/// Which driver the caller wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    /// NVIDIA's driver when one opens and sees a device, otherwise softcuda.
    Auto,
    /// NVIDIA's driver or an error.
    Nvidia,
    /// softcuda, even when NVIDIA's driver is installed.
    Softcuda,
}

impl Preference {
    /// Reads [`PREFERENCE_ENV`]; unset or empty means [`Preference::Auto`].
    pub fn from_env() -> Result<Preference, LoaderError> {
        match std::env::var(PREFERENCE_ENV) {
            Ok(value) if value.trim().is_empty() => Ok(Preference::Auto),
            Ok(value) => value.parse(),
            Err(std::env::VarError::NotPresent) => Ok(Preference::Auto),
            Err(std::env::VarError::NotUnicode(raw)) => Err(LoaderError::BadPreference {
                value: raw.to_string_lossy().into_owned(),
            }),
        }
    }
}

impl FromStr for Preference {
    type Err = LoaderError;

    fn from_str(value: &str) -> Result<Preference, LoaderError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Preference::Auto),
            "nvidia" => Ok(Preference::Nvidia),
            "softcuda" | "soft" => Ok(Preference::Softcuda),
            _ => Err(LoaderError::BadPreference {
                value: value.to_owned(),
            }),
        }
    }
}

/// The two drivers a process can end up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    /// NVIDIA's libcuda.
    Nvidia,
    /// softcuda's libcuda over the ptxvm interpreter.
    Soft,
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DriverKind::Nvidia => "nvidia",
            DriverKind::Soft => "softcuda",
        })
    }
}

/// The driver the process is bound to, where it was loaded from, and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverChoice {
    /// Which driver.
    pub kind: DriverKind,
    /// The file the library was loaded from (as the dynamic loader reports it).
    pub path: PathBuf,
    /// One sentence for `gpuhost doctor`.
    pub reason: String,
}

static CHOSEN: OnceLock<DriverChoice> = OnceLock::new();
static SELECTING: Mutex<()> = Mutex::new(());

/// Makes a libcuda the process's driver according to `preference`, or returns the one already
/// chosen when it satisfies `preference`.
pub fn select(preference: Preference) -> Result<DriverChoice, LoaderError> {
    let _serial = SELECTING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(chosen) = CHOSEN.get() {
        return match (preference, chosen.kind) {
            (Preference::Auto, _)
            | (Preference::Nvidia, DriverKind::Nvidia)
            | (Preference::Softcuda, DriverKind::Soft) => Ok(chosen.clone()),
            _ => Err(LoaderError::AlreadySelected {
                chosen: chosen.kind,
                requested: preference,
            }),
        };
    }
    let choice = match preference {
        Preference::Nvidia => match probe_libcuda() {
            Probe::Nvidia(choice, lib) => keep_open(choice, lib),
            Probe::Soft { name, path } => return Err(LoaderError::NvidiaIsSoftcuda { name, path }),
            Probe::Missing { tried } => return Err(LoaderError::NvidiaNotFound { tried }),
        },
        Preference::Softcuda => open_soft("GPUHOST_DRIVER=softcuda asked for softcuda".into())?,
        Preference::Auto => match probe_libcuda() {
            Probe::Nvidia(choice, lib) => match nvidia_unusable(&lib) {
                None => keep_open(choice, lib),
                // Installed driver libraries without a usable GPU (a container with the driver
                // mounted, a GPU in a bad state): run on softcuda rather than fail. Closing
                // NVIDIA's library first lets the bare name resolve to softcuda; if it stays
                // resident, open_soft reports that as Shadowed.
                Some(why) => {
                    drop(lib);
                    open_soft(format!(
                        "{} at {}, but {why}",
                        choice.reason,
                        choice.path.display()
                    ))?
                }
            },
            Probe::Soft { name, path } => DriverChoice {
                kind: DriverKind::Soft,
                path,
                reason: format!(
                    "`{name}` already resolves to softcuda (LD_LIBRARY_PATH or an earlier load)"
                ),
            },
            Probe::Missing { tried } => open_soft(format!(
                "no NVIDIA libcuda could be opened (tried {})",
                tried.join(", ")
            ))?,
        },
    };
    Ok(CHOSEN.get_or_init(|| choice).clone())
}

/// The driver chosen so far in this process, if any.
pub fn selected() -> Option<DriverChoice> {
    CHOSEN.get().cloned()
}

/// What opening cudarc's candidate names found.
enum Probe {
    Nvidia(DriverChoice, UnixLibrary),
    Soft { name: String, path: PathBuf },
    Missing { tried: Vec<String> },
}

/// Opens cudarc's candidate names in cudarc's order; the first that opens is what cudarc would
/// bind to. An NVIDIA library found this way is returned open; [`keep_open`] makes it permanent.
fn probe_libcuda() -> Probe {
    let tried = cudarc::get_lib_name_candidates("cuda");
    for name in &tried {
        // SAFETY: opening a driver library runs its initialisers; libcuda's (NVIDIA's or
        // softcuda's) have no preconditions on the caller, and cudarc would open the same name.
        let Ok(lib) = (unsafe { libloading::Library::new(name) }) else {
            continue;
        };
        let lib = UnixLibrary::from(lib);
        if let Some(path) = symbol_path(&lib, MARKER_SYMBOL) {
            return Probe::Soft {
                name: name.clone(),
                path,
            };
        }
        let path = symbol_path(&lib, "cuInit").unwrap_or_else(|| PathBuf::from(name));
        let choice = DriverChoice {
            kind: DriverKind::Nvidia,
            path,
            reason: format!("NVIDIA's libcuda opened as `{name}`"),
        };
        return Probe::Nvidia(choice, lib);
    }
    Probe::Missing { tried }
}

/// Why the NVIDIA libcuda just opened cannot run work (cuInit fails, or it sees no device), or
/// None when it can. Calling cuInit here is harmless: it is idempotent and cudarc calls it again.
fn nvidia_unusable(lib: &UnixLibrary) -> Option<String> {
    type Init = unsafe extern "C" fn(u32) -> c_int;
    type Count = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: the symbol types are cuda.h's prototypes of cuInit and cuDeviceGetCount.
    let (init, count) = unsafe {
        (
            lib.get::<Init>(b"cuInit").ok()?,
            lib.get::<Count>(b"cuDeviceGetCount").ok()?,
        )
    };
    // SAFETY: cuInit takes flags (must be 0) and has no other preconditions.
    let code = unsafe { init(0) };
    if code != 0 {
        return Some(format!("cuInit failed with CUresult {code}"));
    }
    let mut devices: c_int = 0;
    // SAFETY: `devices` is a valid, writable int; the driver is initialised above.
    let code = unsafe { count(&mut devices) };
    match (code, devices) {
        (0, 0) => Some("it reports no CUDA device".into()),
        (0, _) => None,
        (code, _) => Some(format!("cuDeviceGetCount failed with CUresult {code}")),
    }
}

/// Keeps NVIDIA's library loaded for the life of the process: cudarc's own dlopen must find it.
fn keep_open(choice: DriverChoice, lib: UnixLibrary) -> DriverChoice {
    std::mem::forget(lib);
    choice
}

/// The files, in order, where `libsoftcuda.so` is looked for when `$SOFTCUDA_LIB` is unset.
pub fn soft_lib_candidates() -> Vec<PathBuf> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut out = vec![
        dir.join(SOFT_LIB_FILE),
        dir.join("deps").join(SOFT_LIB_FILE),
    ];
    // Test binaries live in target/*/deps and examples in target/*/examples; cargo leaves a
    // dependency's cdylib in target/*/deps.
    if let Some(parent) = dir.parent() {
        out.push(parent.join(SOFT_LIB_FILE));
        out.push(parent.join("deps").join(SOFT_LIB_FILE));
    }
    out
}

/// Where softcuda is: `explicit` (the value of `$SOFTCUDA_LIB`) when given, else the most
/// recently built of [`soft_lib_candidates`] that exist (the first on a tie). cargo copies a
/// cdylib up beside the binaries only when it builds softcuda itself as a root, and never
/// refreshes that copy when softcuda is rebuilt as a dependency, so the copy beside a binary
/// can be older than the one in `deps/`: taking the first found ran a stale driver.
fn find_soft_lib(explicit: Option<std::ffi::OsString>) -> Result<PathBuf, LoaderError> {
    if let Some(value) = explicit.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(LoaderError::SoftLibEnvMissing { path })
        };
    }
    let searched = soft_lib_candidates();
    newest(&searched).ok_or(LoaderError::SoftLibNotFound { searched })
}

/// The most recently modified of the existing files in `paths`; the earliest listed on a tie.
fn newest(paths: &[PathBuf]) -> Option<PathBuf> {
    let mut best: Option<(&PathBuf, std::time::SystemTime)> = None;
    for p in paths {
        let Ok(meta) = std::fs::metadata(p) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        if best.is_none_or(|(_, t)| modified > t) {
            best = Some((p, modified));
        }
    }
    best.map(|(p, _)| p.clone())
}

/// Opens softcuda globally and checks that a bare `libcuda.so` now resolves to it.
fn open_soft(why: String) -> Result<DriverChoice, LoaderError> {
    let path = find_soft_lib(std::env::var_os(SOFT_LIB_ENV))?;
    // SAFETY: softcuda's initialisers only set up Rust statics; they have no preconditions.
    let lib =
        unsafe { UnixLibrary::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|source| {
            LoaderError::SoftOpenFailed {
                path: path.clone(),
                source,
            }
        })?;
    if symbol_path(&lib, MARKER_SYMBOL).is_none() {
        return Err(LoaderError::NotSoftcuda { path });
    }
    // Never closed: cudarc holds function pointers into it for the rest of the process.
    std::mem::forget(lib);
    // SAFETY: RTLD_NOLOAD only looks up objects already loaded; nothing new is initialised.
    let resolved = unsafe { UnixLibrary::open(Some("libcuda.so"), RTLD_NOW | RTLD_NOLOAD) };
    match resolved {
        Ok(lib) if symbol_path(&lib, MARKER_SYMBOL).is_some() => Ok(DriverChoice {
            kind: DriverKind::Soft,
            path: canonical(&path),
            reason: format!("{why}; loaded from {}", path.display()),
        }),
        Ok(lib) => Err(LoaderError::Shadowed {
            soft: path,
            other: symbol_path(&lib, "cuInit").unwrap_or_else(|| PathBuf::from("libcuda.so")),
        }),
        Err(_) => Err(LoaderError::Shadowed {
            soft: path,
            other: PathBuf::from(
                "(nothing: the SONAME did not match; was softcuda built without build.rs?)",
            ),
        }),
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// glibc's `Dl_info`.
#[repr(C)]
struct DlInfo {
    dli_fname: *const c_char,
    dli_fbase: *mut c_void,
    dli_sname: *const c_char,
    dli_saddr: *mut c_void,
}

unsafe extern "C" {
    fn dladdr(addr: *const c_void, info: *mut DlInfo) -> c_int;
}

/// The file that defines `symbol` as seen through `lib`, or None when `lib` lacks it.
fn symbol_path(lib: &UnixLibrary, symbol: &str) -> Option<PathBuf> {
    // SAFETY: the symbol is only used as an address for dladdr, never called or dereferenced.
    let sym = unsafe { lib.get::<*const c_void>(symbol.as_bytes()) }.ok()?;
    let addr = sym.as_raw_ptr().cast_const();
    if addr.is_null() {
        return None;
    }
    let mut info = DlInfo {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `addr` lies in a loaded object and `info` is a valid, writable Dl_info.
    let found = unsafe { dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return Some(PathBuf::from(symbol));
    }
    // SAFETY: dladdr returned a NUL-terminated path owned by the loader, valid while loaded.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_newest_candidate_wins_over_a_stale_copy_listed_first() {
        let dir = std::env::temp_dir().join(format!("softcuda-newest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (stale, fresh) = (dir.join("a.so"), dir.join("b.so"));
        std::fs::write(&stale, b"old").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::write(&fresh, b"new").unwrap();
        let missing = dir.join("missing.so");
        let found = super::newest(&[missing.clone(), stale.clone(), fresh.clone()]);
        assert_eq!(found, Some(fresh.clone()));
        assert_eq!(super::newest(&[missing]), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn preference_parses_known_values_case_insensitively() {
        assert_eq!("auto".parse::<Preference>().unwrap(), Preference::Auto);
        assert_eq!("NVIDIA".parse::<Preference>().unwrap(), Preference::Nvidia);
        assert_eq!(
            " softcuda ".parse::<Preference>().unwrap(),
            Preference::Softcuda
        );
    }

    #[test]
    fn preference_rejects_unknown_value_with_typed_error() {
        let err = "cuda".parse::<Preference>().unwrap_err();
        assert!(matches!(err, LoaderError::BadPreference { ref value } if value == "cuda"));
        assert!(err.to_string().contains("auto"));
    }

    #[test]
    fn soft_candidates_start_beside_the_executable() {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap();
        let c = soft_lib_candidates();
        assert_eq!(c[0], dir.join("libsoftcuda.so"));
        assert_eq!(c[1], dir.join("deps/libsoftcuda.so"));
    }

    #[test]
    fn explicit_soft_lib_that_is_missing_is_a_typed_error_not_a_fallback() {
        let err = find_soft_lib(Some("/nonexistent/libsoftcuda.so".into())).unwrap_err();
        assert!(
            matches!(err, LoaderError::SoftLibEnvMissing { .. }),
            "{err}"
        );
    }

    #[test]
    fn explicit_soft_lib_that_exists_is_used_as_given() {
        let exe = std::env::current_exe().unwrap();
        let found = find_soft_lib(Some(exe.clone().into_os_string())).unwrap();
        assert_eq!(found, exe);
    }
}
