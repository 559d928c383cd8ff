//! Engine-free tests of the child connector's pure parts.
use super::words::{QUOTE_CHARS, secs};
use super::*;

#[test]
fn durations_read_plainly() {
    assert_eq!(secs(Duration::from_secs(10)), "10 s");
    assert_eq!(secs(Duration::from_millis(1500)), "1.5 s");
    assert_eq!(secs(Duration::from_millis(250)), "0.25 s");
}

#[test]
fn quotes_are_bounded() {
    let long = "x".repeat(500);
    assert_eq!(quote(&long).chars().count(), QUOTE_CHARS + 3);
    assert_eq!(quote("short"), "short");
}

#[test]
fn big_requests_get_time_per_command() {
    let spec = ChildSpec::new(["x"]).with_timeout(Duration::from_secs(1));
    let batch = |n| Request::Batch {
        session: "s".into(),
        queue: "q".into(),
        n,
        depth: 1,
        payload: "p".into(),
        queues: None,
    };
    let probe = |n| Request::PipelineProbe {
        session: "s".into(),
        key: "k".into(),
        n,
    };
    let ms = Duration::from_millis;
    assert_eq!(spec.timeout_for(&batch(3)), ms(1000) + PER_COMMAND * 3);
    assert_eq!(spec.timeout_for(&batch(100_000)), ms(26_000));
    assert_eq!(spec.timeout_for(&probe(10_000)), ms(3_500));
    assert_eq!(spec.timeout_for(&batch(-5)), ms(1000));
    assert_eq!(
        ChildSpec::new(["x"]).timeout_for(&batch(100_000)),
        Duration::from_secs(35)
    );
    // The largest a connector must run, and beyond: that it must refuse at once.
    assert_eq!(spec.timeout_for(&batch(10_000_000)), ms(2_501_000));
    assert_eq!(spec.timeout_for(&batch(10_000_001)), ms(1000));
    assert_eq!(spec.timeout_for(&probe(1_000_000)), ms(251_000));
    assert_eq!(spec.timeout_for(&probe(1_000_001)), ms(1000));
    assert_eq!(spec.timeout_for(&probe(i64::MAX)), ms(1000));
    assert_eq!(spec.timeout_for(&Request::Hello { protocol: 1 }), ms(1000));
}
