//! The eight gates SPEC names (`G1`..`G8`), as a type: what the gates, the doubles table and the
//! rule catalogue say a gate is, instead of its id as text.

use std::fmt;

/// One gate of SPEC, `G1`..`G8`. It serialises as its id (`"G3"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GateId {
    G1,
    G2,
    G3,
    G4,
    G5,
    G6,
    G7,
    G8,
}

impl GateId {
    /// Every gate, in the order the record lists them.
    pub const ALL: [GateId; 8] = [
        Self::G1,
        Self::G2,
        Self::G3,
        Self::G4,
        Self::G5,
        Self::G6,
        Self::G7,
        Self::G8,
    ];

    /// Its number, 1..=8.
    pub fn number(self) -> u32 {
        self as u32 + 1
    }

    /// `G1`..`G8`.
    pub fn as_str(self) -> &'static str {
        ["G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8"][self as usize]
    }

    /// The database the gate owns on a single engine (`900 + n`), so gates never see each
    /// other's keys.
    pub fn db(self) -> u32 {
        900 + self.number()
    }

    /// The second database the gate owns on a single engine (`950 + n`): where a part of the
    /// gate that only waits runs beside its other parts, unseen by them (`gates/beside.rs`).
    pub fn side_db(self) -> u32 {
        950 + self.number()
    }

    /// The gate whose side database `db` is, if any: what the engine logs for a part beside a
    /// gate (its `ACL LOG` entries name the database) goes back to that gate.
    pub fn of_side_db(db: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.side_db() == db)
    }
}

impl fmt::Display for GateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no gate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown gate {0:?}")]
pub struct UnknownGate(pub String);

/// `G3` (any case, surrounding blanks ignored).
impl std::str::FromStr for GateId {
    type Err = UnknownGate;
    fn from_str(s: &str) -> Result<Self, UnknownGate> {
        Self::ALL
            .into_iter()
            .find(|g| g.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownGate(s.to_string()))
    }
}

impl TryFrom<&str> for GateId {
    type Error = UnknownGate;
    fn try_from(s: &str) -> Result<Self, UnknownGate> {
        s.parse()
    }
}

impl PartialEq<&str> for GateId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for GateId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for GateId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A string in the record's schema, as before the id was typed.
impl schemars::JsonSchema for GateId {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        String::schema_name()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::GateId;

    #[test]
    fn ids_round_trip_and_own_their_databases() {
        for g in GateId::ALL {
            assert_eq!(g.as_str().parse::<GateId>(), Ok(g));
            assert_eq!(g.db(), 900 + g.number());
            assert!(GateId::ALL.iter().all(|o| o.db() != g.side_db()));
            assert_eq!(GateId::of_side_db(g.side_db()), Some(g));
            assert_eq!(GateId::of_side_db(g.db()), None);
        }
        assert_eq!("g3".parse::<GateId>(), Ok(GateId::G3));
        assert_eq!(GateId::G8.db(), 908);
        assert!("G9".parse::<GateId>().is_err());
        assert_eq!(serde_json::to_string(&GateId::G5).unwrap(), "\"G5\"");
    }
}
