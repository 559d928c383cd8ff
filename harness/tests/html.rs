//! The matrix page in a real browser: `reports/index.html` is what `reports/matrix.json` renders
//! to, and headless Chromium opens it, screenshots it at laptop size and finds every cell's
//! verdict in its DOM. Without Chromium the test is skipped with a line outside CI and fails in
//! CI (`CI` set): install Debian's `chromium`.

use std::path::{Path, PathBuf};
use std::process::Command;

use emq::report::matrix::{Matrix, cell_key};

fn reports() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports")
}

fn chromium() -> Option<PathBuf> {
    let found = emq::settings::var_os(emq::settings::CHROMIUM)
        .map(PathBuf::from)
        .into_iter()
        .chain(
            ["chromium", "chromium-browser"]
                .into_iter()
                .flat_map(emq::settings::on_path),
        )
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            !emq::settings::in_ci(),
            "CI is set but no chromium is installed: apt-get install -y chromium"
        );
        println!("skipped: no chromium on PATH (apt-get install -y chromium, or set EMQ_CHROMIUM)");
    }
    found
}

/// Headless Chromium with the flags a root, GPU-less, sandbox-less machine needs.
fn headless(chromium: &Path, args: &[String]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_page_is_what_the_matrix_renders() {
    let m = Matrix::load(&reports().join("matrix.json")).expect("reports/matrix.json");
    let want = emq::report::html::page(&m);
    let have = std::fs::read_to_string(reports().join("index.html")).unwrap_or_default();
    assert!(
        have == want,
        "reports/index.html differs from what reports/matrix.json renders: run `emq-gate matrix \
         --refresh` (or regenerate and commit both)"
    );
    let md = std::fs::read_to_string(reports().join("matrix.md")).unwrap_or_default();
    assert_eq!(
        md,
        m.markdown(),
        "reports/matrix.md drifted from matrix.json"
    );
}

#[test]
fn chromium_shows_every_cell_and_its_verdict() {
    let Some(chromium) = chromium() else { return };
    let page = reports().join("index.html").canonicalize().unwrap();
    let url = format!("file://{}", page.display());
    let m = Matrix::load(&reports().join("matrix.json")).unwrap();
    let grid = m.grid();
    assert!(!grid.cells.is_empty());
    // The cluster is a column like the others (its cells are checked below with the rest).
    assert!(
        grid.cells.iter().any(|c| c.col.ends_with("-cluster")),
        "the matrix has a cluster column"
    );

    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("emq-index.png");
    let _ = std::fs::remove_file(&png);
    headless(
        &chromium,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1366,900".into(),
            url.clone(),
        ],
    );
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "{}: {size} bytes, too small to show the grid",
        png.display()
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    println!("screenshot: {} ({size} bytes)", png.display());

    let dom = headless(&chromium, &["--dump-dom".into(), url]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("EchoMQ engine matrix"), "the page rendered");
    for c in &grid.cells {
        let key = cell_key(&c.row, &c.col);
        let at = dom
            .find(&format!("data-cell=\"{key}\""))
            .unwrap_or_else(|| panic!("cell {key} is not in the DOM"));
        let end = dom[at..].find("</td>").map_or(dom.len(), |e| at + e);
        let cell = &dom[at..end];
        assert!(
            cell.contains(&format!(">{}<", c.summary)),
            "cell {key} does not show {}: {cell}",
            c.summary
        );
        assert!(
            dom.contains(&format!("id=\"rec-{}\"", key.replace(['×', '.'], "-"))),
            "the record of {key} is in the DOM"
        );
    }
    assert!(dom.contains("<svg"), "the chart is in the DOM");
}

/// The committed badges are what `reports/matrix.json` draws, one per cell and one per record
/// (`emq-gate matrix` and `matrix --render` write them). Until they are first committed the test
/// is skipped with a line outside CI and fails in CI.
#[test]
fn the_badges_are_what_the_matrix_draws() {
    let m = Matrix::load(&reports().join("matrix.json")).expect("reports/matrix.json");
    if !reports().join(emq::report::badge::DIR).is_dir() {
        assert!(
            !emq::settings::in_ci(),
            "CI is set but reports/badges/ is not committed: run `emq-gate matrix --render`"
        );
        println!("skipped: reports/badges/ is not committed yet (emq-gate matrix --render)");
        return;
    }
    let drift = emq::report::badge::differences(&reports(), &m);
    assert!(
        drift.is_empty(),
        "{drift:#?}: run `emq-gate matrix --render` and commit reports/badges/"
    );
}
