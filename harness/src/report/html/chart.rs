//! The page's chart: each gate's wall time per connector, as inline SVG bars.

use std::fmt::Write as _;

use super::{esc, secs};
use crate::report::Record;
use crate::report::grid::Grid;
use crate::report::matrix::Matrix;

const PALETTE: [&str; 6] = [
    "#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e",
];

/// Horizontal grouped bars: for each gate, one bar per connector, its wall time on the first
/// engine column (the pinned engine) — the same engine for every bar, so bars compare.
pub(super) fn chart(h: &mut String, m: &Matrix, grid: &Grid) {
    let Some(engine) = grid.cols.first() else {
        return;
    };
    let rows: Vec<(&String, Option<&Record>)> = grid
        .rows
        .iter()
        .map(|r| (r, m.cell(r, engine).and_then(|c| c.record.as_ref())))
        .collect();
    let max = crate::gates::ALL
        .iter()
        .flat_map(|g| rows.iter().map(move |(_, r)| wall(*r, g.id)))
        .max()
        .unwrap_or(0);
    let bar_h = 13;
    let (left, width) = (150usize, 1120usize);
    let plot = Plot {
        max: nice_ceiling(max),
        bar_h,
        group_h: rows.len() * (bar_h + 3) + 12,
        left,
        plot_w: width - left - 90,
    };
    let height = plot.group_h * crate::gates::ALL.len() + 28;
    let label = grid
        .col_labels
        .first()
        .cloned()
        .unwrap_or_else(|| engine.clone());
    let _ = write!(
        h,
        "<h2>Gate wall time per connector <small class=\"meta\">on {} ({})</small></h2>\n<div class=\"chart\">\n<div class=\"legend\">",
        esc(engine),
        esc(&label)
    );
    for (i, (r, _)) in rows.iter().enumerate() {
        let _ = write!(
            h,
            "<span><i style=\"background:{}\"></i>{}</span>",
            PALETTE[i % PALETTE.len()],
            esc(r)
        );
    }
    let _ = write!(
        h,
        "</div>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {width} {height}\" \
         role=\"img\" aria-label=\"gate wall time per connector\" font-family=\"system-ui,sans-serif\" font-size=\"12\">\n"
    );
    plot.grid_lines(h, height);
    plot.bars(h, &rows);
    h.push_str("</svg>\n</div>\n");
}

/// A gate's wall time in a record, ms (0 without a record or a figure).
fn wall(r: Option<&Record>, id: crate::gates::GateId) -> u64 {
    r.and_then(|r| r.volatile.gate_wall_ms.get(id.as_str()).copied())
        .unwrap_or(0)
}

/// The chart's geometry, in SVG units; `max` is the scale's end, ms.
struct Plot {
    max: u64,
    bar_h: usize,
    group_h: usize,
    left: usize,
    plot_w: usize,
}

impl Plot {
    /// Grid lines at quarters of the maximum, each with its time below.
    fn grid_lines(&self, h: &mut String, height: usize) {
        for q in 0..=4 {
            let x = self.left + self.plot_w * q / 4;
            let _ = writeln!(
                h,
                "<line x1=\"{x}\" y1=\"0\" x2=\"{x}\" y2=\"{}\" stroke=\"#d1d9e0\" stroke-width=\"1\"/>\
                 <text x=\"{x}\" y=\"{}\" fill=\"#59636e\" text-anchor=\"middle\">{}</text>",
                height - 20,
                height - 6,
                secs(self.max * q as u64 / 4)
            );
        }
    }

    /// Per gate: its label, then one bar per connector.
    fn bars(&self, h: &mut String, rows: &[(&String, Option<&Record>)]) {
        let (left, bar_h) = (self.left, self.bar_h);
        for (gi, g) in crate::gates::ALL.iter().enumerate() {
            let y0 = gi * self.group_h + 6;
            let _ = writeln!(
                h,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#1f2328\"><tspan font-weight=\"600\">{}</tspan> {}</text>",
                left - 10,
                y0 + self.group_h / 2,
                g.id,
                g.name
            );
            for (ri, (r, rec)) in rows.iter().enumerate() {
                let ms = wall(*rec, g.id);
                let w = (self.plot_w as u64 * ms / self.max).max(1);
                let y = y0 + ri * (bar_h + 3);
                let _ = writeln!(
                    h,
                    "<rect x=\"{left}\" y=\"{y}\" width=\"{w}\" height=\"{bar_h}\" rx=\"2\" fill=\"{}\"><title>{} {} {}</title></rect>\
                     <text x=\"{}\" y=\"{}\" fill=\"#59636e\" font-size=\"11\">{}</text>",
                    PALETTE[ri % PALETTE.len()],
                    esc(r),
                    g.id,
                    secs(ms),
                    left as u64 + w + 5,
                    y + bar_h - 2,
                    secs(ms)
                );
            }
        }
    }
}

/// Four times the smallest round step (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × 10^k ms) whose four
/// grid lines reach `ms`, so the lines fall on round values.
fn nice_ceiling(ms: u64) -> u64 {
    let mut unit = 1u64;
    loop {
        for m in [10, 15, 20, 25, 30, 40, 50, 60, 80] {
            let step = unit * m / 10;
            if step > 0 && step * 4 >= ms.max(1) {
                return step * 4;
            }
        }
        unit *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_scales_are_round() {
        assert_eq!(nice_ceiling(20_300), 24_000);
        assert_eq!(nice_ceiling(18_000), 20_000);
        assert_eq!(nice_ceiling(6_800), 8_000);
        assert_eq!(nice_ceiling(0), 4);
    }
}
