//! `[prices]`: what a model's tokens cost, for the agent CLIs that report
//! tokens but no cost (codex, gemini, copilot, antigravity). The operator
//! writes them — in the play or in the user's agents file — because prices
//! change and differ by contract; none are compiled in. An attempt's USD is
//! then derived from its tokens, so a USD cap can be kept on those CLIs.

use std::collections::BTreeMap;

use crate::kernel::Usage;

/// USD per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    /// Input tokens read from the provider's cache; the input price when
    /// not given.
    pub cached_input: f64,
    pub output: f64,
}

impl Price {
    /// What `u` cost. Input tokens include the cached ones (every parser
    /// reports them so), which are priced apart.
    pub fn cost(&self, u: &Usage) -> f64 {
        let input = u.input_tokens.unwrap_or(0);
        let cached = u.cached_input_tokens.unwrap_or(0).min(input);
        let output = u.output_tokens.unwrap_or(0);
        ((input - cached) as f64 * self.input
            + cached as f64 * self.cached_input
            + output as f64 * self.output)
            / 1_000_000.0
    }
}

/// Prices by model name, as the play and the user's agents file give them
/// (the play's entry wins for a model both name).
pub type Prices = BTreeMap<String, Price>;

/// `u` with its cost derived from `price` when the CLI gave none; a cost
/// the CLI reported is kept as it is.
pub fn priced(mut u: Usage, price: Option<&Price>) -> Usage {
    if u.cost_usd.is_none()
        && let Some(p) = price
        && !u.is_empty()
    {
        u.cost_usd = Some(p.cost(&u));
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Price = Price {
        input: 2.0,
        cached_input: 0.5,
        output: 8.0,
    };

    #[test]
    fn cached_input_is_priced_apart_and_counted_once() {
        let u = Usage {
            input_tokens: Some(1200),
            cached_input_tokens: Some(1000),
            output_tokens: Some(40),
            ..Usage::default()
        };
        // 200 × 2 + 1000 × 0.5 + 40 × 8, per million.
        assert!((P.cost(&u) - 0.001_22).abs() < 1e-12);
    }

    #[test]
    fn a_reported_cost_is_kept_and_nothing_is_priced_without_a_price() {
        let reported = Usage {
            cost_usd: Some(0.5),
            input_tokens: Some(1_000_000),
            ..Usage::default()
        };
        assert_eq!(priced(reported, Some(&P)).cost_usd, Some(0.5));
        let tokens = Usage {
            input_tokens: Some(1_000_000),
            ..Usage::default()
        };
        assert_eq!(priced(tokens, None).cost_usd, None);
        assert_eq!(priced(tokens, Some(&P)).cost_usd, Some(2.0));
    }

    #[test]
    fn more_cached_than_input_is_not_a_negative_count() {
        let u = Usage {
            input_tokens: Some(10),
            cached_input_tokens: Some(50),
            ..Usage::default()
        };
        assert!((P.cost(&u) - 10.0 * 0.5 / 1e6).abs() < 1e-15);
    }
}
