//! Kernel bundles: a directory with `manifest.toml` naming modules as PTX, cubin (per
//! architecture) and/or fatbin; turned into [`ModuleSource`]s with the right image picked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};

/// A module image as the driver loads it.
#[derive(Debug, Clone)]
pub enum ModuleImage {
    /// PTX text (JIT-compiled by the driver).
    Ptx(String),
    /// An ELF cubin for one architecture.
    Cubin(Vec<u8>),
    /// A fat binary.
    Fatbin(Vec<u8>),
}

/// One module to load: its image, and PTX to fall back on when the image does not suit the GPU.
#[derive(Debug, Clone)]
pub struct ModuleSource {
    /// The module's name (kernels are looked up across all modules of a registry).
    pub name: String,
    /// The preferred image.
    pub image: ModuleImage,
    /// PTX tried when a cubin/fatbin is refused (no binary for this GPU, invalid image, ...).
    pub ptx_fallback: Option<String>,
    /// The file the image came from, for error messages.
    pub file: Option<PathBuf>,
}

impl ModuleSource {
    /// A module from an in-memory image, without fallback.
    pub fn new(name: impl Into<String>, image: ModuleImage) -> Self {
        Self {
            name: name.into(),
            image,
            ptx_fallback: None,
            file: None,
        }
    }

    /// The PTX text of this module, when it has any (image or fallback).
    pub fn ptx(&self) -> Option<&str> {
        match &self.image {
            ModuleImage::Ptx(p) => Some(p),
            _ => self.ptx_fallback.as_deref(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    name: String,
    #[serde(rename = "module", default)]
    modules: Vec<ManifestModule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestModule {
    name: String,
    ptx: Option<String>,
    #[serde(default)]
    cubin: BTreeMap<String, String>,
    fatbin: Option<String>,
}

/// A parsed bundle: its name and its modules with images picked for `sm_tag` (e.g. "sm_90").
pub fn read_bundle(dir: &Path, sm_tag: &str) -> Result<(String, Vec<ModuleSource>)> {
    let manifest_path = dir.join("manifest.toml");
    let text = std::fs::read_to_string(&manifest_path).map_err(|e| Error::InvalidBundle {
        path: manifest_path.clone(),
        reason: format!("cannot read it: {e}"),
    })?;
    let m: Manifest = toml::from_str(&text).map_err(|e| Error::InvalidBundle {
        path: manifest_path.clone(),
        reason: format!("malformed manifest: {e}"),
    })?;
    if m.modules.is_empty() {
        return Err(Error::InvalidBundle {
            path: manifest_path,
            reason: "no [[module]] entries".into(),
        });
    }
    let read = |file: &str| -> Result<(Vec<u8>, PathBuf)> {
        let p = dir.join(file);
        let bytes = std::fs::read(&p).map_err(|e| Error::InvalidBundle {
            path: p.clone(),
            reason: format!("cannot read module file: {e}"),
        })?;
        Ok((bytes, p))
    };
    let read_text = |file: &str| -> Result<(String, PathBuf)> {
        let (bytes, p) = read(file)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::InvalidBundle {
            path: p.clone(),
            reason: "PTX is not UTF-8 text".into(),
        })?;
        Ok((s, p))
    };
    let mut out = Vec::new();
    for mm in &m.modules {
        let ptx = mm.ptx.as_deref().map(read_text).transpose()?;
        let (image, file) = if let Some(c) = mm.cubin.get(sm_tag) {
            let (b, p) = read(c)?;
            (ModuleImage::Cubin(b), p)
        } else if let Some(f) = &mm.fatbin {
            let (b, p) = read(f)?;
            (ModuleImage::Fatbin(b), p)
        } else if let Some((t, p)) = &ptx {
            (ModuleImage::Ptx(t.clone()), p.clone())
        } else {
            return Err(Error::InvalidBundle {
                path: manifest_path.clone(),
                reason: format!(
                    "module '{}' has no image for {sm_tag}: cubins for [{}], no fatbin, no ptx",
                    mm.name,
                    mm.cubin.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        };
        let ptx_fallback = match image {
            ModuleImage::Ptx(_) => None,
            _ => ptx.map(|(t, _)| t),
        };
        out.push(ModuleSource {
            name: mm.name.clone(),
            image,
            ptx_fallback,
            file: Some(file),
        });
    }
    Ok((m.name, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(manifest: &str, files: &[(&str, &[u8])]) -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gpuhost-manifest-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        dir
    }

    const M: &str = r#"
name = "model-a"
[[module]]
name = "stamp"
ptx = "stamp.ptx"
cubin = { sm_90 = "stamp.sm_90.cubin", sm_80 = "stamp.sm_80.cubin" }
"#;

    #[test]
    fn cubin_matching_the_architecture_is_picked_with_ptx_fallback() {
        let dir = bundle(
            M,
            &[
                ("stamp.ptx", b"// ptx"),
                ("stamp.sm_90.cubin", b"\x7fELF90"),
                ("stamp.sm_80.cubin", b"\x7fELF80"),
            ],
        );
        let (name, mods) = read_bundle(&dir, "sm_90").unwrap();
        assert_eq!(name, "model-a");
        assert!(matches!(&mods[0].image, ModuleImage::Cubin(b) if b == b"\x7fELF90"));
        assert_eq!(mods[0].ptx_fallback.as_deref(), Some("// ptx"));
        assert!(
            mods[0]
                .file
                .as_ref()
                .unwrap()
                .ends_with("stamp.sm_90.cubin")
        );
    }

    #[test]
    fn no_matching_cubin_means_ptx() {
        let dir = bundle(
            M,
            &[
                ("stamp.ptx", b"// ptx"),
                ("stamp.sm_90.cubin", b"x"),
                ("stamp.sm_80.cubin", b"y"),
            ],
        );
        let (_, mods) = read_bundle(&dir, "sm_75").unwrap();
        assert!(matches!(&mods[0].image, ModuleImage::Ptx(t) if t == "// ptx"));
        assert!(mods[0].ptx_fallback.is_none());
    }

    #[test]
    fn missing_files_and_bad_manifests_are_invalid_bundle() {
        let dir = bundle(M, &[]);
        let e = read_bundle(&dir, "sm_90").unwrap_err();
        assert!(
            matches!(e, Error::InvalidBundle { ref path, .. } if path.ends_with("stamp.ptx")),
            "{e}"
        );
        let dir = bundle(
            "name = \"x\"\n[[module]]\nname = \"m\"\nptxx = \"a\"\n",
            &[],
        );
        let e = read_bundle(&dir, "sm_90").unwrap_err();
        assert!(e.to_string().contains("ptxx"), "{e}");
        let dir = bundle("name = \"x\"\n[[module]]\nname = \"m\"\n", &[]);
        let e = read_bundle(&dir, "sm_90").unwrap_err();
        assert!(e.to_string().contains("no image for sm_90"), "{e}");
    }
}
