//! Spend and its budget: what a run's attempts cost (USD as the CLIs
//! report it) and how many tokens they used, against caps for the run and
//! for roles. A cap pauses the run rather than killing it: no new attempt
//! starts (running ones finish), until the operator raises the cap. Work an
//! operation spawned counts against the run that spawned it.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::Arc;

use super::agent::Usage;
use serde::{Deserialize, Serialize};

/// What is capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    Usd,
    Tokens,
}

impl Measure {
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Usd => "usd",
            Measure::Tokens => "tokens",
        }
    }

    /// `10.00 USD`, `1000000 tokens`.
    pub fn amount(self, x: f64) -> String {
        match self {
            Measure::Usd => format!("{x:.2} USD"),
            Measure::Tokens => format!("{} tokens", x.round() as u64),
        }
    }

    /// `10.02/10.00 USD`, `1 204 000/1 000 000 tokens`.
    pub fn show(self, spent: f64, cap: f64) -> String {
        match self {
            Measure::Usd => format!("{spent:.2}/{cap:.2} USD"),
            Measure::Tokens => format!("{}/{} tokens", spent.round() as u64, cap.round() as u64),
        }
    }
}

/// What was spent against the run's caps, in the one form every surface
/// shows (the console's header and budgets pane, `ctl status`, the
/// report): `3.20/10.00 USD (32%) · 12 400/50 000 tok (25%)`, or without
/// caps `3.20 USD · 12 400 tok`; nothing before anything was spent or
/// capped.
pub fn spend_words(spent: (f64, f64), budget: Option<&Budget>) -> Option<String> {
    use crate::printable::fit::group;
    let caps = (budget.and_then(|b| b.usd), budget.and_then(|b| b.tokens));
    if spent == (0.0, 0.0) && caps == (None, None) {
        return None;
    }
    let pct = |x: f64, cap: f64| format!(" ({:.0}%)", 100.0 * x / cap);
    let usd = match caps.0 {
        Some(cap) => format!("{:.2}/{cap:.2} USD{}", spent.0, pct(spent.0, cap)),
        None => format!("{:.2} USD", spent.0),
    };
    let tokens = match caps.1 {
        Some(cap) => format!(
            "{}/{} tok{}",
            group(spent.1 as usize),
            group(cap as usize),
            pct(spent.1, cap)
        ),
        None => format!("{} tok", group(spent.1 as usize)),
    };
    Some(format!("{usd} · {tokens}"))
}

/// A cap the operator raised, as the answer says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaisedCap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub measure: Measure,
    /// The cap before (none: there was none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<f64>,
    pub to: f64,
    /// What the cap's scope (the run, or the role) has spent.
    pub spent: f64,
}

impl RaisedCap {
    /// `usd cap 3.00 → 4.50 (0.12 left)`, `tester tokens cap none →
    /// 500000 (over by 1200)`.
    pub fn words(&self) -> String {
        let n = |x: f64| match self.measure {
            Measure::Usd => format!("{x:.2}"),
            Measure::Tokens => format!("{}", x.round() as u64),
        };
        let left = self.to - self.spent;
        let rest = if left >= 0.0 {
            format!("{} left", n(left))
        } else {
            format!("still over by {}: work stays held", n(-left))
        };
        format!(
            "{}{} cap {} → {} ({rest})",
            self.role
                .as_deref()
                .map(|r| format!("{r} "))
                .unwrap_or_default(),
            self.measure.as_str(),
            self.from.map_or("none".into(), n),
            n(self.to),
        )
    }
}

/// Caps: the run's, and roles' own (never looser than the run's).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<f64>,
    /// Fractions of a cap at which the run warns (default 80% and 95%).
    #[serde(default = "default_warn_at")]
    pub warn_at: Vec<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, RoleCaps>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RoleCaps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<f64>,
}

