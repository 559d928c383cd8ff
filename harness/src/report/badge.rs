//! README badges: a flat, shields-style SVG per connector record and per matrix cell, written to
//! `reports/badges/` by `record` and `matrix`. Drawn here by hand: a flat badge is two rectangles
//! and two texts, and a badge crate would be one more dependency (with its own font tables) for
//! forty lines. The text widths come from a fixed table of Verdana 11 px advances (the font
//! shields.io measures with), so the same verdict always draws the same bytes: the badges are
//! committed beside the records and must change only when a verdict or the contract does. Only
//! verdict words, counts and the contract version are drawn: never a time or a rate.

use std::path::Path;

use crate::error::HarnessError;
use crate::gates::Verdict;
use crate::report::Record;
use crate::report::matrix::{Matrix, MatrixCell, record_stem};

/// The badges' directory, under the reports directory.
pub const DIR: &str = "badges";

/// A badge's text width in tenths of a pixel, Verdana 11 px (close to shields' own table; the
/// exact figure only decides the padding).
fn width_tenths(s: &str) -> u32 {
    s.chars()
        .map(|c| match c {
            ' ' | '.' | ',' => 39,
            ':' | ';' | 'i' | 'l' | 'j' | 'I' => 38,
            '/' | '-' | 'f' | 't' | 'r' => 49,
            'm' => 107,
            'w' => 89,
            'M' | 'W' => 100,
            '0'..='9' => 70,
            'a'..='z' => 63,
            'A'..='Z' => 75,
            _ => 80,
        })
        .sum()
}

/// XML text and attribute escaping (the page's `esc` lives above this module, which it imports).
fn esc(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            c => c.to_string(),
        })
        .collect()
}

/// The badge's colour for a verdict: shields' brightgreen, red, and lightgrey (ERROR judged
/// nothing, NOT RUN was not asked to, so neither is green or red).
fn color(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "#4c1",
        Verdict::Fail => "#e05d44",
        Verdict::Error | Verdict::NotRun => "#9f9f9f",
    }
}

/// A flat badge: `label` on grey, `message` on `fill`; `title` is its tooltip and accessible name.
pub fn svg(label: &str, message: &str, fill: &str, title: &str) -> String {
    // Each text gets 5 px either side (shields' flat style).
    let lw = (width_tenths(label) + 5) / 10 + 10;
    let mw = (width_tenths(message) + 5) / 10 + 10;
    let w = lw + mw;
    // Text is drawn at 10× and scaled, as shields does, so positions stay integers.
    let (lx, mx) = (lw * 5, lw * 10 + mw * 5);
    let (lt, mt) = (width_tenths(label), width_tenths(message));
    let (label, message, title) = (esc(label), esc(message), esc(title));
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"20\" role=\"img\" \
         aria-label=\"{title}\"><title>{title}</title>\
         <linearGradient id=\"s\" x2=\"0\" y2=\"100%\"><stop offset=\"0\" stop-color=\"#bbb\" \
         stop-opacity=\".1\"/><stop offset=\"1\" stop-opacity=\".1\"/></linearGradient>\
         <clipPath id=\"r\"><rect width=\"{w}\" height=\"20\" rx=\"3\" fill=\"#fff\"/></clipPath>\
         <g clip-path=\"url(#r)\"><rect width=\"{lw}\" height=\"20\" fill=\"#555\"/>\
         <rect x=\"{lw}\" width=\"{mw}\" height=\"20\" fill=\"{fill}\"/>\
         <rect width=\"{w}\" height=\"20\" fill=\"url(#s)\"/></g>\
         <g fill=\"#fff\" text-anchor=\"middle\" font-family=\"Verdana,Geneva,DejaVu Sans,sans-serif\" \
         font-size=\"110\" transform=\"scale(.1)\">\
         <text x=\"{lx}\" y=\"150\" fill=\"#010101\" fill-opacity=\".3\" textLength=\"{lt}\">{label}</text>\
         <text x=\"{lx}\" y=\"140\" textLength=\"{lt}\">{label}</text>\
         <text x=\"{mx}\" y=\"150\" fill=\"#010101\" fill-opacity=\".3\" textLength=\"{mt}\">{message}</text>\
         <text x=\"{mx}\" y=\"140\" textLength=\"{mt}\">{message}</text></g></svg>\n"
    )
}

