//! Where the corpus fixtures live and which PTX flavours of a kernel exist.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Which compiler produced a PTX fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// clang 14, sm_80, PTX 7.0 — `corpus/clang/` (committed, always present).
    Clang,
    /// nvcc, sm_90 — `corpus/nvcc/` (generated on the GPU host; may be empty).
    Nvcc,
}

impl Flavour {
    /// Both flavours, in the order tests run them.
    pub const ALL: [Flavour; 2] = [Flavour::Clang, Flavour::Nvcc];

    /// The sub-folder of `corpus/` holding this flavour.
    pub fn dir_name(self) -> &'static str {
        match self {
            Flavour::Clang => "clang",
            Flavour::Nvcc => "nvcc",
        }
    }
}

impl std::fmt::Display for Flavour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.dir_name())
    }
}

/// The corpus folder: `$CONFORMANCE_CORPUS`, else `corpus/` at the workspace root found from
/// `CARGO_MANIFEST_DIR` (read at run time: cargo sets it for tests), else `./corpus`.
pub fn corpus_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONFORMANCE_CORPUS").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(manifest) => PathBuf::from(manifest).join("../../corpus"),
        None => PathBuf::from("corpus"),
    }
}

/// The path of `<file>.ptx` in `flavour`'s folder.
pub fn ptx_path(file: &str, flavour: Flavour) -> PathBuf {
    corpus_dir()
        .join(flavour.dir_name())
        .join(format!("{file}.ptx"))
}

/// The flavours of `<file>.ptx` that exist on disk.
pub fn flavours_present(file: &str) -> Vec<Flavour> {
    Flavour::ALL
        .into_iter()
        .filter(|f| ptx_path(file, *f).is_file())
        .collect()
}

/// The flavours of `<file>.ptx` that define `kernel`. A compiler's flavour is regenerated where
/// that compiler runs (nvcc's on the GPU machine), so a kernel new to a source may be missing
/// from a flavour until then; clang's is regenerated here and holds every kernel
/// (`clang_flavour_defines_every_case_kernel`).
pub fn flavours_defining(file: &str, kernel: &str) -> Vec<Flavour> {
    let entry = format!(".entry {kernel}(");
    flavours_present(file)
        .into_iter()
        .filter(|f| read_ptx(file, *f).is_ok_and(|t| t.contains(&entry)))
        .collect()
}

/// The PTX text of `<file>` in `flavour`.
pub fn read_ptx(file: &str, flavour: Flavour) -> Result<String> {
    let path = ptx_path(file, flavour);
    std::fs::read_to_string(&path).map_err(|source| Error::Fixture { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clang_flavour_of_every_corpus_source_is_committed() {
        let dir = corpus_dir();
        let mut sources = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "cu") {
                sources += 1;
                let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
                assert!(
                    flavours_present(&stem).contains(&Flavour::Clang),
                    "{stem}.cu has no clang PTX: run corpus/gen-clang.sh"
                );
            }
        }
        assert!(
            sources >= 14,
            "found only {sources} .cu files in {}",
            dir.display()
        );
    }

    #[test]
    fn clang_flavour_defines_every_case_kernel() {
        for kc in crate::cases::CASES {
            assert!(
                flavours_defining(kc.file, kc.kernel).contains(&Flavour::Clang),
                "corpus/clang/{}.ptx lacks {}: run corpus/gen-clang.sh",
                kc.file,
                kc.kernel
            );
        }
    }
}