pub fn default_warn_at() -> Vec<f64> {
    vec![0.8, 0.95]
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.usd.is_none() && self.tokens.is_none() && self.roles.is_empty()
    }

    /// How much of the run's caps is spent: the larger fraction of the USD
    /// and the token cap (`None` without a run-wide cap).
    pub fn used(&self, usd: f64, tokens: f64) -> Option<f64> {
        let f = |spent: f64, cap: Option<f64>| cap.map(|c| spent / c);
        match (f(usd, self.usd), f(tokens, self.tokens)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the run's spend has passed its first warning level.
    pub fn warned(&self, usd: f64, tokens: f64) -> bool {
        let first = self.warn_at.iter().copied().fold(f64::INFINITY, f64::min);
        self.used(usd, tokens).is_some_and(|u| u >= first)
    }

    /// The cap of `measure` for `scope` (`None`: the run).
    pub fn cap(&self, scope: Option<&str>, measure: Measure) -> Option<f64> {
        let caps = match scope {
            None => (self.usd, self.tokens),
            Some(r) => self
                .roles
                .get(r)
                .map_or((None, None), |c| (c.usd, c.tokens)),
        };
        match measure {
            Measure::Usd => caps.0,
            Measure::Tokens => caps.1,
        }
    }

    fn cap_mut(&mut self, scope: Option<&str>, measure: Measure) -> &mut Option<f64> {
        let caps = match scope {
            None => (&mut self.usd, &mut self.tokens),
            Some(r) => {
                let c = self.roles.entry(r.to_string()).or_default();
                (&mut c.usd, &mut c.tokens)
            }
        };
        match measure {
            Measure::Usd => caps.0,
            Measure::Tokens => caps.1,
        }
    }

    /// Applies a change; the new cap.
    /// What the caps would be after `changes`, each checked: an amount
    /// that is a number, a cap that stays positive and at most
    /// [`MAX_CAP`] (so the log can always read it back). Nothing changes
    /// when one is refused.
    pub fn check(&self, changes: &[CapChange]) -> Result<(), String> {
        let mut after = self.clone();
        for c in changes {
            c.check().map_err(|why| format!("{c}: {why}"))?;
            let cap = after.apply(c);
            if !(cap.is_finite() && cap > 0.0 && cap <= MAX_CAP) {
                return Err(format!(
                    "{c}: the {} cap would be {cap}; a cap is more than 0 and at most {MAX_CAP:e}",
                    c.measure.as_str()
                ));
            }
        }
        Ok(())
    }

    pub fn apply(&mut self, c: &CapChange) -> f64 {
        let cap = self.cap_mut(c.role.as_deref(), c.measure);
        let new = if c.relative {
            cap.unwrap_or(0.0) + c.amount
        } else {
            c.amount
        };
        *cap = Some(new);
        new
    }
}

/// `usd=+5`, `tokens=2000000`, `implementer.usd=+1`: a cap raised by or
/// set to an amount. In JSON it is read either way: as its fields, or as
/// the words a person types (`"usd=+5"`, what a page's box sends).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub measure: Measure,
    pub amount: f64,
    /// `+N`: added to the cap; `N`: the new cap.
    pub relative: bool,
}

impl<'de> Deserialize<'de> for CapChange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Words(String),
            Fields {
                #[serde(default)]
                role: Option<String>,
                measure: Measure,
                amount: f64,
                relative: bool,
            },
        }
        match Form::deserialize(d)? {
            Form::Words(w) => w.parse().map_err(serde::de::Error::custom),
            Form::Fields {
                role,
                measure,
                amount,
                relative,
            } => Ok(CapChange {
                role,
                measure,
                amount,
                relative,
            }),
        }
    }
}

impl std::fmt::Display for CapChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(r) = &self.role {
            write!(f, "{r}.")?;
        }
        let sign = if self.relative { "+" } else { "" };
        write!(f, "{}={sign}{}", self.measure.as_str(), self.amount)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{spec:?}: {why}; write [ROLE.]usd=[+]AMOUNT or [ROLE.]tokens=[+]COUNT, for example usd=+5"
)]
pub struct CapChangeError {
    pub spec: String,
    pub why: &'static str,
}

