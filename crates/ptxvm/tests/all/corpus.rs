//! Breadth: every PTX file of the shared kernel corpus (clang and, once generated, nvcc) loads.

use ptxvm::Module;

fn corpus_files() -> Vec<std::path::PathBuf> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let root = std::path::Path::new(&dir).join("../../corpus");
    let mut out = Vec::new();
    for flavour in ["clang", "nvcc"] {
        if let Ok(rd) = std::fs::read_dir(root.join(flavour)) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "ptx") {
                    out.push(e.path());
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_corpus_module_loads() {
    let files = corpus_files();
    assert!(
        files.len() >= 10,
        "corpus/clang/*.ptx is committed; found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        match Module::load(&text) {
            Ok(m) => assert!(!m.kernels().is_empty(), "{} has no kernels", f.display()),
            Err(e) => failures.push(format!("{}: {e}", f.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
