//! `[prices]`: USD per million tokens of each model an agent CLI runs that
//! reports no cost (`agents::prices`). In the play, or in the user's
//! agents file for every play; the play's entry wins.
//!
//! ```toml
//! [prices."gpt-5-codex"]
//! input = 1.25          # USD per million input tokens
//! cached_input = 0.125  # per million read from the prompt cache (default: input)
//! output = 10.0         # per million output tokens
//! ```

use super::reader::{Reader, Table};
use crate::agents::prices::{Price, Prices};

const PRICE_KEYS: &[&str] = &["input", "cached_input", "output"];
const ALLOWED: &str = "USD per million tokens, 0 or more";

pub(super) fn read(r: &mut Reader, root: &Table<'_, '_>) -> Prices {
    let mut prices = Prices::new();
    let Some(t) = root.table(r, "prices") else {
        return prices;
    };
    for (model, _, v) in t.entries() {
        let Some(pt) = r.table(v, &format!("[prices.{model:?}]")) else {
            continue;
        };
        pt.deny_unknown(r, PRICE_KEYS);
        let per_m =
            |r: &mut Reader, key: &str| pt.number(r, key, |x| x >= 0.0, ALLOWED).map(|(x, _)| x);
        let need = |r: &mut Reader, key: &str| {
            pt.require(r, key, "1.25 (USD per million tokens)")?;
            per_m(r, key)
        };
        let (input, output) = (need(r, "input"), need(r, "output"));
        let cached_input = per_m(r, "cached_input");
        if let (Some(input), Some(output)) = (input, output) {
            prices.insert(
                model.to_string(),
                Price {
                    input,
                    cached_input: cached_input.unwrap_or(input),
                    output,
                },
            );
        }
    }
    prices
}
