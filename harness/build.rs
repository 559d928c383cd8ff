//! Embeds the bundle (`../bundle`) and the case corpus (`../cases`) into the binary, so an
//! installed `emq-gate` (`cargo install --path harness`) judges from any directory.
//!
//! Why a build script generating `include_bytes!` tables rather than the `include_dir` crate: it
//! adds no dependency, and it prints `cargo:rerun-if-changed` for every directory and file, so
//! adding, removing or editing a case or a script rebuilds the binary; `include_dir` only tracks
//! files that existed at the last build (new files need its nightly-only `metadata` feature).
//! Both need the checkout at build time, which `cargo install --path` gives (it builds in place).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            println!("cargo:rerun-if-changed={}", p.display());
            let rel = p.strip_prefix(root).expect("under root");
            out.push((rel.to_string_lossy().replace('\\', "/"), p));
        }
    }
}

fn table(name: &str, dir: &Path) -> String {
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    let mut s = format!("pub static {name}: &[(&str, &[u8])] = &[\n");
    for (rel, path) in files {
        let abs = path.canonicalize().expect("a file path");
        writeln!(
            s,
            "    ({rel:?}, include_bytes!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    s.push_str("];\n");
    s
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let repo = manifest.join("..");
    let mut code = String::new();
    code.push_str(&table("BUNDLE", &repo.join("bundle")));
    code.push_str(&table("CASES", &repo.join("cases")));
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("embedded.rs");
    std::fs::write(out, code).expect("write embedded.rs");
}
