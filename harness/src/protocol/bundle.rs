//! L2, the bundle: the six scripts read from `bundle/` byte for byte, and the manifest that names them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use crate::error::HarnessError;

/// The six transitions in manifest (and digest) order.
pub const SCRIPT_ORDER: [&str; 6] = ["enqueue", "claim", "complete", "retry", "promote", "reap"];

/// The frozen claim script's sha1 (SPEC §2).
pub const FROZEN_CLAIM_SHA1: &str = "2319de1e94e21dd355032c7a25b90636b53f36cd";

/// One script's manifest entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptEntry {
    pub name: String,
    pub file: String,
    pub sha1: String,
    pub keys: Vec<String>,
    pub argv: Vec<String>,
    /// 1-based index of the ARGV entry that is a key root.
    pub key_root_argv: usize,
}

/// `bundle/manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub bundle: String,
    pub protocol: u32,
    pub digest: String,
    pub fence_key: String,
    pub scripts: Vec<ScriptEntry>,
}

/// A script as loaded: its exact bytes and their sha1.
#[derive(Debug, Clone)]
pub struct Script {
    pub entry: ScriptEntry,
    pub source: Vec<u8>,
    pub sha1: String,
}

/// The loaded bundle. Loading does not judge it: [`Bundle::problems`] does, so G2 can report.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub scripts: Vec<Script>,
    /// Each script's sha1 with its name, the files' and then the manifest's (they differ in a
    /// drifted bundle): evidence names a script an author wrote (`EVALSHA 267a20df… (promote)`),
    /// not only the SHA an engine logged ([`Bundle::sha_label`]). Kept as loaded: a script
    /// changed afterwards (a double's patched copy) is not one of the bundle's.
    names: Vec<(String, String)>,
}

/// Where the bundle lives when nobody says: `EMQ_BUNDLE_DIR`, else this repository's `bundle/`
/// (tests and library callers, run inside the checkout). `emq-gate` passes its own choice
/// (`cmd::sources`) to what needs it instead.
pub fn default_dir() -> PathBuf {
    crate::settings::bundle_dir().unwrap_or_else(|| crate::repo_relative("bundle"))
}

/// Lower-case hex sha1.
pub fn sha1_hex(bytes: &[u8]) -> String {
    hex::encode(Sha1::digest(bytes))
}

/// The fence digest: sha1 of the script SHAs joined by `\n`, in [`SCRIPT_ORDER`].
pub fn digest_of<'a>(shas: impl IntoIterator<Item = &'a str>) -> String {
    sha1_hex(shas.into_iter().collect::<Vec<_>>().join("\n").as_bytes())
}

