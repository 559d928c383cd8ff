//! Where `emq-gate` finds what it judges by and where it writes, so an installed binary
//! (`cargo install --path harness`) works from any directory:
//!
//! - **bundle** and **cases**: `--bundle DIR` / `--cases DIR` (`EMQ_BUNDLE_DIR` / `EMQ_CASES_DIR`),
//!   else the copies embedded at build time (`harness/build.rs`), written to a temp directory
//!   for the run because a child connector reads the bundle by path. The binary never reads the
//!   checkout it was built in by itself: what was installed is what judges.
//! - **reports** (`record`, `check`): `--reports DIR` (`EMQ_REPORTS_DIR`), else the `reports/` of
//!   the EchoMQ checkout that contains the current directory (so `.ci/run` and `ci/*` keep working
//!   from the root or any subdirectory), else `./reports`.
//! - **record name**: `--name`, else `reference` for the in-process reference connector, else the
//!   name the child announces in `hello` (`echomq-python` → `reports/echomq-python.json`).
//!   A record of another connector is never overwritten without `--force`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::connector::child::ChildSpec;
use crate::error::HarnessError;
use crate::protocol::bundle::{self, Bundle};
use crate::protocol::embedded::{self, Unpacked};
use crate::report::{ConnectorName, Record};
use crate::suites::cases::format::{self as cases, Corpus};

/// The bundle and cases of this run; the temp copy (if any) lives as long as this, so `main`
/// keeps it until exit and hands [`Sources::dirs`] to every command.
#[derive(Debug)]
pub struct Sources {
    _unpacked: Option<Unpacked>,
    pub dirs: Dirs,
}

/// Where the run's bundle and cases are: passed to what needs them (the run's options, the
/// gates' context, a child's environment), never kept in a global.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirs {
    pub bundle: PathBuf,
    pub cases: Corpus,
}

impl Dirs {
    /// The bundle and cases nobody chose: `EMQ_BUNDLE_DIR` / `EMQ_CASES_DIR`, else the
    /// checkout's (tests and library callers).
    pub fn from_env() -> Self {
        Self {
            bundle: bundle::default_dir(),
            cases: Corpus::at(cases::default_dir()),
        }
    }

    /// The bundle in [`Dirs::bundle`].
    pub fn load_bundle(&self) -> Result<Bundle, HarnessError> {
        Bundle::load(&self.bundle)
    }
}

/// Chooses the bundle and cases for the whole process (see the module docs).
pub fn resolve(bundle: Option<PathBuf>, cases: Option<PathBuf>) -> Result<Sources, HarnessError> {
    let unpacked = if bundle.is_none() || cases.is_none() {
        Some(embedded::unpack()?)
    } else {
        None
    };
    let pick = |given: Option<PathBuf>, embedded: Option<&PathBuf>| -> PathBuf {
        given
            .map(|p| std::path::absolute(&p).unwrap_or(p))
            .or_else(|| embedded.cloned())
            .unwrap_or_default()
    };
    let b = pick(bundle, unpacked.as_ref().map(|u| &u.bundle));
    let c = pick(cases, unpacked.as_ref().map(|u| &u.cases));
    if !b.join("manifest.json").is_file() {
        return Err(HarnessError::BadInput(format!(
            "--bundle {}: no manifest.json there",
            b.display()
        )));
    }
    if !c.is_dir() {
        return Err(HarnessError::BadInput(format!(
            "--cases {}: not a directory",
            c.display()
        )));
    }
    let corpus = if unpacked.as_ref().is_some_and(|u| u.cases == c) {
        Corpus::shown_as(c, "cases")
    } else {
        Corpus::at(c)
    };
    Ok(Sources {
        _unpacked: unpacked,
        dirs: Dirs {
            bundle: b,
            cases: corpus,
        },
    })
}