/// `EchoMQ contract 7`: what a badge certifies.
fn label(r: Option<&Record>) -> String {
    let version = r.map_or(crate::gates::contract::current(), |r| r.header.contract());
    format!("EchoMQ contract {version}")
}

/// A record's badge: `EchoMQ contract 7 | PASS 8/8`, coloured by the run's verdict.
pub fn for_record(r: &Record) -> String {
    let label = label(Some(r));
    let message = &r.footer.summary;
    let title = format!(
        "{label}: {message} ({} on {})",
        r.header.connector_name,
        r.header.engine_name()
    );
    // A partial run certifies only what it ran: never green.
    let shade = match r.verdict() {
        Verdict::Pass if !r.not_run().is_empty() => Verdict::NotRun,
        v => v,
    };
    svg(&label, message, color(shade), &title)
}

/// A matrix cell's badge: its record's, or `ERROR` when the cell has none (it judged nothing).
pub fn for_cell(c: &MatrixCell) -> String {
    match &c.record {
        Some(r) => for_record(r),
        None => {
            let label = label(None);
            let title = format!(
                "{label}: ERROR, no record ({} on {})",
                c.connector, c.engine
            );
            svg(&label, "ERROR", color(Verdict::Error), &title)
        }
    }
}

/// A cell's badge file stem: `<connector>-<engine>`, as `matrix --out` names its records.
pub fn cell_stem(c: &MatrixCell) -> String {
    format!("{}-{}", c.connector, c.engine)
}

/// Writes `<reports>/badges/<stem>.svg` unless it already holds these bytes. True when it wrote.
pub fn write_if_changed(reports: &Path, stem: &str, svg: &str) -> Result<bool, HarnessError> {
    let dir = reports.join(DIR);
    let path = dir.join(format!("{stem}.svg"));
    if std::fs::read_to_string(&path).is_ok_and(|have| have == svg) {
        return Ok(false);
    }
    std::fs::create_dir_all(&dir).map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
    std::fs::write(&path, svg).map_err(|e| HarnessError::io(path.display().to_string(), e))?;
    Ok(true)
}

/// Every badge of a matrix: one per cell (`<connector>-<engine>.svg`) and one per cell that is a
/// committed record (`<stem>.svg`, as `record` writes it). Returns how many files changed.
pub fn write_matrix(reports: &Path, m: &Matrix) -> Result<usize, HarnessError> {
    let mut wrote = 0;
    for c in &m.cells {
        let svg = for_cell(c);
        wrote += usize::from(write_if_changed(reports, &cell_stem(c), &svg)?);
        if let (Some(stem), Some(_)) = (record_stem(&c.connector, &c.engine), &c.record) {
            wrote += usize::from(write_if_changed(reports, &stem, &svg)?);
        }
    }
    Ok(wrote)
}

/// Each badge of `m`'s cells that `reports` does not hold as `m` draws it (missing, or other
/// bytes), as `matrix --check` reports a difference.
pub fn differences(reports: &Path, m: &Matrix) -> Vec<String> {
    let mut out = Vec::new();
    for c in &m.cells {
        let svg = for_cell(c);
        let mut stems = vec![cell_stem(c)];
        if c.record.is_some() {
            stems.extend(record_stem(&c.connector, &c.engine));
        }
        for stem in stems {
            let path = reports.join(DIR).join(format!("{stem}.svg"));
            match std::fs::read_to_string(&path) {
                Ok(have) if have == svg => {}
                Ok(_) => out.push(format!(
                    "{}: the badge does not say the cell's verdict and contract",
                    path.display()
                )),
                Err(_) => out.push(format!("{}: no badge committed", path.display())),
            }
        }
    }
    out
}

