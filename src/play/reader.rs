//! A reader over a spanned TOML document that collects every problem
//! instead of stopping at the first, so a play (or any config file) is
//! rejected with all of its errors at once, each with a position.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Number, Value};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::diag::{Diagnostic, Span, did_you_mean, list};

pub type Val<'i> = Spanned<DeValue<'i>>;

/// Collects diagnostics while reading.
#[derive(Debug, Default)]
pub struct Reader {
    pub diags: Vec<Diagnostic>,
    /// What is allowed but has no effect, with where it is written.
    pub warnings: Vec<(Span, String)>,
    /// Definitions already reported as broken: what names them is not.
    pub broken: Broken,
}

/// Definitions that failed to read, each already reported where it is
/// written. A reference to one is not reported again — as an unknown name,
/// as having no effect, as a role with no agent — since those would follow
/// from the first error and advise the wrong fix ("define an agent" that
/// is defined). Every section that reads a definition records a failure
/// here before the sections that name it are read (issue 43).
#[derive(Debug, Default, Clone)]
pub struct Broken {
    /// `[agents.<name>]`.
    pub agents: BTreeSet<String>,
    /// `[role_profiles.<name>]`, with the (canonical) role it is for when
    /// that much can be read; `None`: it may be meant for any role.
    pub profiles: BTreeMap<String, Option<String>>,
    /// `[profiles.<name>]` (user profiles, palette roles), canonical.
    pub user_profiles: BTreeSet<String>,
    /// The (canonical) roles of operations that failed to read.
    pub op_roles: BTreeSet<String>,
    /// Palette roles whose entry's `agent`, `flag_profile` or `tools`
    /// failed to read.
    pub role_setups: BTreeSet<String>,
    /// `[palette.defaults]` is written but failed to read.
    pub defaults: bool,
}

impl Broken {
    /// Whether a broken role profile may be the one meant to run work of
    /// `role` (the one named by `named`, else one for the role): what that
    /// work runs on is then unknown until the profile is fixed.
    pub fn may_serve(&self, role: &str, named: Option<&str>) -> bool {
        match named {
            Some(n) => self.profiles.contains_key(n),
            None => self
                .profiles
                .values()
                .any(|r| r.as_deref().is_none_or(|r| r == role)),
        }
    }
}

/// How a value's type is named in messages.
pub fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

impl Reader {
    pub fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    pub fn error(&mut self, span: Span, message: impl Into<String>, label: impl Into<String>) {
        self.diags.push(Diagnostic::new(span, message, label));
    }

    pub fn warn(&mut self, span: Span, message: impl Into<String>) {
        self.warnings.push((span, message.into()));
    }

    pub fn has_errors(&self) -> bool {
        !self.diags.is_empty()
    }

    pub fn wrong_type(&mut self, what: &str, v: &Val<'_>, expected: &str) {
        self.diags.push(Diagnostic::new(
            v.span(),
            format!(
                "{what} must be {expected}, found {}",
                type_name(v.get_ref())
            ),
            format!("expected {expected}"),
        ));
    }

    /// Views `v` as a table named `what` (`[play]`, `operations[2]`, ...).
    pub fn table<'a, 'i>(&mut self, v: &'a Val<'i>, what: &str) -> Option<Table<'a, 'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(Table {
                t,
                span: v.span(),
                name: what.to_string(),
            }),
            _ => {
                self.wrong_type(what, v, "a table");
                None
            }
        }
    }

    /// Converts a free-form value to JSON (contexts, results).
    pub fn json(&mut self, what: &str, v: &Val<'_>) -> Option<Value> {
        match to_json(v) {
            Ok(j) => Some(j),
            Err((span, msg)) => {
                self.error(span, format!("{what}: {msg}"), "not representable in JSON");
                None
            }
        }
    }
}

