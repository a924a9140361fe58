//! Which libcuda this process runs on, chosen once through `softcuda::loader` before any cudarc
//! call, plus the process-wide lock that keeps context-destroying tests away from all others.

use std::sync::{OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cudarc::driver::{result, sys};
use softcuda::loader::{self, DriverChoice, Preference};

use crate::error::{Error, Result};

/// The selected driver and the device every test uses (ordinal 0).
#[derive(Debug, Clone)]
pub struct Env {
    /// What the loader chose, from where, and why.
    pub choice: DriverChoice,
    /// Device 0.
    pub device: sys::CUdevice,
    /// Whether the preference came from `GPUHOST_DRIVER` (an explicit ask must not be skipped).
    pub explicit: bool,
}

impl Env {
    /// True when the process runs on softcuda.
    pub fn is_soft(&self) -> bool {
        self.choice.kind == loader::DriverKind::Soft
    }
}

static ENV: OnceLock<std::result::Result<Env, String>> = OnceLock::new();

/// Whether `GPUHOST_DRIVER` names a driver explicitly (anything but unset/empty/`auto`).
pub fn preference_is_explicit() -> bool {
    std::env::var(loader::PREFERENCE_ENV)
        .map(|v| !v.trim().is_empty() && !v.trim().eq_ignore_ascii_case("auto"))
        .unwrap_or(false)
}

/// Selects the driver (first call only), initialises it and returns device 0. Prints which driver
/// runs, once per process, so every test log says what it tested.
pub fn env() -> Result<&'static Env> {
    ENV.get_or_init(|| {
        let found = select_and_init();
        match &found {
            Ok(env) => println!(
                "conformance: driver = {} ({}) — {}",
                env.choice.kind,
                env.choice.path.display(),
                env.choice.reason
            ),
            Err(reason) => println!("conformance: no driver: {reason}"),
        }
        found
    })
    .as_ref()
    .map_err(|reason| Error::NoDriver {
        reason: reason.clone(),
    })
}

fn select_and_init() -> std::result::Result<Env, String> {
    let preference = Preference::from_env().map_err(|e| e.to_string())?;
    let choice = loader::select(preference).map_err(|e| e.to_string())?;
    result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    let device = result::device::get(0).map_err(|e| format!("cuDeviceGet(0) failed: {e:?}"))?;
    Ok(Env {
        choice,
        device,
        explicit: preference_is_explicit(),
    })
}

/// "softcuda", "nvidia", or "unselected" — for error messages.
pub fn driver_name() -> String {
    loader::selected()
        .map(|c| c.kind.to_string())
        .unwrap_or_else(|| "unselected".to_owned())
}

static DEVICE_LOCK: RwLock<()> = RwLock::new(());

/// Held by every test that leaves the primary context alive. Many may hold it at once.
pub fn shared_device() -> RwLockReadGuard<'static, ()> {
    DEVICE_LOCK.read().unwrap_or_else(PoisonError::into_inner)
}

/// Held by every test that resets or releases the primary context to zero, or poisons it with a
/// sticky error: no other test runs meanwhile. A failed test poisons nothing here (poison is
/// ignored) because such tests restore the context on every path.
pub fn exclusive_device() -> RwLockWriteGuard<'static, ()> {
    DEVICE_LOCK.write().unwrap_or_else(PoisonError::into_inner)
}
