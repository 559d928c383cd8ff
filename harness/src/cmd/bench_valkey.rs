//! `valkey-benchmark` beside the bench: where it is, the argv that sends exactly the reference
//! connector's enqueue (over TLS as the connector speaks it), and its requests per second.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::engine::version::BUILD_DIR;
use crate::engine::{Engine, EngineKind};
use crate::protocol::grammar::{job_root, key};

/// The queue the bench enqueues into: keys `emq:{bench}:pending`, `:delayed`, `:seq`, `:job:`.
pub const QUEUE: &str = "bench";
/// The payload of every benchmark enqueue (the same bytes on both sides).
pub const PAYLOAD: &str = "payload";

/// Where `valkey-benchmark` is: `EMQ_VALKEY_BENCHMARK`, `ci/provision`'s cache, beside the
/// binary engine's `valkey-server`, then `PATH`.
pub fn locate_benchmark(engine: Option<&Engine>) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    // Over TLS only the TLS engine's own build speaks it: the one beside its server, first.
    if let Some(e) = engine.filter(|e| e.tls().is_some())
        && let Some(dir) = Path::new(&e.source).parent()
    {
        candidates.push(dir.join("valkey-benchmark"));
    }
    if let Some(p) = crate::settings::var_os(crate::settings::VALKEY_BENCHMARK) {
        candidates.push(PathBuf::from(p));
    }
    if let Some(c) = crate::settings::cache_dir() {
        candidates.push(c.join(BUILD_DIR).join("bin/valkey-benchmark"));
    }
    if let Some(e) = engine.filter(|e| e.kind == EngineKind::Binary)
        && let Some(dir) = Path::new(&e.source).parent()
    {
        candidates.push(dir.join("valkey-benchmark"));
    }
    candidates.extend(crate::settings::on_path("valkey-benchmark"));
    candidates.into_iter().find(|p| p.is_file())
}

/// The `valkey-benchmark` argv for `n` enqueues of `sha` at `depth` on one connection: the exact
/// command, keys and arguments the reference connector's `batch` sends.
pub fn benchmark_args(
    url: &crate::engine::Target,
    sha: &str,
    n: i64,
    depth: i64,
) -> Option<Vec<String>> {
    let t = url.engine_url().ok()?;
    let mut a: Vec<String> = vec![
        "-h".into(),
        t.host.clone(),
        "-p".into(),
        t.port?.to_string(),
    ];
    if t.scheme == crate::protocol::url::Scheme::Rediss {
        // TLS as the connector speaks it: the run's CA, the name its certificate gives.
        a.extend(["--tls".into(), "--sni".into(), t.host.clone()]);
        if let Some(ca) = &url.ca_file {
            a.extend(["--cacert".into(), ca.clone()]);
        }
    }
    if let Some(u) = t.user {
        a.extend(["--user".into(), u]);
    }
    if let Some(p) = t.password {
        a.extend(["-a".into(), p]);
    }
    let db = t.db.unwrap_or(0).to_string();
    a.extend(
        [
            "-n",
            &n.to_string(),
            "-P",
            &depth.to_string(),
            "-c",
            "1",
            "--dbnum",
            &db,
            "--csv",
            "EVALSHA",
            sha,
            "3",
            &key(QUEUE, "pending"),
            &key(QUEUE, "delayed"),
            &key(QUEUE, "seq"),
            &job_root(QUEUE),
            PAYLOAD,
            "0",
        ]
        .map(String::from),
    );
    Some(a)
}

/// What one `valkey-benchmark` run reports.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BenchFigures {
    /// Requests per second (its `rps` column).
    pub rps: f64,
    /// Per-request latency, ms: from the write of the request's pipeline to its own reply, so
    /// not the same clock as the bench's round latency (that one is the whole round).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// Runs `valkey-benchmark`; returns its figures.
pub fn run_benchmark(bin: &Path, args: &[String]) -> Result<BenchFigures, String> {
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "valkey-benchmark exited {}: {}{}",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse_csv(&stdout).ok_or_else(|| format!("valkey-benchmark printed no rps: {}", stdout.trim()))
}

/// `--csv` output: a header line naming the columns, then `"<test>","<rps>",...` per test; the
/// first test's row, its columns found by the header's names.
pub fn parse_csv(stdout: &str) -> Option<BenchFigures> {
    let cells = |l: &str| -> Vec<String> {
        l.split("\",\"")
            .map(|c| c.trim().trim_matches('"').to_string())
            .collect()
    };
    let mut lines = stdout.lines().filter(|l| l.starts_with('"'));
    let header = cells(lines.next()?);
    let row = cells(lines.next()?);
    let col = |name: &str| -> Option<f64> {
        let i = header.iter().position(|h| h == name)?;
        row.get(i)?.parse().ok()
    };
    Some(BenchFigures {
        rps: col("rps")?,
        p50_ms: col("p50_latency_ms"),
        p99_ms: col("p99_latency_ms"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_args_mirror_the_connector_call() {
        let a = benchmark_args(&"redis://:pw@127.0.0.1:7001/950".into(), "abc", 1000, 16).unwrap();
        let s = a.join(" ");
        assert_eq!(
            s,
            "-h 127.0.0.1 -p 7001 -a pw -n 1000 -P 16 -c 1 --dbnum 950 --csv EVALSHA abc 3 \
             emq:{bench}:pending emq:{bench}:delayed emq:{bench}:seq emq:{bench}:job: payload 0"
        );
        let b = benchmark_args(&"redis://127.0.0.1:7001/0".into(), "abc", 1, 1).unwrap();
        assert!(!b.contains(&"-a".to_string()));
        let tls = crate::engine::Target {
            ca_file: Some("/run/ca.pem".into()),
            .."rediss://:pw@localhost:7002/950".into()
        };
        let t = benchmark_args(&tls, "abc", 1, 1).unwrap().join(" ");
        assert!(
            t.starts_with("-h localhost -p 7002 --tls --sni localhost --cacert /run/ca.pem -a pw"),
            "{t}"
        );
    }

    #[test]
    fn csv_gives_rps_and_latency_by_column_name() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"EVALSHA abc\",\"263157.91\",\"0.056\",\"0.024\",\"0.039\",\"0.135\",\"0.295\",\"2.455\"\n";
        let f = parse_csv(out).unwrap();
        assert_eq!(f.rps, 263157.91);
        assert_eq!((f.p50_ms, f.p99_ms), (Some(0.039), Some(0.295)));
        let old = parse_csv("\"test\",\"rps\"\n\"EVALSHA\",\"100.5\"\n").unwrap();
        assert_eq!((old.rps, old.p99_ms), (100.5, None));
        assert_eq!(parse_csv("ERROR\n"), None);
    }
}
