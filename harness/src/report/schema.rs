//! The record's JSON Schema, generated from the record types, published as
//! `reports/record.schema.json` (a test fails when the committed file drifts).

use crate::report::Record;

/// The committed schema's path, relative to the repository.
pub const PATH: &str = "reports/record.schema.json";

/// The JSON Schema of a gate record, pretty-printed with a final newline.
pub fn record_schema() -> String {
    let mut schema = schemars::schema_for!(Record);
    schema.insert(
        "$id".into(),
        serde_json::Value::String(format!(
            "https://echomq.invalid/{}.schema.json",
            crate::report::SCHEMA
        )),
    );
    schema.insert(
        "description".into(),
        serde_json::Value::String(format!(
            "An EchoMQ gate record, schema {} (see reports/README.md)",
            crate::report::SCHEMA
        )),
    );
    serde_json::to_string_pretty(&schema).expect("schemas serialize") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed schema is the generated one; `EMQ_BLESS=1` rewrites it.
    #[test]
    fn the_committed_schema_has_not_drifted() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(PATH);
        let want = record_schema();
        if crate::settings::bless() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{PATH} differs from the record types: run `EMQ_BLESS=1 cargo test -p emq-harness --lib \
             report::schema` or `emq-gate record`/`emq-gate matrix`, and commit it"
        );
    }

    #[test]
    fn the_committed_records_validate_structurally() {
        // Every committed record deserializes through the same types the schema comes from.
        for name in ["reference", "python"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../reports")
                .join(format!("{name}.json"));
            Record::load(&path).unwrap();
        }
    }
}
