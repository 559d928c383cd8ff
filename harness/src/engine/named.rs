//! Engines by name (`valkey-9.1`, `valkey-8.1`, `redis-7.0`, `redis-8.0`) and where a build came
//! from.
//!
//! `ci/provision` writes one pair of variables per engine it built:
//! `EMQ_ENGINE_<NAME>_SERVER` (the binary) and `EMQ_ENGINE_<NAME>_IMAGE` (the local image), where
//! `<NAME>` is the name upper-cased with `-` and `.` as `_`. A name resolves through them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The engines a matrix runs by default, the pinned one first; then a Valkey Cluster of the
/// pinned engine's binary (a name with [`CLUSTER_SUFFIX`]), its TLS build, and the Sentinel
/// deployments of both ([`SENTINEL_SUFFIX`]).
pub const DEFAULT_NAMES: [&str; 9] = [
    "valkey-9.1",
    "valkey-8.1",
    "redis-7.0",
    "redis-8.0",
    "valkey-9.1-cluster",
    "valkey-9.1-tls",
    "valkey-9.1-tls-cluster",
    "valkey-9.1-sentinel",
    "valkey-9.1-tls-sentinel",
];

/// `<name>-cluster` names a cluster booted from engine `<name>`'s binary.
pub const CLUSTER_SUFFIX: &str = "-cluster";

/// `<name>-sentinel` names a Sentinel deployment booted from engine `<name>`'s binary (SPEC §11).
pub const SENTINEL_SUFFIX: &str = "-sentinel";

/// `<name>-tls` names a build of `<name>` with TLS, booted TLS only (SPEC §10).
pub const TLS_SUFFIX: &str = "-tls";

/// The image label naming the source a local image was built from.
pub const SOURCE_LABEL: &str = "org.echomq.source";

/// An engine name with what its variables say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineName {
    /// As given, lower-case: `valkey-9.1`.
    pub name: String,
    /// `EMQ_ENGINE_<NAME>_SERVER`.
    pub server: Option<PathBuf>,
    /// `EMQ_ENGINE_<NAME>_IMAGE`.
    pub image: Option<String>,
    /// A cluster of this engine's binary (`<name>-cluster`).
    pub cluster: bool,
    /// A build with TLS, booted TLS only (`<name>-tls`, SPEC §10).
    pub tls: bool,
    /// A Sentinel deployment of this engine's binary (`<name>-sentinel`, SPEC §11).
    pub sentinel: bool,
}

/// `valkey-9.1` → `EMQ_ENGINE_VALKEY_9_1`.
pub fn var_prefix(name: &str) -> String {
    crate::settings::engine_var_prefix(name)
}

/// The name a product and version go by: `valkey` `9.1.2` → `valkey-9.1`.
pub fn name_of(product: &str, version: &str) -> String {
    let mm: Vec<&str> = version.split('.').take(2).collect();
    format!("{product}-{}", mm.join("."))
}

