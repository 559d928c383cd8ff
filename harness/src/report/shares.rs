//! A matrix judged in shares: which cells a share runs (`--partition k/n`, `--cells`,
//! `--skip-cells`), and the merge of shares back into one matrix, where a cell judged twice or
//! by no share is an error naming it. Pure: the command (`cmd/matrix.rs`) does the I/O.
//!
//! The model is nextest's `--partition count:k/n`, with one difference: a cell's share is a hash
//! of its name, not its position, so adding a connector or an engine moves no other cell to
//! another share (a CI job's cache of what it judged stays meaningful). With `--balance FILE`
//! the shares are cut by the cells' past wall times instead ([`balance`]): a hash is as good as a
//! coin for the time a share takes, and one TLS cluster cell can outweigh eight single-node
//! cells, so two hashed shares ended minutes apart.

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use crate::report::matrix::Share;
use crate::report::matrix::{Matrix, MatrixVolatile, cell_key};

/// `k/n`: the k-th of n shares (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub k: u32,
    pub n: u32,
}

impl std::str::FromStr for Partition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("partition {s:?}: expected K/N with 1 <= K <= N (e.g. 2/3)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n) = (
            k.trim().parse::<u32>().map_err(|_| bad())?,
            n.trim().parse::<u32>().map_err(|_| bad())?,
        );
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Self { k, n })
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// The share (1..=n) a cell belongs to: the first 8 bytes of the SHA1 of its key, mod n.
pub fn share_of(key: &str, n: u32) -> u32 {
    let hex = crate::protocol::bundle::sha1_hex(key.as_bytes());
    let h = u64::from_str_radix(&hex[..16], 16).expect("sha1 hex");
    (h % u64::from(n)) as u32 + 1
}

/// `python×valkey-9.1` or `python:valkey-9.1` (for keyboards without `×`) as the cell key.
pub fn parse_cell(s: &str) -> Result<String, String> {
    let s = s.trim();
    let (c, e) = s
        .split_once('×')
        .or_else(|| s.split_once(':'))
        .ok_or_else(|| format!("cell {s:?}: expected CONNECTOR×ENGINE or CONNECTOR:ENGINE"))?;
    if c.is_empty() || e.is_empty() {
        return Err(format!("cell {s:?}: a connector and an engine, both named"));
    }
    Ok(cell_key(c, e))
}

/// Which cells a run judges: every cell, or those of a partition, of a list, or all but a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub partition: Option<Partition>,
    /// Only these cells (keys), when not empty.
    pub cells: Vec<String>,
    /// Not these cells (keys).
    pub skip: Vec<String>,
    /// The partition's share of each cell, cut by past wall times ([`balance`]); `None`: by hash
    /// ([`share_of`]). A cell the map lacks goes by hash.
    pub balanced: Option<BTreeMap<String, u32>>,
}

impl Selection {
    /// True when it selects every cell (a whole matrix, not a share).
    pub fn is_all(&self) -> bool {
        self.partition.is_none() && self.cells.is_empty() && self.skip.is_empty()
    }

    /// Whether the cell `key` is in this share.
    pub fn picks(&self, key: &str) -> bool {
        (self.cells.is_empty() || self.cells.iter().any(|c| c == key))
            && !self.skip.iter().any(|c| c == key)
            && self.partition.is_none_or(|p| self.share(key, p) == p.k)
    }

    /// The share of the partition `p` the cell `key` belongs to.
    fn share(&self, key: &str, p: Partition) -> u32 {
        self.balanced
            .as_ref()
            .and_then(|b| b.get(key).copied())
            .unwrap_or_else(|| share_of(key, p.n))
    }

    /// A named cell that is not in the matrix is bad input (a typo would judge nothing).
    pub fn unknown_cells(&self, keys: &[String]) -> Vec<String> {
        self.cells
            .iter()
            .chain(&self.skip)
            .filter(|c| !keys.contains(c))
            .cloned()
            .collect()
    }

