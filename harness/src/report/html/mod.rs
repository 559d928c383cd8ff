//! The matrix as one self-contained HTML page (`reports/index.html`): inline CSS and SVG, no
//! script, nothing fetched. The grid first, then a chart of gate wall times per connector, then
//! every record's gates and evidence in collapsible `<details>`.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::HarnessError;
use crate::gates::Verdict;
use crate::report::grid::Grid;
use crate::report::matrix::{Matrix, cell_key};
use crate::report::{GateVerdict, Record};

mod chart;

/// Escapes text for HTML element content and double-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// An id fragment: letters, digits and `-` only.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Error => "error",
        Verdict::NotRun => "not-run",
    }
}

fn secs(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

const CSS: &str = r#"
:root { --pass:#1a7f37; --pass-bg:#dafbe1; --fail:#cf222e; --fail-bg:#ffebe9; --error:#9a6700;
  --error-bg:#fff8c5; --ink:#1f2328; --muted:#59636e; --line:#d1d9e0; --panel:#f6f8fa; }
* { box-sizing:border-box; }
body { margin:0; font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;
  color:var(--ink); background:#fff; }
main { max-width:1240px; margin:0 auto; padding:24px 28px 48px; }
h1 { font-size:26px; margin:0 0 4px; }
h2 { font-size:19px; margin:32px 0 10px; padding-bottom:6px; border-bottom:1px solid var(--line); }
.sub { color:var(--muted); margin:0 0 18px; }
.facts { display:flex; flex-wrap:wrap; gap:8px 22px; margin:0 0 18px; padding:0; list-style:none;
  color:var(--muted); font-size:14px; }
.facts b { color:var(--ink); font-weight:600; }
code, pre { font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
table { border-collapse:collapse; }
table.grid { width:100%; table-layout:fixed; }
.grid th, .grid td { border:1px solid var(--line); padding:10px 12px; vertical-align:top; text-align:left; }
.grid thead th { background:var(--panel); font-weight:600; }
.grid thead th small, .grid tbody th small { display:block; color:var(--muted); font-weight:400; font-size:12.5px; }
.grid tbody th { background:var(--panel); width:210px; }
.grid thead th small.src { font-size:11.5px; margin-top:2px; }
.cell a { color:inherit; text-decoration:none; display:block; }
.verdict { display:inline-block; font-weight:700; font-size:17px; padding:2px 10px; border-radius:6px; }
.verdict.pass { color:var(--pass); background:var(--pass-bg); }
.verdict.fail { color:var(--fail); background:var(--fail-bg); }
.verdict.error { color:var(--error); background:var(--error-bg); }
.dots { display:flex; gap:3px; margin:8px 0 4px; }
.dot { width:26px; height:18px; border-radius:3px; font-size:10px; line-height:18px; text-align:center;
  color:#fff; font-weight:600; }
.dot.pass { background:var(--pass); } .dot.fail { background:var(--fail); } .dot.error { background:#bf8700; }
.meta { color:var(--muted); font-size:12.5px; }
.why { color:var(--fail); font-size:12.5px; margin-top:4px; overflow-wrap:anywhere; }
.chart { border:1px solid var(--line); border-radius:8px; padding:12px 14px; background:#fff; }
.legend { display:flex; gap:18px; font-size:13px; color:var(--muted); margin:0 0 6px; }
.legend i { display:inline-block; width:12px; height:12px; border-radius:2px; margin-right:6px; vertical-align:-1px; }
details.cell-detail { border:1px solid var(--line); border-radius:8px; margin:10px 0; background:#fff; }
details.cell-detail > summary { cursor:pointer; padding:10px 14px; font-weight:600; background:var(--panel);
  border-radius:8px; list-style-position:inside; }
details.cell-detail[open] > summary { border-bottom:1px solid var(--line); border-radius:8px 8px 0 0; }
details.cell-detail > div { padding:8px 14px 14px; }
table.gates { width:100%; margin:8px 0; }
.gates th, .gates td { border-bottom:1px solid var(--line); padding:5px 8px; text-align:left; vertical-align:top; }
.gates td.n { text-align:right; white-space:nowrap; color:var(--muted); }
details.gate > summary { cursor:pointer; }
details.gate ul { margin:6px 0 6px 18px; padding:0; }
details.gate li { margin:2px 0; overflow-wrap:anywhere; }
li.v { color:var(--fail); }
pre { background:var(--panel); padding:8px 10px; border-radius:6px; overflow:auto; }
footer { margin-top:36px; color:var(--muted); font-size:13px; }
"#;

/// The whole page.
pub fn page(m: &Matrix) -> String {
    let grid = m.grid();
    let mut h = String::new();
    let ok = grid.all_pass();
    let n_pass = grid
        .cells
        .iter()
        .filter(|c| c.verdict == Verdict::Pass)
        .count();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>EchoMQ engine matrix — {n_pass}/{} cells pass</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n",
        grid.cells.len()
    );
    let _ = write!(
        h,
        "<h1>EchoMQ engine matrix</h1>\n<p class=\"sub\">Every connector judged by the eight gates \
         G1–G8 on every engine. <b class=\"verdict {}\" style=\"font-size:14px\">{n_pass} of {} cells PASS</b></p>\n",
        if ok { "pass" } else { "fail" },
        grid.cells.len()
    );
    let bundle = m
        .cells
        .iter()
        .find_map(|c| c.record.as_ref())
        .map(|r| {
            format!(
                "{} (protocol {})",
                r.header.bundle_version, r.header.bundle_protocol
            )
        })
        .unwrap_or_default();
    let contract = m
        .cells
        .iter()
        .find_map(|c| c.record.as_ref())
        .map(|r| crate::report::markdown::contract_label(&r.header).replace('`', ""))
        .unwrap_or_default();
    let _ = writeln!(
        h,
        "<ul class=\"facts\"><li>seed <b>{}</b></li><li>histories <b>{}</b></li><li>batch <b>{}</b></li>\
         <li>engines <b>{}</b></li><li>contract <b>{}</b></li><li>bundle <b>{}</b></li><li>harness <b>{}</b></li>\
         <li>ran <b>{}</b> in <b>{}</b></li></ul>",
        m.seed,
        m.histories,
        m.batch,
        esc(&m.engine_kind),
        esc(&contract),
        esc(&bundle),
        esc(&m.harness_version),
        esc(&m.volatile.started),
        secs(m.volatile.wall_ms)
    );
    grid_table(&mut h, m, &grid);
    badges(&mut h, m);
    chart::chart(&mut h, m, &grid);
    h.push_str("<h2>Records</h2>\n");
    for c in &grid.cells {
        detail(&mut h, m, c);
    }
    let _ = write!(
        h,
        "<footer>Generated by <code>emq-gate matrix</code> from <code>matrix.json</code> \
         (schema {}). Verdicts, evidence, SHAs and versions are checked in CI by \
         <code>emq-gate matrix --check</code>; times are recorded, never compared.</footer>\n\
         </main>\n</body>\n</html>\n",
        esc(&m.schema)
    );
    h
}

/// Each connector's badge (its record on the pinned engine, and its cluster's) with the line its
/// README embeds; every cell's badge is beside them in `badges/<connector>-<engine>.svg`.
fn badges(h: &mut String, m: &Matrix) {
    use crate::report::badge;
    h.push_str(
        "<h2>Badges</h2>\n<p class=\"sub\">A connector's README embeds its badge with the line \
         beside it (from the repository's root); each cell's is <code>badges/&lt;connector&gt;-&lt;engine&gt;.svg</code>.</p>\n\
         <table class=\"badges\">\n",
    );
    for c in &m.cells {
        let Some(stem) = crate::report::matrix::record_stem(&c.connector, &c.engine) else {
            continue;
        };
        if c.record.is_none() {
            continue;
        }
        let _ = writeln!(
            h,
            "<tr><td><img src=\"{dir}/{s}.svg\" alt=\"{alt}\" height=\"20\"></td>\
             <td><code>{line}</code></td></tr>",
            dir = badge::DIR,
            s = esc(&stem),
            alt = esc(&format!("EchoMQ: {stem}")),
            line = esc(&badge::embed_line(&stem, "EchoMQ conformance")),
        );
    }
    h.push_str("</table>\n");
}

fn grid_table(h: &mut String, m: &Matrix, grid: &Grid) {
    h.push_str(
        "<h2>Connectors × engines</h2>\n<table class=\"grid\">\n<thead><tr><th>connector</th>",
    );
    for (col, label) in grid.cols.iter().zip(&grid.col_labels) {
        let src = m
            .cells
            .iter()
            .filter(|c| &c.engine == col)
            .find_map(|c| c.record.as_ref())
            .map(|r| r.header.engine_source.clone())
            .unwrap_or_default();
        let _ = write!(
            h,
            "<th title=\"{}\">{}<small>{}</small><small class=\"src\">{}</small></th>",
            esc(&src),
            esc(col),
            esc(label),
            esc(src.split(" (").next().unwrap_or(""))
        );
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in &grid.rows {
        let who = grid
            .cells
            .iter()
            .find(|c| &c.row == row && !c.connector.is_empty())
            .map(|c| c.connector.clone())
            .unwrap_or_default();
        let _ = write!(h, "<tr><th>{}<small>{}</small></th>", esc(row), esc(&who));
        for col in &grid.cols {
            let Some(c) = grid.get(row, col) else {
                h.push_str("<td class=\"cell\">—</td>");
                continue;
            };
            let key = cell_key(row, col);
            let _ = write!(
                h,
                "<td class=\"cell\" id=\"cell-{}\" data-cell=\"{}\" data-verdict=\"{}\"><a href=\"#rec-{}\">\
                 <span class=\"verdict {}\">{}</span><div class=\"dots\">",
                slug(&key),
                esc(&key),
                c.verdict,
                slug(&key),
                class(c.verdict),
                esc(&c.summary)
            );
            for (id, v) in &c.gates {
                let _ = write!(
                    h,
                    "<span class=\"dot {}\" title=\"{id} {v}\">{}</span>",
                    class(*v),
                    id.number()
                );
            }
            h.push_str("</div>");
            if c.wall_ms > 0 {
                let _ = write!(h, "<div class=\"meta\">gates {}</div>", secs(c.wall_ms));
            }
            if let Some(why) = &c.first_violation {
                let short: String = why.chars().take(140).collect();
                let _ = write!(h, "<div class=\"why\">{}</div>", esc(&short));
            }
            h.push_str("</a></td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

fn detail(h: &mut String, m: &Matrix, c: &crate::report::grid::Cell) {
    let key = cell_key(&c.row, &c.col);
    let record = m.cell(&c.row, &c.col).and_then(|x| x.record.as_ref());
    let open = if c.verdict == Verdict::Pass {
        ""
    } else {
        " open"
    };
    let _ = write!(
        h,
        "<details class=\"cell-detail\" id=\"rec-{}\"{open}><summary>{} × {} — \
         <span class=\"verdict {}\" style=\"font-size:14px\">{}</span> <span class=\"meta\">{}{}</span></summary>\n<div>\n",
        slug(&key),
        esc(&c.row),
        esc(&c.col),
        class(c.verdict),
        esc(&c.summary),
        esc(&c.connector),
        if c.engine.is_empty() {
            String::new()
        } else {
            format!(" on {}", esc(&c.engine))
        }
    );
    let Some(r) = record else {
        let _ = write!(
            h,
            "<p class=\"why\">{}</p>\n</div></details>\n",
            esc(c.first_violation.as_deref().unwrap_or("no record"))
        );
        return;
    };
    facts(h, r);
    h.push_str("<table class=\"gates\"><thead><tr><th style=\"width:26%\">gate</th><th style=\"width:9%\">verdict</th><th style=\"width:9%\">wall</th><th>evidence</th></tr></thead><tbody>\n");
    for g in &r.gates {
        gate_row(h, r, g);
    }
    h.push_str("</tbody></table>\n</div></details>\n");
}

/// The record's header facts: engine, build, connector, seed, boot, end.
fn facts(h: &mut String, r: &Record) {
    let hd = &r.header;
    let _ = writeln!(
        h,
        "<ul class=\"facts\"><li>engine <b>{}</b> ({} <code>{}</code>)</li><li>build <b>{}</b></li>\
         <li>connector <b>{} {}</b> ({})</li><li>seed <b>{}</b></li><li>boot <b>{}</b></li><li>ended <b>{}</b></li></ul>",
        esc(&hd.engine_label()),
        esc(&hd.engine_kind),
        esc(&hd.engine_image),
        esc(if hd.engine_source.is_empty() {
            "unknown"
        } else {
            &hd.engine_source
        }),
        esc(&hd.connector_name),
        esc(&hd.connector_version),
        esc(&hd.connector_language),
        hd.seed,
        secs(r.volatile.engine_boot_ms),
        esc(&r.footer.ended)
    );
}

/// One gate: verdict, wall, headline, and its evidence and failing cases folded below.
fn gate_row(h: &mut String, r: &Record, g: &GateVerdict) {
    let ms = r
        .volatile
        .gate_wall_ms
        .get(g.id.as_str())
        .copied()
        .unwrap_or(0);
    let headline = g.first_violation().unwrap_or_else(|| {
        g.evidence
            .last()
            .map(ToString::to_string)
            .unwrap_or_default()
    });
    let headline: String = headline
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(160)
        .collect();
    let _ = write!(
        h,
        "<tr><td><b>{}</b> {}</td><td><span class=\"verdict {}\" style=\"font-size:13px\">{}</span></td><td class=\"n\">{}</td>\
         <td><details class=\"gate\"{}><summary>{} <span class=\"meta\">({} facts)</span></summary><ul>",
        g.id,
        esc(&g.name),
        class(g.verdict),
        g.verdict,
        secs(ms),
        if g.verdict == Verdict::Pass {
            ""
        } else {
            " open"
        },
        esc(&headline),
        g.evidence.len()
    );
    evidence_items(h, g);
    case_items(h, g);
    h.push_str("</ul></details></td></tr>\n");
}

/// Each fact one list item, violations marked; a fact's further lines in a `<pre>`.
fn evidence_items(h: &mut String, g: &GateVerdict) {
    for e in &g.evidence {
        let v = e.severity.is_violation();
        let line = e.to_string();
        match line.split_once('\n') {
            Some((first, rest)) => {
                let _ = write!(
                    h,
                    "<li{}>{}<pre>{}</pre></li>",
                    if v { " class=\"v\"" } else { "" },
                    esc(first),
                    esc(rest)
                );
            }
            None => {
                let _ = write!(
                    h,
                    "<li{}>{}</li>",
                    if v { " class=\"v\"" } else { "" },
                    esc(&line)
                );
            }
        }
    }
}

/// With per-case verdicts: the PASS count, then each case that did not pass.
fn case_items(h: &mut String, g: &GateVerdict) {
    if !g.cases.is_empty() {
        let bad: Vec<_> = g
            .cases
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .collect();
        let _ = write!(
            h,
            "<li>per case: {} of {} PASS</li>",
            g.cases.len() - bad.len(),
            g.cases.len()
        );
        for c in bad {
            let _ = write!(
                h,
                "<li class=\"v\">{} {}: {}</li>",
                esc(&c.id),
                c.verdict,
                esc(c.message.as_deref().unwrap_or(""))
            );
        }
    }
}

/// The matrix's files are written here, beside the page they include, so the matrix's data
/// module does not depend on its rendering.
impl Matrix {
    /// Writes `matrix.json`, `matrix.md` and `index.html` into `dir` unless it already holds a
    /// matrix with the same stable fields (`refresh` writes anyway). True when it wrote.
    pub fn write_if_changed(&self, dir: &Path, refresh: bool) -> Result<bool, HarnessError> {
        let existing = dir.join("matrix.json");
        let same = !refresh
            && existing.is_file()
            && Matrix::load(&existing).is_ok_and(|old| {
                self.stable_differences(&old).is_empty() && !self.names_more_than(&old)
            });
        if same {
            return Ok(false);
        }
        std::fs::create_dir_all(dir).map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
        let json = serde_json::to_string_pretty(self).expect("matrices serialize") + "\n";
        for (file, body) in [
            ("matrix.json", json),
            ("matrix.md", self.markdown()),
            ("index.html", page(self)),
        ] {
            let path = dir.join(file);
            std::fs::write(&path, body)
                .map_err(|e| HarnessError::io(path.display().to_string(), e))?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::matrix::tests::sample;

    #[test]
    fn text_is_escaped_and_controls_dropped() {
        assert_eq!(
            esc("<a href=\"x\">&'\u{1b}[0m\u{7}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;[0m"
        );
    }

    #[test]
    fn the_page_has_every_cell_its_evidence_and_no_outside_fetch() {
        let page = page(&sample());
        for (cell, verdict) in [
            ("reference×valkey-9.1", "PASS 8/8"),
            ("reference×redis-7.0", "PASS 8/8"),
            ("python×valkey-9.1", "PASS 8/8"),
            ("python×redis-7.0", "FAIL 7/8"),
        ] {
            let at = page
                .find(&format!("data-cell=\"{cell}\""))
                .unwrap_or_else(|| panic!("{cell} missing"));
            assert!(page[at..at + 400].contains(verdict), "{cell}: {verdict}");
        }
        assert!(page.contains("a job was lost &lt;j1&gt; &amp; &quot;j2&quot;"));
        assert!(page.contains("<svg"));
        assert!(!page.contains("<script"));
        assert!(
            !page.contains("http://") || page.matches("http://").count() == 1,
            "only the SVG namespace"
        );
        assert!(!page.contains("https://"));
        assert_eq!(page.matches("<details class=\"cell-detail\"").count(), 4);
        // Each record that is a cell shows its badge and the line a README embeds.
        assert!(
            page.contains("<img src=\"badges/python.svg\""),
            "python's badge"
        );
        assert!(
            page.contains("[![EchoMQ conformance](reports/badges/python.svg)](reports/python.md)"),
            "python's embed line"
        );
    }
}