/// The Markdown a connector's README embeds, from the repository's root.
pub fn embed_line(stem: &str, alt: &str) -> String {
    format!("[![{alt}](reports/{DIR}/{stem}.svg)](reports/{stem}.md)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::matrix::tests::sample;

    #[test]
    fn a_badge_says_the_verdict_in_its_colour_and_nothing_that_varies() {
        let m = sample();
        let pass = m.cell("python", "valkey-9.1").unwrap();
        let fail = m.cell("python", "redis-7.0").unwrap();
        let a = for_cell(pass);
        assert!(a.contains(">PASS 8/8</text>"), "{a}");
        assert!(a.contains("fill=\"#4c1\""), "{a}");
        assert!(a.contains(">EchoMQ contract "), "{a}");
        let b = for_cell(fail);
        assert!(
            b.contains(">FAIL 7/8</text>") && b.contains("fill=\"#e05d44\""),
            "{b}"
        );
        // A later run of the same verdicts draws the same bytes: no time, no figure.
        let mut again = pass.clone();
        let r = again.record.as_mut().unwrap();
        r.footer.ended = "2040-01-01T00:00:00Z".into();
        r.header.started = "2040-01-01T00:00:00Z".into();
        r.volatile.engine_boot_ms += 1234;
        assert_eq!(for_cell(&again), a);
        let none = MatrixCell {
            record: None,
            error: Some("the engine did not boot at 12:00".into()),
            ..pass.clone()
        };
        let c = for_cell(&none);
        assert!(c.contains(">ERROR</text>") && !c.contains("12:00"), "{c}");
    }

    #[test]
    fn the_widths_grow_with_the_text_and_text_is_escaped() {
        let short = svg("a", "b", "#4c1", "t");
        let long = svg("a much longer label", "b", "#4c1", "t");
        let width = |s: &str| -> u32 {
            let at = s.find("width=\"").unwrap() + 7;
            s[at..].split('"').next().unwrap().parse().unwrap()
        };
        assert!(width(&long) > width(&short) + 50, "{long}");
        assert!(svg("<x>", "&", "#4c1", "\"").contains("&lt;x&gt;"));
    }

    #[test]
    fn a_matrix_writes_a_badge_per_cell_and_per_record_once() {
        let dir = tempfile::tempdir().unwrap();
        let m = sample();
        let first = write_matrix(dir.path(), &m).unwrap();
        let records = m
            .cells
            .iter()
            .filter(|c| c.record.is_some() && record_stem(&c.connector, &c.engine).is_some())
            .count();
        assert_eq!(first, m.cells.len() + records);
        let python =
            std::fs::read_to_string(dir.path().join("badges/python-redis-7.0.svg")).unwrap();
        assert!(python.contains("FAIL 7/8"));
        assert!(dir.path().join("badges/python.svg").is_file());
        assert_eq!(
            write_matrix(dir.path(), &m).unwrap(),
            0,
            "unchanged badges are kept"
        );
        assert_eq!(differences(dir.path(), &m), Vec::<String>::new());
        std::fs::remove_file(dir.path().join("badges/python.svg")).unwrap();
        let mut other = m.clone();
        let cell = other
            .cells
            .iter_mut()
            .find(|c| c.connector == "reference")
            .unwrap();
        cell.record.as_mut().unwrap().footer.summary = "FAIL 7/8".into();
        let d = differences(dir.path(), &other);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(
            d.iter()
                .any(|x| x.ends_with("badges/python.svg: no badge committed")),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|x| x.contains("badges/reference-valkey-9.1.svg: the badge does not say")),
            "{d:?}"
        );
    }

    #[test]
    fn the_embed_line_points_at_the_badge_and_the_record() {
        assert_eq!(
            embed_line("python", "EchoMQ"),
            "[![EchoMQ](reports/badges/python.svg)](reports/python.md)"
        );
    }
}
