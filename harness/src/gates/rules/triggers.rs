//! [`TRIGGERS`]: the rules whose SPEC text names several triggers as a list ("closed, reset, cut
//! in the middle of a reply, timed out"), each with those words. A list in SPEC is a promise
//! that every item is judged, so `tests/rules.rs` holds both sides to it: each word is in the
//! rule's SPEC text (the list cannot drift from SPEC), and some way of the rule names it (a
//! double takes it, or a reason says why none needs to). Kept apart from the catalogue's
//! entries so a rule's triggers change without touching its entry.

use super::RuleId;

/// The triggers of every rule whose SPEC text lists them, in SPEC's words.
pub const TRIGGERS: &[(RuleId, &[&str])] = &[
    // R4.16: "when the connection fails ... (closed, reset, cut in the middle of a reply, timed out)".
    (
        RuleId::new(4, 16),
        &[
            "closed",
            "reset",
            "cut in the middle of a reply",
            "timed out",
        ],
    ),
    // R4.17: a client library's retry; "A batch is no exception"; a connection "reset or refused"
    // when its node was killed.
    (RuleId::new(4, 17), &["retry", "batch", "reset", "refused"]),
    // R5.1: "A line the harness did not ask for (a log line, a banner, a second reply)".
    (RuleId::new(5, 1), &["log line", "banner", "second reply"]),
    // R5.9: "sends no response and exits 0": both halves.
    (RuleId::new(5, 9), &["response", "exits"]),
    // R5.13: "closed when it ends, is replaced or gives one up".
    (RuleId::new(5, 13), &["ends", "is replaced", "gives one up"]),
];

/// The text SPEC gives rule `id`: from its `**R<n>.<m>**` to the next rule SPEC declares (or the
/// end of its section). `None` when SPEC does not declare it.
pub fn rule_text(spec: &str, id: RuleId) -> Option<&str> {
    let mark = format!("**{id}**");
    let start = spec.find(&mark)? + mark.len();
    let rest = &spec[start..];
    let end = [rest.find("**R"), rest.find("\n## ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// True when `text` holds `phrase` as whole words, any case ("ends" is not in "sends").
pub fn names(text: &str, phrase: &str) -> bool {
    let (text, phrase) = (text.to_lowercase(), phrase.to_lowercase());
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    text.match_indices(&phrase).any(|(i, _)| {
        !word(text[..i].chars().next_back()) && !word(text[i + phrase.len()..].chars().next())
    })
}

/// What is wrong with the declared triggers against `spec` and `catalogue`, one line each: a
/// rule not in the catalogue, a trigger its SPEC text does not hold, or one no way names.
pub fn gaps(spec: &str, catalogue: &[super::Rule]) -> Vec<String> {
    let mut out = Vec::new();
    for (id, words) in TRIGGERS {
        let Some(rule) = catalogue.iter().find(|r| r.id == *id) else {
            out.push(format!("{id}: triggers of a rule the catalogue lacks"));
            continue;
        };
        let text = rule_text(spec, *id).unwrap_or_default();
        for w in *words {
            if !names(text, w) {
                out.push(format!("{id}: trigger {w:?} is not in its SPEC text"));
            }
            if !rule.ways.iter().any(|way| names(way.what, w)) {
                out.push(format!("{id}: no way names the trigger {w:?}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_text_ends_at_the_next_rule_or_section() {
        let spec = "x **R1.1** a, b or c. **R1.2** d\n\n## 2. Next\n**R2.1** e";
        assert_eq!(rule_text(spec, RuleId::new(1, 1)), Some(" a, b or c. "));
        assert_eq!(rule_text(spec, RuleId::new(1, 2)), Some(" d\n"));
        assert_eq!(rule_text(spec, RuleId::new(3, 1)), None);
    }

    #[test]
    fn triggers_are_whole_words() {
        assert!(names("When it Ends, is replaced", "ends"));
        assert!(names("closed, reset", "reset"));
        assert!(!names("it sends one", "ends"));
        assert!(!names("a preset", "reset"));
    }
}