/// The child's environment names the bundle the harness judges by (`dir`): `EMQ_BUNDLE_DIR`
/// and `EMQ_BUNDLE_VERSION` (SPEC §5).
pub fn with_bundle_env(spec: ChildSpec, dir: &Path) -> ChildSpec {
    let version = Bundle::load(dir)
        .map(|b| b.manifest.bundle)
        .unwrap_or_default();
    spec.with_env(crate::settings::BUNDLE_DIR, dir.display().to_string())
        .with_env("EMQ_BUNDLE_VERSION", version)
}

/// True when `dir` is the root of an EchoMQ checkout.
fn is_checkout(dir: &Path) -> bool {
    dir.join("bundle/manifest.json").is_file()
        && dir.join("cases").is_dir()
        && dir.join("harness/Cargo.toml").is_file()
}

/// Where records are read and written (see the module docs).
pub fn reports_dir(flag: Option<PathBuf>) -> PathBuf {
    if let Some(d) = flag {
        return d;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cwd.ancestors()
        .find(|d| is_checkout(d))
        .map(|root| {
            let r = root.join("reports");
            r.strip_prefix(&cwd).map(Path::to_path_buf).unwrap_or(r)
        })
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("reports"))
}

/// A file stem from the name a connector announced: `[A-Za-z0-9._-]`, anything else `-`; none
/// when it said no hello.
pub fn stem_of(connector: &ConnectorName) -> Result<String, HarnessError> {
    let s: String = connector
        .name()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(|c| c == '-' || c == '.').to_string();
    if s.is_empty() {
        return Err(HarnessError::BadInput(format!(
            "the connector announced no usable name ({:?}); pass --name",
            connector.as_str()
        )));
    }
    Ok(s)
}

/// Refuses to overwrite `<dir>/<stem>.json` when it is the record of another connector, unless
/// `force`.
pub fn guard_overwrite(
    dir: &Path,
    stem: &str,
    connector_name: &ConnectorName,
    force: bool,
) -> Result<(), HarnessError> {
    let path = dir.join(format!("{stem}.json"));
    if force || !path.exists() {
        return Ok(());
    }
    match Record::load(&path) {
        Ok(r) if r.header.connector_name == *connector_name => Ok(()),
        Ok(r) => Err(HarnessError::BadInput(format!(
            "{} is the record of connector {:?}, not {:?}; pass --name <other> or --force",
            path.display(),
            r.header.connector_name.as_str(),
            connector_name.as_str()
        ))),
        Err(e) => Err(HarnessError::BadInput(format!(
            "{} exists and is not a record ({e}); pass --force to overwrite it",
            path.display()
        ))),
    }
}

/// A child spec from a command line, judged by the bundle in `bundle`.
pub fn child_spec(command: &[String], timeout: u64, bundle: &Path) -> ChildSpec {
    let spec = ChildSpec::new(command.iter().cloned()).with_timeout(Duration::from_secs(timeout));
    with_bundle_env(spec, bundle)
}

/// [`child_spec`], logging the exchange to `wire_log` when given.
pub fn child_spec_logged(
    command: &[String],
    timeout: u64,
    wire_log: Option<&PathBuf>,
    bundle: &Path,
) -> ChildSpec {
    let spec = child_spec(command, timeout, bundle);
    match wire_log {
        Some(f) => spec.with_wire_log(f),
        None => spec,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_are_file_safe() {
        let stem = |name: &str| stem_of(&ConnectorName::from_hello(Ok::<_, String>(name.into())));
        assert_eq!(stem("echomq-python").unwrap(), "echomq-python");
        assert_eq!(stem("my go/connector").unwrap(), "my-go-connector");
        assert!(stem("///").is_err());
        let no_hello = ConnectorName::from_hello(Err::<String, _>("boom"));
        assert_eq!(no_hello.as_str(), "<no hello: boom>");
        assert_eq!(no_hello.name(), None);
        assert!(stem_of(&no_hello).is_err());
        // Read back from a record, the text is a missing hello again.
        assert_eq!(
            ConnectorName::from("<no hello: boom>".to_string()),
            no_hello
        );
    }
}