pub fn to_json(v: &Val<'_>) -> Result<Value, (Span, String)> {
    Ok(match v.get_ref() {
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Integer(i) => {
            let n = i64::from_str_radix(i.as_str(), i.radix())
                .map_err(|_| (v.span(), "integer out of range".to_string()))?;
            Value::Number(n.into())
        }
        DeValue::Float(f) => {
            let x: f64 = f
                .as_str()
                .parse()
                .map_err(|_| (v.span(), "invalid float".to_string()))?;
            Value::Number(
                Number::from_f64(x)
                    .ok_or_else(|| (v.span(), "inf and nan have no JSON form".to_string()))?,
            )
        }
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(d) => Value::String(d.to_string()),
        DeValue::Array(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        DeValue::Table(t) => {
            let mut m = Map::new();
            for (k, val) in t.iter() {
                m.insert(k.get_ref().to_string(), to_json(val)?);
            }
            Value::Object(m)
        }
    })
}

/// A table being read.
pub struct Table<'a, 'i> {
    pub t: &'a DeTable<'i>,
    pub span: Span,
    pub name: String,
}

impl<'a, 'i> Table<'a, 'i> {
    pub fn get(&self, key: &str) -> Option<&'a Val<'i>> {
        self.t.get(key)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.t.contains_key(key)
    }

    /// Keys in document order with their spans.
    pub fn keys(&self) -> impl Iterator<Item = (&'a str, Span)> + 'a {
        self.t.iter().map(|(k, _)| (k.get_ref().as_ref(), k.span()))
    }

    pub fn entries(&self) -> impl Iterator<Item = (&'a str, Span, &'a Val<'i>)> + 'a {
        self.t
            .iter()
            .map(|(k, v)| (k.get_ref().as_ref(), k.span(), v))
    }

    pub fn key_span(&self, key: &str) -> Span {
        self.t
            .get_key_value(key)
            .map_or(self.span.clone(), |(k, _)| k.span())
    }

    fn out_of_range<T>(&self, r: &mut Reader, v: &Val<'_>, key: &str, allowed: &str) -> Option<T> {
        r.push(
            Diagnostic::new(
                v.span(),
                format!("{} is out of range", self.what(key)),
                "out of range",
            )
            .help(format!("allowed: {allowed}")),
        );
        None
    }

    fn what(&self, key: &str) -> String {
        format!("`{key}` in {}", self.name)
    }

    /// Reports every key that is not in `allowed`.
    pub fn deny_unknown(&self, r: &mut Reader, allowed: &[&str]) {
        for (key, span) in self.keys() {
            if allowed.contains(&key) {
                continue;
            }
            let mut help = format!("allowed keys: {}", list(allowed, 40));
            if let Some(s) = did_you_mean(key, allowed.iter().copied()) {
                help = format!("did you mean `{s}`? {help}");
            }
            r.push(
                Diagnostic::new(
                    span,
                    format!("unknown key `{key}` in {}", self.name),
                    "unknown key",
                )
                .help(help),
            );
        }
    }

    pub fn require(&self, r: &mut Reader, key: &str, example: &str) -> Option<&'a Val<'i>> {
        let v = self.get(key);
        if v.is_none() {
            r.push(
                Diagnostic::new(
                    self.span.start..self.span.start,
                    format!("{} is missing `{key}`", self.name),
                    format!("`{key}` is required here"),
                )
                .help(format!("add {key} = {example}")),
            );
        }
        v
    }

    pub fn string(&self, r: &mut Reader, key: &str) -> Option<(String, Span)> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some((s.to_string(), v.span())),
            _ => {
                r.wrong_type(&self.what(key), v, "a string");
                None
            }
        }
    }

    pub fn bool(&self, r: &mut Reader, key: &str) -> Option<(bool, Span)> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some((*b, v.span())),
            _ => {
                r.wrong_type(&self.what(key), v, "a boolean (true or false)");
                None
            }
        }
    }

    /// An integer within `min..=max`.
    pub fn int(&self, r: &mut Reader, key: &str, min: i64, max: i64) -> Option<(i64, Span)> {
        let v = self.get(key)?;
        let DeValue::Integer(i) = v.get_ref() else {
            r.wrong_type(&self.what(key), v, "an integer");
            return None;
        };
        match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) if (min..=max).contains(&n) => Some((n, v.span())),
            _ => self.out_of_range(r, v, key, &format!("an integer from {min} to {max}")),
        }
    }

    /// A number (integer or float) within the open/closed range described
    /// by `ok` and `allowed`.
    pub fn number(
        &self,
        r: &mut Reader,
        key: &str,
        ok: impl Fn(f64) -> bool,
        allowed: &str,
    ) -> Option<(f64, Span)> {
        let v = self.get(key)?;
        let x = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            _ => {
                r.wrong_type(&self.what(key), v, "a number");
                return None;
            }
        };
        match x {
            Some(x) if x.is_finite() && ok(x) => Some((x, v.span())),
            _ => self.out_of_range(r, v, key, allowed),
        }
    }

    /// A string that must be one of `allowed`.
    pub fn choice(&self, r: &mut Reader, key: &str, allowed: &[&str]) -> Option<(String, Span)> {
        let (s, span) = self.string(r, key)?;
        if allowed.contains(&s.as_str()) {
            return Some((s, span));
        }
        let mut help = format!("allowed: {}", allowed.join(", "));
        if let Some(m) = did_you_mean(&s, allowed.iter().copied()) {
            help = format!("did you mean \"{m}\"? {help}");
        }
        r.push(
            Diagnostic::new(
                span,
                format!("{} has an unknown value {s:?}", self.what(key)),
                "not allowed here",
            )
            .help(help),
        );
        None
    }

    /// An array of strings; each item keeps its own span.
    pub fn strings(&self, r: &mut Reader, key: &str) -> Option<Vec<(String, Span)>> {
        let v = self.get(key)?;
        let DeValue::Array(items) = v.get_ref() else {
            r.wrong_type(&self.what(key), v, "an array of strings");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push((s.to_string(), item.span())),
                _ => {
                    r.wrong_type(
                        &format!("each item of {}", self.what(key)),
                        item,
                        "a string",
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// A sub-table.
    pub fn table(&self, r: &mut Reader, key: &str) -> Option<Table<'a, 'i>> {
        let v = self.get(key)?;
        r.table(v, &format!("`{key}` in {}", self.name))
    }

    /// An arbitrary value as JSON.
    pub fn json(&self, r: &mut Reader, key: &str) -> Option<(Value, Span)> {
        let v = self.get(key)?;
        r.json(&self.what(key), v).map(|j| (j, v.span()))
    }

    /// A table as a JSON object.
    pub fn json_object(&self, r: &mut Reader, key: &str) -> Option<(Map<String, Value>, Span)> {
        let v = self.get(key)?;
        if !matches!(v.get_ref(), DeValue::Table(_)) {
            r.wrong_type(&self.what(key), v, "a table");
            return None;
        }
        match r.json(&self.what(key), v)? {
            Value::Object(m) => Some((m, v.span())),
            _ => None,
        }
    }
}

/// Parses a TOML document, reporting every syntax error with its position.
pub fn parse_document(source: &str) -> Result<Spanned<DeTable<'_>>, Vec<Diagnostic>> {
    let (doc, errors) = DeTable::parse_recoverable(source);
    if errors.is_empty() {
        return Ok(doc);
    }
    let mut out: Vec<Diagnostic> = Vec::new();
    for e in errors {
        let span = e.span().unwrap_or(0..0);
        let message = format!("TOML syntax error: {}", e.message().trim());
        // The recovering parser can report one problem more than once.
        if out.iter().any(|d| d.span == span && d.message == message) {
            continue;
        }
        out.push(Diagnostic::new(span, message, "here").help("see https://toml.io for the syntax"));
    }
    Err(out)
}
