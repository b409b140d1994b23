//! `[budget]`: spend caps for the run and its roles (`kernel::spend`).
//!
//! ```toml
//! [budget]
//! usd = 10            # the run's cap in USD (as the CLIs report it, or by [prices])
//! tokens = 2_000_000  # and/or in tokens (input + output)
//! warn_at = [0.8, 0.95]
//! roles = { tester = { usd = 2 } }   # tighter than the run's, never looser
//! ```

use super::diag::Diagnostic;
use super::reader::{Reader, Table};
use crate::kernel::spend::{Budget, RoleCaps, default_warn_at};

const BUDGET_KEYS: &[&str] = &["usd", "tokens", "warn_at", "roles"];
const CAP_KEYS: &[&str] = &["usd", "tokens"];

pub(super) fn read(r: &mut Reader, root: &Table<'_, '_>) -> Option<Budget> {
    let t = root.table(r, "budget")?;
    t.deny_unknown(r, BUDGET_KEYS);
    let (usd, tokens) = caps(r, &t);
    let mut b = Budget {
        usd,
        tokens,
        warn_at: default_warn_at(),
        ..Budget::default()
    };
    if let Some(v) = t.get("warn_at") {
        b.warn_at.clear();
        match v.get_ref() {
            toml::de::DeValue::Array(items) => {
                for item in items {
                    let x = match item.get_ref() {
                        toml::de::DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
                        toml::de::DeValue::Integer(i) => i.as_str().parse::<f64>().ok(),
                        _ => None,
                    };
                    match x {
                        Some(x) if x > 0.0 && x < 1.0 => b.warn_at.push(x),
                        _ => r.push(
                            Diagnostic::new(
                                item.span(),
                                "[budget] warn_at holds fractions of the cap",
                                "not a fraction",
                            )
                            .help("numbers between 0 and 1, for example [0.8, 0.95]"),
                        ),
                    }
                }
            }
            _ => r.wrong_type(
                "[budget] warn_at",
                v,
                "an array of fractions, like [0.8, 0.95]",
            ),
        }
    }
    if let Some(roles) = t.table(r, "roles") {
        for (role, span, v) in roles.entries() {
            let Some(rt) = r.table(v, &format!("[budget.roles.{role}]")) else {
                continue;
            };
            rt.deny_unknown(r, CAP_KEYS);
            let (usd, tokens) = caps(r, &rt);
            for (what, own, run) in [("usd", usd, b.usd), ("tokens", tokens, b.tokens)] {
                if let (Some(own), Some(run)) = (own, run)
                    && own > run
                {
                    r.push(
                        Diagnostic::new(
                            span.clone(),
                            format!(
                                "role {role:?} may spend {own} {what}, more than the run's {run}"
                            ),
                            "looser than the run",
                        )
                        .help("a role's cap can only be tighter than the run's"),
                    );
                }
            }
            b.roles.insert(role.to_string(), RoleCaps { usd, tokens });
        }
    }
    if b.is_empty() {
        r.error(root.key_span("budget"), "[budget] sets no cap", "no cap");
        return None;
    }
    Some(b)
}

fn caps(r: &mut Reader, t: &Table<'_, '_>) -> (Option<f64>, Option<f64>) {
    let usd = t
        .number(r, "usd", |x| x > 0.0, "an amount of USD greater than 0")
        .map(|(x, _)| x);
    let tokens = t
        .number(r, "tokens", |x| x >= 1.0, "a number of tokens, at least 1")
        .map(|(x, _)| x.round());
    (usd, tokens)
}
