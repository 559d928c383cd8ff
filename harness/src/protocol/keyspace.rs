//! A snapshot of an EchoMQ database (read by the harness's admin, never through the connector),
//! and the invariants of SPEC §1 checked over it. Pure: [`Keyspace::from_keys`] takes what the
//! engine layer read.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::protocol::grammar::{ParsedKey, Set, parse_key};

/// One key's contents, as the engine returned them.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyData {
    Hash(BTreeMap<String, String>),
    ZSet(Vec<(String, i64)>),
    String(Option<String>),
    /// Another type (named): never EchoMQ's.
    Other(String),
}

fn type_name(d: &KeyData) -> &str {
    match d {
        KeyData::Hash(_) => "hash",
        KeyData::ZSet(_) => "zset",
        KeyData::String(_) => "string",
        KeyData::Other(t) => t,
    }
}

/// One queue's keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueState {
    pub pending: Vec<(String, i64)>,
    pub active: Vec<(String, i64)>,
    pub delayed: Vec<(String, i64)>,
    pub dead: Vec<(String, i64)>,
    pub jobs: BTreeMap<String, BTreeMap<String, String>>,
    pub seq: Option<i64>,
}

impl QueueState {
    /// The members of `set` with their scores.
    pub fn set(&self, set: Set) -> &Vec<(String, i64)> {
        match set {
            Set::Pending => &self.pending,
            Set::Active => &self.active,
            Set::Delayed => &self.delayed,
            Set::Dead => &self.dead,
        }
    }

    fn set_mut(&mut self, set: Set) -> &mut Vec<(String, i64)> {
        match set {
            Set::Pending => &mut self.pending,
            Set::Active => &mut self.active,
            Set::Delayed => &mut self.delayed,
            Set::Dead => &mut self.dead,
        }
    }
}

/// Every EchoMQ key of one database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Keyspace {
    pub queues: BTreeMap<String, QueueState>,
    pub fence: Option<BTreeMap<String, String>>,
    /// Keys that do not parse by the grammar (or have the wrong type).
    pub foreign: Vec<String>,
}

impl Keyspace {
    /// Sorts what the engine holds into queues, the fence and foreign keys.
    pub fn from_keys(keys: impl IntoIterator<Item = (String, KeyData)>) -> Self {
        let mut ks = Self::default();
        for (k, d) in keys {
            match (parse_key(&k), d) {
                (Some(ParsedKey::Fence), KeyData::Hash(h)) => ks.fence = Some(h),
                (Some(ParsedKey::Set { queue, set }), KeyData::ZSet(members)) => {
                    *ks.queues.entry(queue).or_default().set_mut(set) = members;
                }
                (Some(ParsedKey::Seq { queue }), KeyData::String(v)) => {
                    ks.queues.entry(queue).or_default().seq = v.and_then(|s| s.parse().ok());
                }
                (Some(ParsedKey::Job { queue, id }), KeyData::Hash(h)) => {
                    ks.queues.entry(queue).or_default().jobs.insert(id, h);
                }
                (_, d) => ks.foreign.push(format!("{k} ({})", type_name(&d))),
            }
        }
        ks
    }

    /// Every breach of §3's invariants; empty when the database is clean.
    pub fn violations(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .foreign
            .iter()
            .map(|k| format!("key outside the grammar: {k}"))
            .collect();
        if let Some(f) = &self.fence {
            let mut fields: Vec<&str> = f.keys().map(String::as_str).collect();
            fields.sort_unstable();
            if fields != ["bundle", "digest", "protocol"] {
                out.push(format!("emq:fence has fields {fields:?}"));
            }
        }
        for (q, st) in &self.queues {
            let mut home: BTreeMap<&str, Vec<Set>> = BTreeMap::new();
            for set in Set::ALL {
                for (id, score) in st.set(set) {
                    home.entry(id).or_default().push(set);
                    if set == Set::Pending && *score != 0 {
                        out.push(format!("queue {q}: pending {id} has score {score}, not 0"));
                    }
                }
            }
            for (id, sets) in &home {
                if sets.len() > 1 {
                    out.push(format!(
                        "queue {q}: {id} is in {} sets: {sets:?}",
                        sets.len()
                    ));
                }
                if !st.jobs.contains_key(*id) {
                    out.push(format!("queue {q}: {id} is in {} but has no hash", sets[0]));
                }
            }
            for (id, h) in &st.jobs {
                let mut fields: Vec<&str> = h.keys().map(String::as_str).collect();
                fields.sort_unstable();
                if fields != ["attempts", "payload", "state"] {
                    out.push(format!("queue {q}: hash {id} has fields {fields:?}"));
                }
                match home.get(id.as_str()) {
                    None => out.push(format!("queue {q}: orphan hash {id} (in no set)")),
                    Some(sets) if h.get("state").map(String::as_str) != Some(sets[0].name()) => out
                        .push(format!(
                            "queue {q}: {id} has state {:?} but is in {}",
                            h.get("state"),
                            sets[0]
                        )),
                    Some(_) => {}
                }
                if h.get("attempts")
                    .and_then(|a| a.parse::<i64>().ok())
                    .is_none_or(|a| a < 0)
                {
                    out.push(format!(
                        "queue {q}: {id} attempts {:?} is not a count",
                        h.get("attempts")
                    ));
                }
                if let (Some(seq), Some(n)) =
                    (st.seq, id.get(1..).and_then(|d| d.parse::<i64>().ok()))
                    && n > seq
                {
                    out.push(format!("queue {q}: {id} is beyond the counter {seq}"));
                }
            }
        }
        out
    }
}