impl FromStr for CapChange {
    type Err = CapChangeError;
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let err = |why| CapChangeError {
            spec: spec.to_string(),
            why,
        };
        let (key, value) = spec.split_once('=').ok_or_else(|| err("no ="))?;
        let (role, measure) = match key.rsplit_once('.') {
            Some((r, m)) if !r.is_empty() => (Some(r.to_string()), m),
            _ => (None, key),
        };
        let measure = match measure {
            "usd" => Measure::Usd,
            "tokens" => Measure::Tokens,
            _ => return Err(err("the cap is usd or tokens")),
        };
        let relative = value.starts_with('+');
        let amount: f64 = value
            .trim_start_matches('+')
            .parse()
            .map_err(|_| err("the amount is not a number"))?;
        let c = CapChange {
            role,
            measure,
            amount,
            relative,
        };
        c.check().map_err(err)?;
        Ok(c)
    }
}

/// The largest cap (USD or tokens) a run takes: far past any real budget,
/// far below where adding two of them stops being a number.
pub const MAX_CAP: f64 = 1e15;

impl CapChange {
    /// The change itself makes sense, wherever it came from (a command
    /// line, a control line, a raw socket request).
    pub fn check(&self) -> Result<(), &'static str> {
        if !self.amount.is_finite() || self.amount < 0.0 || (!self.relative && self.amount == 0.0) {
            return Err("the amount must be positive");
        }
        if self.amount > MAX_CAP {
            return Err("the amount is past the largest cap (1e15)");
        }
        Ok(())
    }
}

/// Spent so far, by the run and by role, from each attempt's latest
/// totals (an attempt reports totals so far: only the growth counts).
/// An attempt's totals never go down: a report lower than one before it
/// (a CLI that starts counting again) keeps the highest figure of each
/// field, so a dip cannot count the same spend twice.
#[derive(Debug, Default)]
pub struct Meter {
    by_attempt: HashMap<(u32, u32), Usage>,
    pub run: (f64, f64),
    pub roles: HashMap<Arc<str>, (f64, f64)>,
    /// Warnings given: (scope, measure, level in thousandths).
    warned: std::collections::HashSet<(Option<Arc<str>>, Measure, u32)>,
}

/// What a usage report crossed.
#[derive(Debug, Clone, PartialEq)]
pub enum Crossed {
    Warning {
        role: Option<Arc<str>>,
        measure: Measure,
        spent: f64,
        cap: f64,
        level: f64,
    },
}

impl Meter {
    pub fn spent(&self, scope: Option<&str>, m: Measure) -> f64 {
        let s = match scope {
            None => self.run,
            Some(r) => self.roles.get(r).copied().unwrap_or_default(),
        };
        match m {
            Measure::Usd => s.0,
            Measure::Tokens => s.1,
        }
    }

    /// Starts from what a stopped run had spent.
    pub fn restore(&mut self, run: (f64, f64), roles: &[(Arc<str>, (f64, f64))]) {
        self.run = run;
        self.roles = roles.iter().cloned().collect();
    }

    /// USD left under the run's cap and `role`'s, the smaller; none
    /// without a USD cap.
    pub fn usd_headroom(&self, budget: &Budget, role: Option<&str>) -> Option<f64> {
        let run = budget.usd.map(|c| c - self.run.0);
        let own = role.and_then(|r| {
            let cap = budget.cap(Some(r), Measure::Usd)?;
            Some(cap - self.spent(Some(r), Measure::Usd))
        });
        match (run, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|h| h.max(0.0))
    }

    /// A raised cap warns again at its own levels.
    pub fn forget_warnings(&mut self, role: Option<&str>, m: Measure) {
        self.warned
            .retain(|(r, wm, _)| !(r.as_deref() == role && *wm == m));
    }

