//! `emq-gate summary`: the grid in a terminal (like `bowtie summary`), or as JSON.

use crate::gates::Verdict;
use crate::report::grid::Grid;

const GREEN: &str = "\x1b[32;1m";
const RED: &str = "\x1b[31;1m";
const YELLOW: &str = "\x1b[33;1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

fn paint(text: &str, code: &str, color: bool) -> String {
    if color {
        format!("{code}{text}{RESET}")
    } else {
        text.to_string()
    }
}

fn pad(text: &str, width: usize) -> String {
    format!(
        "{text}{}",
        " ".repeat(width.saturating_sub(text.chars().count()))
    )
}

/// The grid as aligned text; ANSI colour when `color`. Below it, one line per cell that did not
/// pass, with its first violation.
pub fn text(grid: &Grid, color: bool) -> String {
    let (first_w, widths) = column_widths(grid);
    let mut s = String::new();
    s.push_str(&pad("connector", first_w));
    for (c, w) in grid.cols.iter().zip(&widths) {
        s.push_str(&pad(c, *w));
    }
    s = s.trim_end().to_string() + "\n";
    let mut line = pad("", first_w);
    for (l, w) in grid.col_labels.iter().zip(&widths) {
        line.push_str(&pad(l, *w));
    }
    s.push_str(&paint(line.trim_end(), DIM, color));
    s.push('\n');
    for row in &grid.rows {
        s.push_str(row_line(grid, row, first_w, &widths, color).trim_end());
        s.push('\n');
    }
    s.push_str(&tally(grid, color));
    s
}

/// The first column's width, then each engine column's: its name, label or a verdict, padded.
fn column_widths(grid: &Grid) -> (usize, Vec<usize>) {
    let first_w = grid
        .rows
        .iter()
        .map(|r| r.chars().count())
        .chain(["connector".len()])
        .max()
        .unwrap_or(0)
        + 2;
    let widths: Vec<usize> = grid
        .cols
        .iter()
        .zip(&grid.col_labels)
        .map(|(c, l)| {
            c.chars()
                .count()
                .max(l.chars().count())
                .max(Verdict::NotRun.as_str().len() + 4)
                + 2
        })
        .collect();
    (first_w, widths)
}

/// One connector's row: its name, then each cell's summary coloured by verdict.
fn row_line(grid: &Grid, row: &str, first_w: usize, widths: &[usize], color: bool) -> String {
    let mut line = pad(row, first_w);
    for (col, w) in grid.cols.iter().zip(widths) {
        let (text, code) = match grid.get(row, col) {
            None => ("—".to_string(), DIM),
            Some(c) => (
                c.summary.clone(),
                match c.verdict {
                    Verdict::Pass => GREEN,
                    Verdict::Fail => RED,
                    Verdict::Error => YELLOW,
                    Verdict::NotRun => DIM,
                },
            ),
        };
        let padding = " ".repeat(w.saturating_sub(text.chars().count()));
        line.push_str(&paint(&text, code, color));
        line.push_str(&padding);
    }
    line
}

/// How many cells pass, then one line per cell that did not, with its first violation.
fn tally(grid: &Grid, color: bool) -> String {
    let mut s = String::new();
    let bad = grid.not_passing();
    let total = grid.cells.len();
    s.push('\n');
    s.push_str(&format!(
        "{} of {total} cells pass{}\n",
        total - bad.len(),
        grid.cells
            .iter()
            .find_map(|c| c.seed)
            .map_or(String::new(), |seed| format!(" (seed {seed})"))
    ));
    for c in bad {
        s.push_str(&format!(
            "{} {} × {}: {}\n",
            paint(
                &c.summary,
                if c.verdict == Verdict::Fail {
                    RED
                } else {
                    YELLOW
                },
                color
            ),
            c.row,
            c.col,
            c.first_violation.as_deref().unwrap_or("")
        ));
    }
    s
}

/// The grid as JSON.
pub fn json(grid: &Grid) -> String {
    serde_json::to_string_pretty(grid).expect("grids serialize") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::matrix::tests::sample;

    #[test]
    fn the_grid_is_aligned_and_plain_without_colour() {
        let t = text(&sample().grid(), false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "connector  valkey-9.1    redis-7.0");
        assert_eq!(lines[1], "           valkey 9.1.2  redis 7.0.15");
        assert_eq!(lines[2], "reference  PASS 8/8      PASS 8/8");
        assert_eq!(lines[3], "python     PASS 8/8      FAIL 7/8");
        assert!(t.contains("3 of 4 cells pass (seed 1)"), "{t}");
        assert!(
            t.contains("FAIL 7/8 python × redis-7.0: G8 atomicity: a job was lost"),
            "{t}"
        );
        assert!(!t.contains('\x1b'));
    }

    #[test]
    fn colour_keeps_the_columns() {
        let t = text(&sample().grid(), true);
        assert!(t.contains("\x1b[31;1mFAIL 7/8\x1b[0m"));
        let plain: String = strip(&t);
        assert_eq!(plain, text(&sample().grid(), false));
    }

    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut it = s.chars().peekable();
        while let Some(c) = it.next() {
            if c == '\x1b' {
                for d in it.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn json_has_each_cell() {
        let j: serde_json::Value = serde_json::from_str(&json(&sample().grid())).unwrap();
        assert_eq!(j["cells"].as_array().unwrap().len(), 4);
        assert_eq!(j["cells"][3]["summary"], "FAIL 7/8");
    }
}
