//! The record's header: who and what was judged, on what; and the connector's announced name.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who and what was judged, on what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Header {
    pub schema: String,
    pub harness_version: String,
    /// The contract judged by (SPEC §12: the rules, checks and cases, versioned apart from the
    /// bundle and the harness). Absent in a record made before the contract had a version, which
    /// is taken as contract 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<u32>,
    /// The rule catalogue's digest (`emq::gates::contract::catalogue_digest`): which catalogue,
    /// exactly, the verdicts were judged by. Absent where `contract_version` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalogue_digest: Option<String>,
    pub bundle_version: String,
    pub bundle_protocol: u32,
    pub bundle_digest: String,
    pub scripts: BTreeMap<String, String>,
    /// Not compared: `container`, `binary` or `url`.
    pub engine_kind: String,
    /// Not compared: the image, the binary's path or the url.
    pub engine_image: String,
    /// The engine listened on TLS only and every connect was `rediss://` (SPEC §10); absent on
    /// an engine without TLS (and in records made before it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub engine_tls: bool,
    /// The server product from `INFO server`: `valkey` or `redis`.
    #[serde(default = "valkey")]
    pub engine_product: String,
    /// The server version from `INFO server` (`valkey_version`, or Redis's `redis_version`).
    #[serde(alias = "valkey_version")]
    pub engine_version: String,
    /// Not compared: where the build came from (the binary's `SOURCE` file or the image's
    /// `org.echomq.source` label); empty when unknown.
    #[serde(default)]
    pub engine_source: String,
    #[schemars(with = "String")]
    pub connector_name: ConnectorName,
    pub connector_version: String,
    pub connector_language: String,
    pub seed: u64,
    pub histories: u32,
    pub batch: i64,
    /// Volatile: when the run started (RFC 3339, UTC).
    pub started: String,
}

/// The name a connector announced in `hello`, or none: a connector that could not say hello is
/// judged (and fails) like any other, and its record names it `<no hello: why>`. That text is
/// only the record's spelling; in memory the missing hello is [`ConnectorName::name`]'s `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct ConnectorName {
    shown: String,
    announced: bool,
}

/// How a record spells a missing hello: `<no hello: why>`.
const NO_HELLO: (&str, &str) = ("<no hello: ", ">");

impl ConnectorName {
    /// What `hello` answered: its name, or why there was none.
    pub fn from_hello<E: std::fmt::Display>(hello: Result<String, E>) -> Self {
        match hello {
            Ok(name) => Self {
                shown: name,
                announced: true,
            },
            Err(e) => Self {
                shown: format!("{}{e}{}", NO_HELLO.0, NO_HELLO.1),
                announced: false,
            },
        }
    }

    /// The announced name; `None` when the connector said no hello.
    pub fn name(&self) -> Option<&str> {
        self.announced.then_some(self.shown.as_str())
    }

    /// As the record shows it (the name, or `<no hello: why>`).
    pub fn as_str(&self) -> &str {
        &self.shown
    }
}

/// A record read back: its text is all there is, so a `<no hello: …>` name is a missing hello.
impl From<String> for ConnectorName {
    fn from(shown: String) -> Self {
        let announced = !(shown.starts_with(NO_HELLO.0) && shown.ends_with(NO_HELLO.1));
        Self { shown, announced }
    }
}

impl From<&str> for ConnectorName {
    fn from(name: &str) -> Self {
        Self::from(name.to_string())
    }
}

impl From<ConnectorName> for String {
    fn from(n: ConnectorName) -> Self {
        n.shown
    }
}

impl std::ops::Deref for ConnectorName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.shown
    }
}

impl std::fmt::Display for ConnectorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

fn valkey() -> String {
    "valkey".into()
}

impl Header {
    /// The contract the record was judged under; one without a version is taken as contract 1.
    pub fn contract(&self) -> u32 {
        self.contract_version
            .unwrap_or(crate::gates::contract::UNVERSIONED)
    }

    /// `valkey 9.1.2`, `redis 7.0.15`.
    pub fn engine_label(&self) -> String {
        format!("{} {}", self.engine_product, self.engine_version)
    }

    /// The record's row among matrix cells: the matrix's label for the connector's language when
    /// it has one (`rust` → `reference`), so records and matrix cells share rows.
    pub fn row_label(&self) -> String {
        match self.connector_language.as_str() {
            "rust" if self.connector_name.contains("reference") => "reference".into(),
            "" => self.connector_name.to_string(),
            lang => lang.to_string(),
        }
    }

    /// The engine as a matrix column names it: `valkey-9.1`, `valkey-9.1-tls` over TLS, and
    /// `-cluster` after either for a record judged on a cluster of that engine.
    pub fn engine_column(&self) -> String {
        let mut name = self.engine_name();
        if self.engine_tls {
            name.push_str(crate::engine::named::TLS_SUFFIX);
        }
        if self.engine_kind == "cluster" {
            name.push_str(crate::engine::named::CLUSTER_SUFFIX);
        }
        if self.engine_kind == "sentinel" {
            name.push_str(crate::engine::named::SENTINEL_SUFFIX);
        }
        name
    }

    /// The engine's name: `valkey-9.1`, `redis-7.0`.
    pub fn engine_name(&self) -> String {
        crate::engine::named::name_of(&self.engine_product, &self.engine_version)
    }
}
