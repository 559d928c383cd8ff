//! `emq-gate bench --io-threads`: which of Valkey's I/O-thread settings a figure was measured
//! with, as pure functions over the engine's replies and the bench's rows. The bench changes the
//! setting with `CONFIG SET io-threads` on the one engine it booted (Valkey 9 allows that at
//! runtime; 8.1 and Redis 7 refuse it as immutable), so every setting is measured on the same
//! process, port, script cache and TLS proxy, one after the other in the same run.
//!
//! A bare `--io-threads` measures `1,2`: off (the main thread alone), then on (the main thread
//! and one I/O thread). Two because the machine this bench is read on has two cores: a second
//! I/O thread would only take turns with the first on the one core the main thread leaves, and
//! that core also runs the client being measured.

use super::DepthRow;

/// Valkey's own upper bound for `io-threads` (`IO_THREADS_MAX_NUM`).
pub const MAX_IO_THREADS: i64 = 128;

/// `io-threads` as `CONFIG GET io-threads` answers it, on every node: the value when all agree
/// (`[name, value]` pairs), None when a node does not say or the nodes disagree.
pub fn io_threads_of(replies: &[Vec<String>]) -> Option<u32> {
    let mut seen = None;
    for r in replies {
        let v: u32 = match r.as_slice() {
            [name, value] if name == "io-threads" => value.parse().ok()?,
            _ => return None,
        };
        if seen.is_some_and(|s| s != v) {
            return None;
        }
        seen = Some(v);
    }
    seen
}

/// The settings in the order first asked, each once: `1,2,1` measures `1` then `2`.
pub fn settings(asked: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for &n in asked {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// How a setting is named in the tables: `n/a` when the engine did not say.
pub fn setting_label(n: Option<u32>) -> String {
    n.map_or("n/a".into(), |n| n.to_string())
}

/// The io-threads settings the rows were measured with, in their order, each once.
pub fn row_settings(rows: &[DepthRow]) -> Vec<Option<u32>> {
    let mut out = Vec::new();
    for r in rows {
        if !out.contains(&r.io_threads) {
            out.push(r.io_threads);
        }
    }
    out
}

/// One depth across the settings, side by side: each setting's row, None where a setting has
/// no row at that depth.
pub struct SideBySide<'a> {
    pub depth: i64,
    pub rows: Vec<Option<&'a DepthRow>>,
}

/// Rows regrouped by depth (in the order first measured), one column a setting of `settings`.
pub fn side_by_side<'a>(rows: &'a [DepthRow], settings: &[Option<u32>]) -> Vec<SideBySide<'a>> {
    let mut depths: Vec<i64> = Vec::new();
    for r in rows {
        if !depths.contains(&r.depth) {
            depths.push(r.depth);
        }
    }
    depths
        .into_iter()
        .map(|depth| SideBySide {
            depth,
            rows: settings
                .iter()
                .map(|s| rows.iter().find(|r| r.depth == depth && r.io_threads == *s))
                .collect(),
        })
        .collect()
}

/// `a / b / …` of one figure across the settings, `n/a` where a setting has none.
pub fn across(rows: &[Option<&DepthRow>], f: impl Fn(&DepthRow) -> Option<String>) -> String {
    rows.iter()
        .map(|r| r.and_then(&f).unwrap_or_else(|| "n/a".into()))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// A row with only the connector's side, for the formatting tests.
#[cfg(test)]
pub(crate) fn row(depth: i64, io: Option<u32>, ours: f64) -> DepthRow {
    DepthRow {
        io_threads: io,
        depth,
        n: 100,
        connector_ops_per_s: ours,
        connector_median: ours,
        connector_runs: vec![ours],
        engine_ops_per_s: None,
        engine_median: None,
        engine_runs: Vec::new(),
        ratio: None,
        connector_load: None,
        engine_load: None,
        connector_run_loads: vec![None],
        engine_run_loads: Vec::new(),
        engine_figures: None,
        latency: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str, value: &str) -> Vec<String> {
        vec![name.into(), value.into()]
    }

    #[test]
    fn io_threads_is_what_every_node_says() {
        assert_eq!(io_threads_of(&[pair("io-threads", "2")]), Some(2));
        assert_eq!(
            io_threads_of(&[pair("io-threads", "2"), pair("io-threads", "2")]),
            Some(2)
        );
        // A cluster whose nodes disagree has no one setting.
        assert_eq!(
            io_threads_of(&[pair("io-threads", "1"), pair("io-threads", "2")]),
            None
        );
        assert_eq!(io_threads_of(&[Vec::new()]), None);
        assert_eq!(io_threads_of(&[pair("io-threads", "x")]), None);
        assert_eq!(io_threads_of(&[]), None);
    }

    #[test]
    fn settings_keep_the_first_order_once() {
        assert_eq!(settings(&[1, 2, 1]), [1, 2]);
        assert_eq!(settings(&[4, 1]), [4, 1]);
        assert!(settings(&[]).is_empty());
    }

    #[test]
    fn rows_regroup_by_depth_one_column_a_setting() {
        let rows = [
            row(1, Some(1), 10.0),
            row(16, Some(1), 20.0),
            row(1, Some(2), 11.0),
            row(16, Some(2), 25.0),
        ];
        let s = row_settings(&rows);
        assert_eq!(s, [Some(1), Some(2)]);
        let g = side_by_side(&rows, &s);
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].depth, 16);
        let ops = |r: &DepthRow| Some(format!("{:.0}", r.connector_ops_per_s));
        assert_eq!(across(&g[1].rows, ops), "20 / 25");
        // A setting without a row at a depth reads n/a.
        let g = side_by_side(&rows[..3], &s);
        assert_eq!(across(&g[1].rows, ops), "20 / n/a");
        assert_eq!(setting_label(None), "n/a");
    }
}
