fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let mut texts = vec![];
    for d in ["../../corpus/nvcc", "../../corpus/clang"] {
        for e in std::fs::read_dir(d).unwrap() {
            texts.push(std::fs::read_to_string(e.unwrap().path()).unwrap());
        }
    }
    let total: usize = texts.iter().map(|t| t.len()).sum();
    for _ in 0..2 {
        for t in &texts {
            match mode.as_str() {
                "reprint" => {
                    let _ = ptxvm::sandbox::reprint(t).unwrap();
                }
                "lex" => {
                    let _ = ptxvm::Module::load(t);
                }
                _ => {
                    let _ = ptxvm::sandbox::sandbox(t, &Default::default()).unwrap();
                }
            }
        }
    }
    eprintln!("bytes {}", total * 2);
}
