//! How a reply's `ok` value is read: once, by serde, into the wire type its verb declares (the
//! verbs' `replies!`), so the rule a value breaks and the path of the field that breaks it come
//! from one place: `field "[2].id": invalid value: string "j1", expected a job id ...`.
//!
//! Most wire types are the reply's own Rust value (`Identity`, `bool`, ...).
//! The few whose wire rule is narrower than their Rust value have a type here: [`JobId`] (SPEC
//! R4.5's exact 17 characters), [`Count`] (never negative) and [`Empty`] (`{}`, or `null`). Each
//! also describes itself to `schemars` exactly as `bundle/wire-v1.schema.json` says, so the
//! committed schema and the decode cannot drift apart silently (the schema's drift test).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{DeserializeOwned, Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Any serde decode of a JSON value, naming the path of the field that fails.
pub fn de<T: DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let rule = e.into_inner();
        if path == "." {
            rule.to_string()
        } else {
            format!("field \"{path}\": {rule}")
        }
    })
}

/// What [`JobId`] expects, in serde's "expected ..." words.
const JOB_ID_RULE: &str = "a job id: j and 16 digits, 17 characters (SPEC R4.5)";

/// A job id as `enqueue` replies it (SPEC R4.5): `j` and 16 ASCII digits. The schema says it as
/// a pattern without `$` (which lets a trailing newline through in several regex dialects:
/// Python's `re.search`, Ruby, PCRE) plus the exact length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct JobId(pub String);

impl JobId {
    fn holds(s: &str) -> bool {
        s.len() == 17 && s.starts_with('j') && s[1..].bytes().all(|b| b.is_ascii_digit())
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if Self::holds(&s) {
            Ok(Self(s))
        } else {
            Err(D::Error::invalid_value(Unexpected::Str(&s), &JOB_ID_RULE))
        }
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> Self {
        id.0
    }
}

impl JsonSchema for JobId {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "JobId".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The new job's id.",
            "type": "string",
            "pattern": "^j[0-9]{16}",
            "minLength": 17,
            "maxLength": 17
        })
    }
}

/// A job id field of a reply (`browse`'s and `claim`'s `id`), held to [`JobId`]'s rule; its
/// schema is the field's own `#[schemars]` (schemars ignores `deserialize_with`).
pub fn job_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    JobId::deserialize(d).map(String::from)
}

/// A count (`pending_size`, `promote`, `reap`, `batch`): an integer, never negative. The
/// reply holds it as `i64`, as the scripts compare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Count(pub i64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        if n < 0 {
            return Err(D::Error::invalid_value(
                Unexpected::Signed(n),
                &"a count, an integer >= 0",
            ));
        }
        Ok(Self(n))
    }
}

impl From<Count> for i64 {
    fn from(n: Count) -> Self {
        n.0
    }
}

/// Described as `u64`, as the committed schema always has.
impl JsonSchema for Count {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        u64::schema_name()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        u64::json_schema(g)
    }
}

/// The `ok` of a verb that answers nothing (`connect`, `disconnect`): `{}`, and `null` is
/// tolerated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Empty {}

impl<'de> Deserialize<'de> for Empty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, expecting = "an empty object (or null)")]
        struct NoFields {}
        Option::<NoFields>::deserialize(d).map(|_| Self {})
    }
}

impl JsonSchema for Empty {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Empty".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An empty object (null is tolerated).",
            "type": ["object", "null"],
            "additionalProperties": false
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_job_id_is_exactly_j_and_16_digits() {
        assert_eq!(
            de::<JobId>(json!("j0000000000000001")).unwrap().0,
            "j0000000000000001"
        );
        for bad in [
            "j1",
            "j0000000000000001\n",
            "x0000000000000001",
            "j000000000000000a",
        ] {
            let e = de::<JobId>(json!(bad)).unwrap_err();
            assert!(e.starts_with("invalid value: string"), "{e}");
        }
        // Sixteen digits in other scripts are not ASCII digits.
        assert!(de::<JobId>(json!("j١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦")).is_err());
    }

    #[test]
    fn counts_and_empties() {
        assert_eq!(de::<Count>(json!(3)).unwrap(), Count(3));
        assert_eq!(
            de::<Count>(json!(-1)).unwrap_err(),
            "invalid value: integer `-1`, expected a count, an integer >= 0"
        );
        assert!(de::<Count>(json!(1.5)).is_err());
        assert!(de::<Empty>(json!({})).is_ok());
        assert!(de::<Empty>(Value::Null).is_ok());
        assert!(de::<Empty>(json!({"x": 1})).is_err());
        assert!(de::<Empty>(json!(5)).is_err());
    }
}
