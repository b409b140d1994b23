//! How wide each lane is. Not by row count: by what must be legible. The
//! lanes an operator acts on (the one with the cursor, then approval,
//! failed and escalated) get room for their rows' names and times first;
//! succeeded and skipped, which nobody acts on, give way first. What is
//! left over goes by shares, so a wide screen still fills.

use super::lanes::FOLDED_WIDTH;
use crate::console::text::{Shared, shared_ends, width};
use crate::operator::model::COLS;

/// What one lane asks of the row of lanes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// Never narrower: room for its title.
    pub least: u16,
    /// Where every row's name reads apart from its neighbours' (the part
    /// that differs, with its time).
    pub legible: u16,
    /// Where every row's whole name and its time fit.
    pub full: u16,
    /// Its share of what is left once every lane has what it needs.
    pub share: u16,
    /// Lower goes first.
    pub rank: u8,
}

/// Who is served first: the lane being read, then the ones that wait for
/// the operator, then work in flight; finished work last.
pub fn rank(col: usize, focused: bool) -> u8 {
    if focused {
        return 0;
    }
    // queued, running, approval, paused, succeeded, failed, escalated, skipped
    const RANKS: [u8; COLS] = [6, 4, 1, 5, 7, 2, 3, 8];
    RANKS[col]
}

/// Ranks up to here are the lanes acted on: the cursor's (first, alone),
/// approval, failed, escalated.
const TIER_ACTED: u8 = 3;
/// Then running, paused, queued.
const TIER_FLIGHT: u8 = 6;

/// Borders (2) and the marker column (1).
const CHROME: usize = 3;
/// A row's time: ` 12m05`.
const TIME: usize = 6;
/// No lane asks for more than this for its names: a longer one is cut.
const NAME_CAP: usize = 48;

/// The widths asked for by a lane whose visible rows are named `names`.
pub fn wants_for_names<'a>(names: impl Iterator<Item = &'a str> + Clone) -> (u16, u16) {
    let shared = shared_ends(names.clone());
    let full = names.clone().map(width).max().unwrap_or(0).min(NAME_CAP);
    let legible = names
        .map(|n| distinct_width(n, shared))
        .max()
        .unwrap_or(0)
        .min(full);
    (
        (CHROME + legible + TIME) as u16,
        (CHROME + full + TIME) as u16,
    )
}

/// The columns a name needs to read apart from the others of its lane:
/// the part that differs, with an ellipsis and a character of context on
/// each side that is cut.
fn distinct_width(name: &str, shared: Shared) -> usize {
    let w = width(name);
    let cut = |n: usize| n.saturating_sub(2);
    w.saturating_sub(cut(shared.prefix) + cut(shared.suffix))
}

/// Whether a lane of this rank is one the operator acts on.
pub fn acted_on(rank: u8) -> bool {
    rank <= TIER_ACTED
}

/// Widths for `wants` in `total` columns, in the lanes' order.
pub fn widths(total: u16, wants: &[Want]) -> Vec<u16> {
    let total = total as u32;
    let least: u32 = wants.iter().map(|w| w.least as u32).sum();
    if least >= total {
        // Even the titles do not fit: each as much of its least as there is.
        return wants
            .iter()
            .map(|w| (w.least as u32 * total).checked_div(least).unwrap_or(0) as u16)
            .collect();
    }
    let mut out: Vec<u32> = wants.iter().map(|w| w.least as u32).collect();
    let mut left = total - least;
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| (wants[i].rank, i));
    // The lanes acted on first, legible then whole; then work in flight;
    // finished work last.
    for tier in [
        0..=0,
        1..=TIER_ACTED,
        TIER_ACTED + 1..=TIER_FLIGHT,
        TIER_FLIGHT + 1..=u8::MAX,
    ] {
        for goal in [|w: &Want| w.legible, |w: &Want| w.full] {
            let members: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&i| tier.contains(&wants[i].rank))
                .collect();
            let gaps: Vec<u32> = members
                .iter()
                .map(|&i| (goal(&wants[i]) as u32).saturating_sub(out[i]))
                .collect();
            let asked: u32 = gaps.iter().sum();
            // Short of room, a tier's lanes share it by what each asks: two
            // lanes half legible read better than one whole and one cut to
            // nothing.
            let room = left.min(asked);
            let mut given = 0;
            for (&i, &gap) in members.iter().zip(&gaps) {
                let give = (room * gap).checked_div(asked).unwrap_or(0);
                out[i] += give;
                given += give;
            }
            for (&i, &gap) in members.iter().zip(&gaps) {
                if given == room {
                    break;
                }
                let had = (room * gap).checked_div(asked).unwrap_or(0);
                if had < gap {
                    out[i] += 1;
                    given += 1;
                }
            }
            left -= room;
        }
    }
    // The rest by shares; what rounding leaves to the first lane that
    // ranks highest among those that share.
    let shares: u32 = wants.iter().map(|w| w.share as u32).sum();
    let rest = left;
    for (i, w) in wants.iter().enumerate() {
        let extra = (rest * w.share as u32).checked_div(shares).unwrap_or(0);
        out[i] += extra;
        left -= extra;
    }
    // No lane shares (none has rows): the rest to the cursor's.
    let first = order
        .iter()
        .find(|&&i| wants[i].share > 0)
        .or(order.first());
    if let Some(&i) = first {
        out[i] += left;
    }
    out.into_iter().map(|w| w as u16).collect()
}