    /// Counts an attempt's new totals; returns them as counted (never
    /// below what the attempt reported before) and the warnings crossed.
    pub fn record(
        &mut self,
        key: (u32, u32),
        role: Option<&Arc<str>>,
        usage: &Usage,
        budget: Option<&Budget>,
    ) -> (Usage, Vec<Crossed>) {
        let prev = self.by_attempt.get(&key).copied().unwrap_or_default();
        let now = usage.at_least(&prev);
        self.by_attempt.insert(key, now);
        let du = now.cost_usd.unwrap_or(0.0) - prev.cost_usd.unwrap_or(0.0);
        let dt = tokens_of(&now) - tokens_of(&prev);
        self.run.0 += du;
        self.run.1 += dt;
        if let Some(r) = role {
            let e = self.roles.entry(r.clone()).or_default();
            e.0 += du;
            e.1 += dt;
        }
        (now, self.crossed(role, budget))
    }

    fn crossed(&mut self, role: Option<&Arc<str>>, budget: Option<&Budget>) -> Vec<Crossed> {
        let Some(b) = budget else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let scopes = std::iter::once(None).chain(role.map(Some));
        for scope in scopes {
            for m in [Measure::Usd, Measure::Tokens] {
                let Some(cap) = b.cap(scope.map(|r| &**r), m) else {
                    continue;
                };
                let spent = self.spent(scope.map(|r| &**r), m);
                for &level in &b.warn_at {
                    let key = (scope.cloned(), m, (level * 1000.0).round() as u32);
                    if spent >= cap * level && spent < cap && self.warned.insert(key) {
                        out.push(Crossed::Warning {
                            role: scope.cloned(),
                            measure: m,
                            spent,
                            cap,
                            level,
                        });
                    }
                }
            }
        }
        out
    }

    /// The first cap `role`'s work is over (the run's first), in words:
    /// `budget 10.02/10.00 USD`, `implementer budget 2.10/2.00 USD`.
    pub fn over(
        &self,
        budget: &Budget,
        role: Option<&str>,
    ) -> Option<(Option<String>, Measure, f64, f64)> {
        for m in [Measure::Usd, Measure::Tokens] {
            if let Some(cap) = budget.cap(None, m) {
                let spent = self.spent(None, m);
                if spent >= cap {
                    return Some((None, m, spent, cap));
                }
            }
        }
        let r = role?;
        for m in [Measure::Usd, Measure::Tokens] {
            if let Some(cap) = budget.cap(Some(r), m) {
                let spent = self.spent(Some(r), m);
                if spent >= cap {
                    return Some((Some(r.to_string()), m, spent, cap));
                }
            }
        }
        None
    }
}

/// The words for a cap that holds work back: `budget 10.02/10.00 USD`.
pub fn held_words(role: Option<&str>, m: Measure, spent: f64, cap: f64) -> String {
    match role {
        Some(r) => format!("{r} budget {}", m.show(spent, cap)),
        None => format!("budget {}", m.show(spent, cap)),
    }
}