/// The names the environment knows (`EMQ_ENGINE_*_SERVER` / `_IMAGE`), lower-cased back, for
/// error messages.
pub fn known_names() -> Vec<String> {
    let mut out: Vec<String> = crate::settings::engine_var_stems()
        .into_iter()
        .map(|stem| {
            // VALKEY_9_1 → valkey-9.1: the first `_` is the product's dash, the rest are dots.
            let lower = stem.to_ascii_lowercase();
            let (lower, tls) = match lower.strip_suffix("_tls") {
                Some(base) => (base.to_string(), TLS_SUFFIX),
                None => (lower, ""),
            };
            match lower.split_once('_') {
                Some((p, v)) => format!("{p}-{}{tls}", v.replace('_', ".")),
                None => format!("{lower}{tls}"),
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl EngineName {
    /// Resolves `name` through its variables; an error when neither is set.
    pub fn resolve(name: &str) -> Result<Self, String> {
        let name = name.trim().to_ascii_lowercase();
        for (suffix, what) in [
            (CLUSTER_SUFFIX, "a cluster"),
            (SENTINEL_SUFFIX, "a Sentinel deployment"),
        ] {
            let Some(base) = name.strip_suffix(suffix) else {
                continue;
            };
            let mut e = Self::resolve(base)?;
            if e.server.is_none() {
                return Err(format!(
                    "engine {name:?}: {what} is booted from a binary, and {}_SERVER is not set",
                    var_prefix(base)
                ));
            }
            e.name = name.clone();
            e.cluster = suffix == CLUSTER_SUFFIX;
            e.sentinel = suffix == SENTINEL_SUFFIX;
            return Ok(e);
        }
        let prefix = var_prefix(&name);
        let var = crate::settings::var;
        let server = var(&format!("{prefix}_SERVER")).map(PathBuf::from);
        let image = var(&format!("{prefix}_IMAGE"));
        if server.is_none() && image.is_none() {
            let known = known_names();
            return Err(format!(
                "engine {name:?}: neither {prefix}_SERVER nor {prefix}_IMAGE is set (known: {}); \
                 run ci/provision and source ~/.cache/emq/env",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
        Ok(Self {
            tls: name.ends_with(TLS_SUFFIX),
            name,
            server,
            image,
            cluster: false,
            sentinel: false,
        })
    }

    /// The server path, or a path whose name says which variable is unset (so the binary engine's
    /// "no such file" error names it).
    pub fn server_or_unset(&self) -> PathBuf {
        self.server.clone().unwrap_or_else(|| {
            let base = [CLUSTER_SUFFIX, SENTINEL_SUFFIX]
                .iter()
                .find_map(|s| self.name.strip_suffix(s))
                .unwrap_or(&self.name);
            PathBuf::from(format!("unset:{}_SERVER", var_prefix(base)))
        })
    }

    /// The image, or a name that says which variable is unset.
    pub fn image_or_unset(&self) -> String {
        self.image
            .clone()
            .unwrap_or_else(|| format!("unset:{}_IMAGE", var_prefix(&self.name)))
    }
}

/// Where the build of a binary came from: the first line of a `SOURCE` file beside it, or beside
/// its `bin/` folder (`ci/provision` writes `~/.cache/emq/<product>-<version>/SOURCE`).
pub fn binary_source(server: &Path) -> Option<String> {
    let dir = server.parent()?;
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("SOURCE"))
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| t.lines().next().map(|l| l.trim().to_string()))
        .filter(|l| !l.is_empty())
}

/// Where an image came from: its `org.echomq.source` label.
pub fn image_source(image: &str) -> Option<String> {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            &format!("{{{{index .Config.Labels \"{SOURCE_LABEL}\"}}}}"),
            image,
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty() && text != "<no value>").then_some(text)
}

/// The product and version `INFO server` reports: Valkey says `server_name:valkey` and
/// `valkey_version`; Redis says only `redis_version` (Valkey also reports a compatibility
/// `redis_version`, which must not win).
pub fn identify(info: &std::collections::BTreeMap<String, String>) -> Option<(String, String)> {
    if let Some(v) = info.get("valkey_version") {
        let product = info
            .get("server_name")
            .cloned()
            .unwrap_or_else(|| "valkey".into());
        return Some((product, v.clone()));
    }
    let product = info
        .get("server_name")
        .cloned()
        .unwrap_or_else(|| "redis".into());
    info.get("redis_version").map(|v| (product, v.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn info(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn valkey_and_redis_are_told_apart() {
        let valkey = info(&[
            ("redis_version", "7.2.4"),
            ("server_name", "valkey"),
            ("valkey_version", "9.1.2"),
        ]);
        assert_eq!(identify(&valkey), Some(("valkey".into(), "9.1.2".into())));
        let redis = info(&[("redis_version", "7.0.15"), ("redis_mode", "standalone")]);
        assert_eq!(identify(&redis), Some(("redis".into(), "7.0.15".into())));
        assert_eq!(identify(&info(&[])), None);
    }

    #[test]
    fn names_map_to_variables_and_back() {
        assert_eq!(var_prefix("valkey-9.1"), "EMQ_ENGINE_VALKEY_9_1");
        assert_eq!(var_prefix("redis-7.0"), "EMQ_ENGINE_REDIS_7_0");
        assert_eq!(name_of("redis", "7.0.15"), "redis-7.0");
        assert_eq!(name_of("redis", "8.0.2"), "redis-8.0");
        assert!(DEFAULT_NAMES.contains(&"redis-8.0"));
        assert_eq!(name_of("valkey", "9.1.2"), "valkey-9.1");
    }

    #[test]
    fn a_source_file_beside_bin_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("SOURCE"), "Debian redis 7.0.15\n").unwrap();
        let server = dir.path().join("bin/redis-server");
        assert_eq!(
            binary_source(&server).as_deref(),
            Some("Debian redis 7.0.15")
        );
        assert_eq!(binary_source(Path::new("/nonexistent/x")), None);
    }
}
