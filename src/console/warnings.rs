//! The run's warnings folded for the console: one row per distinct
//! message, with how many times it came and when first and last. A run
//! whose provider rate-limits the same operation 300 times shows one row
//! `×300`, not 300. The text is the key: warnings about different
//! operations name them, so they stay apart.
//!
//! The fold follows the projection's list as it grows, looking only at
//! what is new (a map finds a message's row, an ordered map keeps the rows
//! by when each was last seen), so a frame never walks every warning.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One distinct warning.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    pub message: Arc<str>,
    pub count: usize,
    /// Seconds since the run started, of the first and the latest.
    pub first: f64,
    pub last: f64,
    /// Where the latest is in the run's list (orders the rows).
    last_ix: usize,
}

#[derive(Debug, Clone, Default)]
pub struct WarningFold {
    rows: Vec<Folded>,
    by_message: HashMap<Arc<str>, usize>,
    /// Each row by the position of its latest warning: newest last.
    order: BTreeMap<usize, usize>,
    /// How many of the run's warnings are folded in.
    folded: usize,
}

impl WarningFold {
    /// `all` (when, message; oldest first), folded.
    pub fn of(all: &[(f64, Arc<str>)]) -> WarningFold {
        let mut f = WarningFold::default();
        f.sync(all);
        f
    }

    /// Folds in what `all` has beyond what was folded. A list that is not
    /// the one folded so far grown (a replay went back, the console
    /// resynced) is folded again from the start.
    pub fn sync(&mut self, all: &[(f64, Arc<str>)]) {
        if !self.follows(all) {
            *self = WarningFold::default();
        }
        for (i, (at, message)) in all.iter().enumerate().skip(self.folded) {
            self.push(i, *at, message);
        }
        self.folded = all.len();
    }

    /// Whether `all` is exactly what was folded (nothing to do).
    pub fn is_of(&self, all: &[(f64, Arc<str>)]) -> bool {
        self.folded == all.len() && self.follows(all)
    }

    /// Whether `all` starts with what was folded, judged by its last
    /// warning folded: cheap, and a list rebuilt differently will not end
    /// the same at the same place.
    fn follows(&self, all: &[(f64, Arc<str>)]) -> bool {
        if self.folded == 0 {
            return true;
        }
        let (Some((at, message)), Some((ix, row))) = (
            all.get(self.folded - 1),
            self.order
                .last_key_value()
                .and_then(|(ix, r)| Some((*ix, self.rows.get(*r)?))),
        ) else {
            return false;
        };
        ix == self.folded - 1 && row.last == *at && row.message == *message
    }

    fn push(&mut self, ix: usize, at: f64, message: &Arc<str>) {
        if let Some(&r) = self.by_message.get(message)
            && let Some(row) = self.rows.get_mut(r)
        {
            self.order.remove(&row.last_ix);
            row.count += 1;
            row.last = at;
            row.last_ix = ix;
            self.order.insert(ix, r);
            return;
        }
        let r = self.rows.len();
        self.rows.push(Folded {
            message: message.clone(),
            count: 1,
            first: at,
            last: at,
            last_ix: ix,
        });
        self.by_message.insert(message.clone(), r);
        self.order.insert(ix, r);
    }

    /// The rows, the one seen most recently first.
    pub fn newest_first(&self) -> impl Iterator<Item = &Folded> {
        self.order.values().rev().filter_map(|r| self.rows.get(*r))
    }

    /// Distinct warnings.
    pub fn distinct(&self) -> usize {
        self.rows.len()
    }

    /// Warnings in all, repeats counted.
    pub fn total(&self) -> usize {
        self.folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(f64, &str)]) -> Vec<(f64, Arc<str>)> {
        items.iter().map(|(t, m)| (*t, Arc::from(*m))).collect()
    }

    fn rows(f: &WarningFold) -> Vec<(String, usize, f64, f64)> {
        f.newest_first()
            .map(|r| (r.message.to_string(), r.count, r.first, r.last))
            .collect()
    }

    #[test]
    fn repeats_fold_into_one_row_newest_last_seen_first() {
        let mut all = list(&[(1.0, "plan: rate limited"), (2.0, "unpriced model x")]);
        for i in 0..299 {
            all.push((3.0 + f64::from(i), Arc::from("plan: rate limited")));
        }
        // Another operation's rate limit is another warning.
        all.push((400.0, "build: rate limited".into()));
        let f = WarningFold::of(&all);
        assert_eq!((f.distinct(), f.total()), (3, 302));
        assert_eq!(
            rows(&f),
            [
                ("build: rate limited".into(), 1, 400.0, 400.0),
                ("plan: rate limited".into(), 300, 1.0, 301.0),
                ("unpriced model x".into(), 1, 2.0, 2.0),
            ]
        );
    }

    #[test]
    fn it_follows_growth_and_starts_again_when_the_list_is_another() {
        let mut all = list(&[(1.0, "a"), (2.0, "b")]);
        let mut f = WarningFold::default();
        f.sync(&all);
        all.push((3.0, "a".into()));
        assert!(!f.is_of(&all));
        f.sync(&all);
        assert!(f.is_of(&all));
        assert_eq!(rows(&f)[0], ("a".into(), 2, 1.0, 3.0));
        // Incremental and from scratch agree.
        assert_eq!(rows(&f), rows(&WarningFold::of(&all)));
        // A replay went back, then on along another path of the same length.
        let other = list(&[(1.0, "a"), (2.0, "c"), (5.0, "c")]);
        assert!(!f.is_of(&other));
        f.sync(&other);
        assert_eq!(rows(&f), rows(&WarningFold::of(&other)));
        f.sync(&other[..1]);
        assert_eq!(rows(&f), [("a".into(), 1, 1.0, 1.0)]);
        f.sync(&[]);
        assert_eq!((f.distinct(), f.total()), (0, 0));
    }
}