impl Bundle {
    /// Reads the manifest and every script file from `dir`.
    pub fn load(dir: &Path) -> Result<Self, HarnessError> {
        let mpath = dir.join("manifest.json");
        let text = std::fs::read_to_string(&mpath)
            .map_err(|e| HarnessError::io(mpath.display().to_string(), e))?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| HarnessError::Bundle(format!("{}:{}: {e}", mpath.display(), e.line())))?;
        let names: Vec<&str> = manifest.scripts.iter().map(|s| s.name.as_str()).collect();
        if names != SCRIPT_ORDER {
            return Err(HarnessError::Bundle(format!(
                "{}: scripts must be {SCRIPT_ORDER:?} in that order, found {names:?}",
                mpath.display()
            )));
        }
        let scripts: Vec<Script> = manifest
            .scripts
            .iter()
            .map(|entry| {
                let p = dir.join(&entry.file);
                let source =
                    std::fs::read(&p).map_err(|e| HarnessError::io(p.display().to_string(), e))?;
                Ok(Script {
                    sha1: sha1_hex(&source),
                    entry: entry.clone(),
                    source,
                })
            })
            .collect::<Result<_, HarnessError>>()?;
        let mut names: Vec<(String, String)> = Vec::new();
        for s in &scripts {
            for sha1 in [&s.sha1, &s.entry.sha1] {
                if !names.iter().any(|(known, _)| known == sha1) {
                    names.push((sha1.clone(), s.entry.name.clone()));
                }
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            scripts,
            names,
        })
    }

    /// The script of this bundle whose sha1 is `sha` or starts with it (case-insensitive, 8
    /// characters at least), by the name its manifest gives; `None` for a foreign script.
    pub fn script_name(&self, sha: &str) -> Option<&str> {
        let sha = sha.to_ascii_lowercase();
        if sha.len() < 8 {
            return None;
        }
        self.names
            .iter()
            .find(|(s, _)| s.starts_with(&sha))
            .map(|(_, n)| n.as_str())
    }

    /// `sha` as evidence shows it: its first 8 characters, then the script's name when it is
    /// one of this bundle's (`267a20df… (promote)`), else `(not a bundle script)`.
    pub fn sha_label(&self, sha: &str) -> String {
        let short: String = sha.chars().take(8).collect();
        let ellipsis = if sha.chars().count() > 8 { "…" } else { "" };
        match self.script_name(sha) {
            Some(name) => format!("{short}{ellipsis} ({name})"),
            None => format!("{short}{ellipsis} (not a bundle script)"),
        }
    }

    /// The bundle at [`default_dir`].
    pub fn load_default() -> Result<Self, HarnessError> {
        Self::load(&default_dir())
    }

    /// The script named `name` (one of [`SCRIPT_ORDER`]).
    pub fn script(&self, name: &str) -> &Script {
        self.scripts
            .iter()
            .find(|s| s.entry.name == name)
            .unwrap_or_else(|| panic!("no script {name} in the bundle"))
    }

    /// The digest computed from the files (not the manifest's claim).
    pub fn computed_digest(&self) -> String {
        digest_of(self.scripts.iter().map(|s| s.sha1.as_str()))
    }

    /// Every way the files disagree with the manifest or the byte rules; empty when clean.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.scripts {
            let f = &s.entry.file;
            if s.sha1 != s.entry.sha1 {
                out.push(format!(
                    "{f}: sha1 {} but manifest says {}",
                    s.sha1, s.entry.sha1
                ));
            }
            if s.source.contains(&b'\r') {
                out.push(format!("{f}: contains CR"));
            }
            if s.source.starts_with(&[0xEF, 0xBB, 0xBF]) {
                out.push(format!("{f}: starts with a BOM"));
            }
            if !s.source.ends_with(b"\n") || s.source.ends_with(b"\n\n") {
                out.push(format!("{f}: must end with exactly one LF"));
            }
            if std::str::from_utf8(&s.source).is_err() {
                out.push(format!("{f}: not UTF-8"));
            }
            if s.entry.key_root_argv != 1
                || s.entry.argv.first().map(String::as_str) != Some("root")
            {
                out.push(format!("{f}: ARGV[1] must be the job root"));
            }
        }
        if self.script("claim").sha1 != FROZEN_CLAIM_SHA1 {
            out.push(format!(
                "claim: not the frozen script (sha1 {})",
                self.script("claim").sha1
            ));
        }
        let digest = self.computed_digest();
        if digest != self.manifest.digest {
            out.push(format!(
                "digest {digest} but manifest says {}",
                self.manifest.digest
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_bundle_has_no_drift() {
        let b = Bundle::load_default().unwrap();
        assert_eq!(b.problems(), Vec::<String>::new());
        assert_eq!(b.manifest.bundle, "1.0.0");
        assert_eq!(b.manifest.protocol, 1);
        assert_eq!(b.script("claim").sha1, FROZEN_CLAIM_SHA1);
    }

    #[test]
    fn a_sha_is_labelled_with_its_script_name_by_the_bundle_that_holds_it() {
        let b = Bundle::load_default().unwrap();
        let claim = FROZEN_CLAIM_SHA1;
        assert_eq!(b.script_name(claim), Some("claim"));
        assert_eq!(
            b.script_name(&claim[..8].to_ascii_uppercase()),
            Some("claim")
        );
        assert_eq!(b.script_name(&claim[..7]), None, "under 8 characters");
        assert_eq!(b.sha_label(claim), "2319de1e… (claim)");
        assert_eq!(b.sha_label(&claim[..8]), "2319de1e (claim)");
        assert_eq!(
            b.sha_label("0123456789abcdef"),
            "01234567… (not a bundle script)"
        );
        assert_eq!(b.sha_label("abc"), "abc (not a bundle script)");
    }

    #[test]
    fn a_drifted_bundle_names_the_manifest_sha_and_the_files_alike() {
        let dir = std::env::temp_dir().join(format!("emq-bundle-names-{}", std::process::id()));
        let src = Bundle::load_default().unwrap();
        for s in &src.scripts {
            let to = dir.join(&s.entry.file);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, &s.source).unwrap();
        }
        std::fs::copy(src.dir.join("manifest.json"), dir.join("manifest.json")).unwrap();
        let promote = src.script("promote").entry.clone();
        let file = dir.join(&promote.file);
        let mut text = std::fs::read(&file).unwrap();
        text.extend_from_slice(b"-- drifted\n");
        std::fs::write(&file, &text).unwrap();
        let b = Bundle::load(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            b.script_name(&promote.sha1),
            Some("promote"),
            "the manifest's"
        );
        assert_eq!(
            b.script_name(&sha1_hex(&text)),
            Some("promote"),
            "the file's"
        );
        // A copy changed after loading (a double's patched bundle) keeps the names as loaded.
        let mut patched = b.clone();
        patched.scripts[4].source.extend_from_slice(b"-- patched\n");
        let other = sha1_hex(&patched.scripts[4].source);
        assert_eq!(patched.script_name(&other), None);
    }

    #[test]
    fn drift_is_detected() {
        let mut b = Bundle::load_default().unwrap();
        b.scripts[1].source.extend_from_slice(b"\r\n");
        b.scripts[1].sha1 = sha1_hex(&b.scripts[1].source);
        let p = b.problems();
        assert!(p.iter().any(|m| m.contains("contains CR")), "{p:?}");
        assert!(p.iter().any(|m| m.contains("not the frozen")), "{p:?}");
        assert!(p.iter().any(|m| m.starts_with("digest")), "{p:?}");
    }
}
