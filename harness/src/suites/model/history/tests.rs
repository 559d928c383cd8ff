//! Histories' unit tests: waits read in both spellings, and short waits scaled.

use super::*;

#[test]
fn waits_read_old_and_new_spellings() {
    let v: Verb = serde_json::from_str(r#"{"claim":{"later":true}}"#).unwrap();
    assert_eq!(v, Verb::Claim { wait: Wait::Later });
    let v: Verb = serde_json::from_str(r#"{"claim":{"later":false}}"#).unwrap();
    assert_eq!(v, Verb::Claim { wait: Wait::Now });
    let v: Verb = serde_json::from_str(r#"{"claim":{"wait":"soon"}}"#).unwrap();
    assert_eq!(v, Verb::Claim { wait: Wait::Soon });
    let back = serde_json::to_string(&Verb::Claim { wait: Wait::Soon }).unwrap();
    assert_eq!(back, r#"{"claim":{"wait":"soon"}}"#);
    assert_eq!((Wait::Now.ms(), Wait::Soon.ms()), (0, SOON_MS));
}

#[test]
fn a_scaled_short_wait_grows_and_never_lands_on_whole_seconds() {
    let mut s = TimeScale::ONE;
    let mut seen = vec![s.soon_ms()];
    while s < TimeScale::MAX {
        s = s.after_void(0);
        seen.push(s.soon_ms());
    }
    assert_eq!(seen, [750, 1500, 3250, 6250, 12250]);
    assert!(seen.iter().all(|ms| ms % 1000 != 0));
    assert_eq!(Wait::Soon.ms_at(TimeScale::MAX), 12_250);
    assert_eq!(Wait::Later.ms_at(TimeScale::MAX), LATER_MS);
    // A void history that ran 2 s goes straight to a wait of at least 4 s.
    assert_eq!(TimeScale::ONE.after_void(2_000).soon_ms(), 6_250);
    assert_eq!(TimeScale::MAX.after_void(1_000_000), TimeScale::MAX);
}