/// A lane with no rows (not under the cursor), or with rows nobody acts
/// on while the screen is short of room: its title alone, at the width of
/// its short title where the screen is narrow.
pub fn short(narrow: bool, title: usize) -> u16 {
    if narrow {
        (title + 2).min(FOLDED_WIDTH as usize) as u16
    } else {
        FOLDED_WIDTH
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(least: u16, legible: u16, full: u16, share: u16, rank: u8) -> Want {
        Want {
            least,
            legible,
            full,
            share,
            rank,
        }
    }

    #[test]
    fn the_lanes_acted_on_are_legible_before_finished_work_grows() {
        // 80 columns: approval and failed share the room by what they
        // ask; succeeded keeps its title, though it has more rows than any.
        let wants = [
            lane(7, 7, 7, 0, 6),    // queued, empty
            lane(7, 7, 7, 0, 4),    // running, empty
            lane(10, 26, 33, 1, 1), // approval
            lane(8, 8, 8, 0, 5),    // paused, empty
            lane(10, 21, 35, 1, 7), // succeeded
            lane(10, 26, 31, 1, 2), // failed
            lane(7, 7, 7, 0, 3),    // escalated, empty
            lane(0, 0, 0, 0, 8),    // skipped, empty
        ];
        let w = widths(80, &wants);
        assert_eq!(w.iter().sum::<u16>(), 80);
        assert_eq!((w[2], w[5]), (21, 20), "{w:?}");
        assert_eq!(w[4], 10, "succeeded gives way: {w:?}");
        // Room for both: both whole before anything else grows.
        let w = widths(110, &wants);
        assert!(w[2] >= 33 && w[5] >= 31, "{w:?}");
        assert!(w[4] < 35, "{w:?}");
        // Wide: everyone whole, and the rest by shares.
        let w = widths(200, &wants);
        assert_eq!(w.iter().sum::<u16>(), 200);
        assert!(w[2] >= 33 && w[5] >= 31 && w[4] >= 35, "{w:?}");
    }

    #[test]
    fn titles_that_do_not_fit_are_scaled_and_nothing_is_lost() {
        let wants = [lane(10, 10, 10, 1, 0); 8];
        let w = widths(40, &wants);
        assert_eq!(w, vec![5; 8]);
        assert_eq!(widths(0, &wants), vec![0; 8]);
    }

    #[test]
    fn a_name_is_legible_by_the_part_that_differs() {
        let names = ["verify-auth-eu-west-03", "verify-auth-us-east-03"];
        let (legible, full) = wants_for_names(names.iter().copied());
        assert_eq!(full as usize, CHROME + 22 + TIME);
        // `verify-auth-` shared (10 of 12 cut), `-03` shared (1 of 3 cut).
        assert_eq!(legible as usize, CHROME + 22 - 10 - 1 + TIME);
        assert_eq!(wants_for_names(std::iter::empty()), (9, 9));
    }
}