    /// How the share was chosen, in the words of the flags.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.cells.is_empty() {
            parts.push(format!("--cells {}", self.cells.join(",")));
        }
        if !self.skip.is_empty() {
            parts.push(format!("--skip-cells {}", self.skip.join(",")));
        }
        if let Some(p) = self.partition {
            parts.push(format!("--partition {p}"));
        }
        if self.balanced.is_some() {
            parts.push("--balance".into());
        }
        if parts.is_empty() {
            "every cell".into()
        } else {
            parts.join(" ")
        }
    }
}

/// The cells `keys` cut into `n` shares whose summed `weights` (past wall times, ms) are as
/// even as one greedy pass makes them: the heaviest cell first, each to the share with the
/// least so far, the lower share on a tie (LPT, within 4/3 of the best cut). A cell with no
/// weight (new since `weights` were measured) weighs the median of the others. Pure and
/// deterministic: every share computes the same cut from the same file.
pub fn balance(keys: &[String], weights: &BTreeMap<String, u64>, n: u32) -> BTreeMap<String, u32> {
    let mut known: Vec<u64> = keys
        .iter()
        .filter_map(|k| weights.get(k).copied())
        .collect();
    known.sort_unstable();
    let median = known.get(known.len() / 2).copied().unwrap_or(1);
    let mut cells: Vec<(u64, &String)> = keys
        .iter()
        .map(|k| (weights.get(k).copied().unwrap_or(median), k))
        .collect();
    // Heaviest first; equal weights in key order, so the cut does not depend on `keys`' order.
    cells.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut load = vec![0u64; n as usize];
    cells
        .into_iter()
        .map(|(w, k)| {
            let lightest = (0..load.len())
                .min_by_key(|&i| (load[i], i))
                .expect("n >= 1");
            load[lightest] += w;
            (k.clone(), lightest as u32 + 1)
        })
        .collect()
}

/// Every cell key of `m`'s shape, rows first.
pub fn keys_of(m: &Matrix) -> Vec<String> {
    m.connectors
        .iter()
        .flat_map(|c| m.engines.iter().map(move |e| cell_key(c, e)))
        .collect()
}

/// The shares of one matrix, merged: the same shape and parameters in every share, each cell of
/// the shape judged by exactly one of them. The first error names the share and the cell.
pub fn merge(shares: &[(PathBuf, Matrix)]) -> Result<Matrix, String> {
    let Some((first_path, first)) = shares.first() else {
        return Err("no share to merge".into());
    };
    let params = |m: &Matrix| {
        (
            m.schema.clone(),
            m.harness_version.clone(),
            m.engine_kind.clone(),
            m.seed,
            m.histories,
            m.batch,
            m.connectors.clone(),
            m.engines.clone(),
        )
    };
    let mut by_key: BTreeMap<String, (&PathBuf, usize, usize)> = BTreeMap::new();
    let mut selections: BTreeMap<&str, &PathBuf> = BTreeMap::new();
    for (si, (path, m)) in shares.iter().enumerate() {
        if let Some(s) = &m.share
            && let Some(other) = selections.insert(&s.selection, path)
        {
            return Err(format!(
                "share {:?} given twice: {} and {}",
                s.selection,
                other.display(),
                path.display()
            ));
        }
        if m.share.is_none() {
            return Err(format!(
                "{}: a whole matrix, not a share (run it with --partition, --cells or --skip-cells \
                 and --out)",
                path.display()
            ));
        }
        if params(m) != params(first) {
            return Err(format!(
                "{}: another matrix than {} (shape, seed, histories, batch, engine kind or \
                 versions differ)",
                path.display(),
                first_path.display()
            ));
        }
        for (ci, c) in m.cells.iter().enumerate() {
            let key = cell_key(&c.connector, &c.engine);
            if let Some((other, _, _)) = by_key.insert(key.clone(), (path, si, ci)) {
                return Err(format!(
                    "cell {key}: judged twice, in {} and in {}",
                    other.display(),
                    path.display()
                ));
            }
        }
    }
    let mut merged = Matrix {
        share: None,
        cells: Vec::new(),
        volatile: MatrixVolatile::default(),
        ..first.clone()
    };
    for key in keys_of(first) {
        let Some((_, si, ci)) = by_key.remove(&key) else {
            return Err(format!("cell {key}: judged by no share"));
        };
        merged.cells.push(shares[si].1.cells[ci].clone());
    }
    if let Some(key) = by_key.keys().next() {
        return Err(format!("cell {key}: not a cell of the matrix's shape"));
    }
    merged.volatile = merged_volatile(shares.iter().map(|(_, m)| &m.volatile));
    Ok(merged)
}