/// Tokens an attempt's usage counts (everything sent and generated).
pub fn tokens_of(u: &super::agent::Usage) -> f64 {
    (u.input_tokens.unwrap_or(0) + u.output_tokens.unwrap_or(0)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_used_is_the_larger_of_the_two_caps() {
        let b = Budget {
            usd: Some(10.0),
            tokens: Some(1000.0),
            warn_at: vec![0.95, 0.8],
            ..Budget::default()
        };
        assert_eq!(b.used(2.0, 500.0), Some(0.5));
        assert_eq!(b.used(9.0, 500.0), Some(0.9));
        assert!(!b.warned(7.9, 100.0));
        assert!(b.warned(8.0, 100.0), "the lowest level counts");
        assert!(b.warned(0.0, 800.0));
        let roles_only = Budget {
            roles: [(
                "tester".into(),
                RoleCaps {
                    usd: Some(1.0),
                    tokens: None,
                },
            )]
            .into(),
            ..Budget::default()
        };
        assert_eq!(roles_only.used(5.0, 5.0), None);
    }

    #[test]
    fn cap_changes_read_as_written_and_bad_ones_say_how_to_write_them() {
        let c: CapChange = "usd=+5".parse().unwrap();
        assert_eq!(
            (c.role, c.measure, c.amount, c.relative),
            (None, Measure::Usd, 5.0, true)
        );
        let c: CapChange = "implementer.tokens=200000".parse().unwrap();
        assert_eq!(
            (c.role.as_deref(), c.measure, c.amount, c.relative),
            (Some("implementer"), Measure::Tokens, 200000.0, false)
        );
        let e = "eur=5".parse::<CapChange>().unwrap_err().to_string();
        assert_eq!(
            e,
            "\"eur=5\": the cap is usd or tokens; write [ROLE.]usd=[+]AMOUNT or [ROLE.]tokens=[+]COUNT, for example usd=+5"
        );
        assert!("usd=-1".parse::<CapChange>().is_err());
        assert!("usd=0".parse::<CapChange>().is_err());
        assert!("usd".parse::<CapChange>().is_err());
    }

    #[test]
    fn only_growth_counts_and_each_warning_is_given_once() {
        let b = Budget {
            usd: Some(10.0),
            warn_at: default_warn_at(),
            ..Budget::default()
        };
        let mut m = Meter::default();
        let u = |usd: f64, tokens: u64| Usage {
            cost_usd: Some(usd),
            input_tokens: Some(tokens),
            ..Usage::default()
        };
        assert!(m.record((0, 1), None, &u(5.0, 100), Some(&b)).1.is_empty());
        let (_, w) = m.record((0, 1), None, &u(8.5, 200), Some(&b));
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            m.run,
            (8.5, 200.0),
            "an attempt's totals replace its last ones"
        );
        assert!(
            m.record((0, 1), None, &u(8.6, 200), Some(&b)).1.is_empty(),
            "once"
        );
        let (_, w) = m.record((1, 1), None, &u(1.0, 0), Some(&b));
        assert!(matches!(w[..], [Crossed::Warning { level, .. }] if level == 0.95));
        assert_eq!(m.over(&b, None), None);
        m.record((2, 1), None, &u(0.5, 0), Some(&b));
        assert_eq!(m.over(&b, None), Some((None, Measure::Usd, 10.1, 10.0)));
    }

    /// Issue 38: totals 3.0, then 0, then 3.5 are 3.5 spent, not 8.5.
    #[test]
    fn an_attempts_totals_never_go_down() {
        let mut m = Meter::default();
        let u = |usd: f64| Usage {
            cost_usd: Some(usd),
            ..Usage::default()
        };
        m.record((0, 1), None, &u(3.0), None);
        let (counted, _) = m.record((0, 1), None, &u(0.0), None);
        assert_eq!(counted.cost_usd, Some(3.0), "a dip keeps the highest");
        let (counted, _) = m.record((0, 1), None, &u(3.5), None);
        assert_eq!(counted.cost_usd, Some(3.5));
        assert_eq!(m.run.0, 3.5);
    }

    #[test]
    fn a_cap_change_reads_as_fields_or_as_words() {
        let words: CapChange = serde_json::from_str(r#""implementer.usd=+5""#).unwrap();
        let fields: CapChange =
            serde_json::from_value(serde_json::to_value(&words).unwrap()).unwrap();
        assert_eq!(words, fields);
        assert_eq!(words.to_string(), "implementer.usd=+5");
        let e = serde_json::from_str::<CapChange>(r#""usd=abc""#).unwrap_err();
        assert!(e.to_string().contains("for example usd=+5"), "{e}");
    }
}