/// The shares' times: the earliest start, the latest end, every cell's wall; `wall_ms` is the
/// sum of the shares' walls (the work, whether the shares ran one after another or side by side).
fn merged_volatile<'a>(parts: impl Iterator<Item = &'a MatrixVolatile>) -> MatrixVolatile {
    let mut v = MatrixVolatile::default();
    for p in parts {
        if v.started.is_empty() || p.started < v.started {
            v.started = p.started.clone();
        }
        if p.ended > v.ended {
            v.ended = p.ended.clone();
        }
        v.wall_ms += p.wall_ms;
        v.cell_wall_ms.extend(p.cell_wall_ms.clone());
    }
    v
}

/// `m` cut down to the cells `sel` picks, marked as a share.
pub fn share(m: &Matrix, sel: &Selection) -> Matrix {
    let cells: Vec<_> = m
        .cells
        .iter()
        .filter(|c| sel.picks(&cell_key(&c.connector, &c.engine)))
        .cloned()
        .collect();
    let keys: Vec<String> = cells
        .iter()
        .map(|c| cell_key(&c.connector, &c.engine))
        .collect();
    let mut volatile = m.volatile.clone();
    volatile.cell_wall_ms.retain(|k, _| keys.contains(k));
    Matrix {
        share: Some(Share {
            selection: sel.describe(),
            cells: keys,
        }),
        cells,
        volatile,
        ..m.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> Matrix {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/matrix.json");
        Matrix::load(&path).expect("the committed matrix")
    }

    fn without_times(mut m: Matrix) -> Matrix {
        m.volatile = MatrixVolatile::default();
        m
    }

    fn thirds(m: &Matrix) -> Vec<(PathBuf, Matrix)> {
        (1..=3)
            .map(|k| {
                let sel = Selection {
                    partition: Some(Partition { k, n: 3 }),
                    ..Selection::default()
                };
                (PathBuf::from(format!("share-{k}")), share(m, &sel))
            })
            .collect()
    }

    #[test]
    fn three_thirds_merged_are_the_whole() {
        let whole = committed();
        let parts = thirds(&whole);
        let sizes: Vec<usize> = parts.iter().map(|(_, m)| m.cells.len()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), whole.cells.len(), "{sizes:?}");
        assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");
        let merged = merge(&parts).unwrap();
        assert_eq!(without_times(merged.clone()), without_times(whole.clone()));
        assert!(merged.stable_differences(&whole).is_empty());
        // Every cell's wall time survives the merge.
        assert_eq!(merged.volatile.cell_wall_ms, whole.volatile.cell_wall_ms);
    }

    #[test]
    fn a_share_missing_or_judged_twice_names_the_cell() {
        let whole = committed();
        let mut parts = thirds(&whole);
        let lost = parts.remove(1);
        let err = merge(&parts).unwrap_err();
        let first_lost = cell_key(&lost.1.cells[0].connector, &lost.1.cells[0].engine);
        assert_eq!(err, format!("cell {first_lost}: judged by no share"));
        parts.push(lost);
        let mut again = parts[0].clone();
        again.0 = PathBuf::from("share-1-again");
        parts.push(again);
        let err = merge(&parts).unwrap_err();
        assert!(
            err.contains("given twice: share-1 and share-1-again"),
            "{err}"
        );
        // The same cells under another selection: the cell is named.
        parts
            .last_mut()
            .unwrap()
            .1
            .share
            .as_mut()
            .unwrap()
            .selection = "--cells x".into();
        let err = merge(&parts).unwrap_err();
        assert!(
            err.contains("judged twice, in share-1 and in share-1-again"),
            "{err}"
        );
    }

    #[test]
    fn shares_of_other_matrices_or_a_whole_matrix_do_not_merge() {
        let whole = committed();
        let mut parts = thirds(&whole);
        parts[2].1.seed += 1;
        assert!(merge(&parts).unwrap_err().contains("another matrix"));
        let err = merge(&[(PathBuf::from("m"), whole)]).unwrap_err();
        assert!(err.contains("a whole matrix, not a share"), "{err}");
        assert_eq!(merge(&[]).unwrap_err(), "no share to merge");
    }

    #[test]
    fn a_cell_lands_in_exactly_one_share_for_any_count() {
        let keys = keys_of(&committed());
        for n in 1..=7 {
            for key in &keys {
                let owners: Vec<u32> = (1..=n)
                    .filter(|&k| {
                        Selection {
                            partition: Some(Partition { k, n }),
                            ..Selection::default()
                        }
                        .picks(key)
                    })
                    .collect();
                assert_eq!(owners.len(), 1, "{key} in {owners:?} of {n}");
            }
        }
    }

    #[test]
    fn a_list_and_its_complement_cover_the_matrix_once() {
        let whole = committed();
        let load = vec![
            parse_cell("reference:valkey-9.1").unwrap(),
            parse_cell("python×valkey-9.1-cluster").unwrap(),
        ];
        let a = Selection {
            cells: load.clone(),
            ..Selection::default()
        };
        let b = Selection {
            skip: load,
            ..Selection::default()
        };
        let parts = vec![
            (PathBuf::from("load"), share(&whole, &a)),
            (PathBuf::from("quiet"), share(&whole, &b)),
        ];
        assert_eq!(parts[0].1.cells.len(), 2);
        assert_eq!(
            without_times(merge(&parts).unwrap()),
            without_times(whole.clone())
        );
        assert_eq!(
            a.unknown_cells(&keys_of(&whole)),
            Vec::<String>::new(),
            "both cells exist"
        );
        let typo = Selection {
            cells: vec![cell_key("pyhton", "valkey-9.1")],
            ..Selection::default()
        };
        assert_eq!(typo.unknown_cells(&keys_of(&whole)).len(), 1);
    }

    #[test]
    fn balanced_shares_even_out_past_times_and_every_share_cuts_the_same() {
        let keys: Vec<String> = ["a", "b", "c", "d", "e", "new"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let w: BTreeMap<String, u64> = [("a", 190), ("b", 80), ("c", 60), ("d", 50), ("e", 10)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let cut = balance(&keys, &w, 2);
        let load = |s: u32| -> u64 {
            cut.iter()
                .filter(|(_, v)| **v == s)
                .map(|(k, _)| w.get(k).copied().unwrap_or(60))
                .sum()
        };
        // The new cell weighs the median (60); a (190) and d against b, c, e and the new one.
        assert_eq!((cut["a"], cut["d"], cut["b"], cut["new"]), (1, 1, 2, 2));
        assert_eq!((load(1), load(2)), (240, 210));
        assert_eq!(cut.len(), keys.len());
        let mut reversed = keys.clone();
        reversed.reverse();
        assert_eq!(
            balance(&reversed, &w, 2),
            cut,
            "the order of the keys changes nothing"
        );
        // Each cell in exactly one share of a balanced partition.
        let sel = |k| Selection {
            partition: Some(Partition { k, n: 2 }),
            balanced: Some(cut.clone()),
            ..Selection::default()
        };
        for key in &keys {
            assert_eq!(
                [1, 2].iter().filter(|&&k| sel(k).picks(key)).count(),
                1,
                "{key}"
            );
        }
        assert_eq!(sel(1).describe(), "--partition 1/2 --balance");
    }

    #[test]
    fn partitions_and_cells_parse_or_say_why_not() {
        assert_eq!("2/3".parse(), Ok(Partition { k: 2, n: 3 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
            let err = bad.parse::<Partition>().unwrap_err();
            assert!(err.contains("expected K/N"), "{bad}: {err}");
        }
        assert_eq!(parse_cell("go:redis-7.0").unwrap(), "go×redis-7.0");
        assert!(parse_cell("go").is_err());
        assert!(parse_cell(":redis-7.0").is_err());
    }
}
