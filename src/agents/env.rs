//! The environment a child agent sees. `filtered` (the default) is an
//! allowlist: what any program needs to run, the variables the agent's own
//! CLI documents, and the agent's `env_passlist` — nothing else of the
//! parent's environment (database passwords, cloud keys, tokens of other
//! services, `LD_PRELOAD`, …) reaches an agent. `inherit` passes everything
//! by choice; `clean` keeps only the essentials and the pass-list.

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::def::{EnvPolicy, StreamFormat};

/// What a program needs to run at all; `clean` keeps only these.
const ESSENTIAL: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM",
    "TMPDIR", "TZ",
];

/// `filtered` keeps these for every agent: the essentials, every locale
/// category, and where programs keep their configuration and state (paths,
/// not secrets: an agent CLI finds its own login there).
const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
];

/// The variables each CLI documents for itself (names or `PREFIX*`).
pub fn format_variables(format: StreamFormat) -> &'static [&'static str] {
    match format {
        // Claude Code: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL,
        // CLAUDE_CODE_USE_BEDROCK, CLAUDE_CONFIG_DIR, MAX_THINKING_TOKENS, …
        StreamFormat::Claude => &["ANTHROPIC_*", "CLAUDE_*", "MAX_THINKING_TOKENS"],
        // codex: OPENAI_API_KEY, OPENAI_BASE_URL, CODEX_HOME, …
        StreamFormat::Codex => &["OPENAI_*", "CODEX_*"],
        // opencode: OPENCODE_CONFIG, OPENCODE_CONFIG_CONTENT, … (provider
        // keys are pass-listed for the provider one uses).
        StreamFormat::Opencode => &["OPENCODE_*"],
        // gemini-cli: GEMINI_API_KEY, GEMINI_MODEL, GOOGLE_API_KEY,
        // GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_CLOUD_PROJECT,
        // GOOGLE_CLOUD_LOCATION, GOOGLE_GENAI_USE_VERTEXAI.
        StreamFormat::Gemini => GEMINI,
        StreamFormat::Antigravity => &[
            "ANTIGRAVITY_*",
            "GEMINI_*",
            "GOOGLE_API_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_GENAI_USE_VERTEXAI",
        ],
        // Copilot CLI: COPILOT_GITHUB_TOKEN, GH_TOKEN, GITHUB_TOKEN,
        // COPILOT_MODEL, GH_HOST, …
        StreamFormat::Copilot => &["COPILOT_*", "GH_TOKEN", "GITHUB_TOKEN", "GH_HOST"],
        // A generic program documents nothing: pass-list what it needs.
        StreamFormat::Jsonl => &[],
    }
}

const GEMINI: &[&str] = &[
    "GEMINI_*",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_USE_VERTEXAI",
];

/// A pattern is a name or a `PREFIX*`.
fn matches(name: &str, pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

fn listed<S: AsRef<str>>(name: &str, patterns: &[S]) -> bool {
    patterns.iter().any(|p| matches(name, p.as_ref()))
}

/// Whether `filtered` passes `name` to an agent of `format`.
pub fn filtered_keeps(name: &str, format: StreamFormat, passlist: &[String]) -> bool {
    listed(name, BASE) || listed(name, format_variables(format)) || listed(name, passlist)
}

/// The child's environment from `parent`: the policy, then the agent's
/// `env_vars`, then what the invocation adds (those win). A variable whose
/// name is not UTF-8 cannot be matched against a list: only `inherit`
/// passes it.
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    policy: EnvPolicy,
    format: StreamFormat,
    passlist: &[String],
    env_vars: &BTreeMap<String, String>,
    extra: &[(String, String)],
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(k, _)| match (policy, k.to_str()) {
            (EnvPolicy::Inherit, _) => true,
            (EnvPolicy::Filtered, Some(k)) => filtered_keeps(k, format, passlist),
            (EnvPolicy::Clean, Some(k)) => ESSENTIAL.contains(&k) || listed(k, passlist),
            (_, None) => false,
        })
        .collect();
    for (k, v) in env_vars.iter().chain(extra.iter().map(|(k, v)| (k, v))) {
        env.insert(k.into(), v.into());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a developer's shell tends to hold: credentials of every kind
    /// beside what programs need.
    fn parent() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("LC_TIME", "C"),
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_API_KEY", "o"),
            ("GH_TOKEN", "g"),
            ("AWS_SECRET_ACCESS_KEY", "w"),
            ("PGPASSWORD", "p"),
            ("DATABASE_URL", "postgres://u:p@h/db"),
            ("LD_PRELOAD", "/tmp/x.so"),
            ("KUBECONFIG", "/h/.kube/config"),
            ("SLACK_WEBHOOK_URL", "https://hooks"),
            ("CI_JOB_JWT", "jwt"),
            ("EDITOR", "vi"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
    }

    fn keys(m: &BTreeMap<OsString, OsString>) -> Vec<&str> {
        m.keys().map(|k| k.to_str().unwrap()).collect()
    }

    #[test]
    fn filtered_is_an_allowlist_per_format() {
        let none = BTreeMap::new();
        let e = child_env(
            parent(),
            EnvPolicy::Inherit,
            StreamFormat::Jsonl,
            &[],
            &none,
            &[],
        );
        assert_eq!(e.len(), parent().len());
        let e = child_env(
            parent(),
            EnvPolicy::Filtered,
            StreamFormat::Jsonl,
            &[],
            &none,
            &[],
        );
        assert_eq!(keys(&e), ["HOME", "LC_TIME", "PATH"]);
        let e = child_env(
            parent(),
            EnvPolicy::Filtered,
            StreamFormat::Claude,
            &[],
            &none,
            &[],
        );
        assert_eq!(keys(&e), ["ANTHROPIC_API_KEY", "HOME", "LC_TIME", "PATH"]);
        let e = child_env(
            parent(),
            EnvPolicy::Filtered,
            StreamFormat::Codex,
            &[],
            &none,
            &[],
        );
        assert_eq!(keys(&e), ["HOME", "LC_TIME", "OPENAI_API_KEY", "PATH"]);
        let e = child_env(
            parent(),
            EnvPolicy::Filtered,
            StreamFormat::Copilot,
            &[],
            &none,
            &[],
        );
        assert_eq!(keys(&e), ["GH_TOKEN", "HOME", "LC_TIME", "PATH"]);
        let pass = vec!["KUBE*".to_string(), "EDITOR".to_string()];
        let e = child_env(
            parent(),
            EnvPolicy::Filtered,
            StreamFormat::Jsonl,
            &pass,
            &none,
            &[],
        );
        assert_eq!(
            keys(&e),
            ["EDITOR", "HOME", "KUBECONFIG", "LC_TIME", "PATH"]
        );
        let e = child_env(
            parent(),
            EnvPolicy::Clean,
            StreamFormat::Claude,
            &pass,
            &none,
            &[],
        );
        assert_eq!(
            keys(&e),
            ["EDITOR", "HOME", "KUBECONFIG", "PATH"],
            "stricter"
        );
    }

    #[test]
    fn env_vars_and_extras_win() {
        let mut vars = BTreeMap::new();
        vars.insert("EDITOR".to_string(), "nano".to_string());
        vars.insert("OPENAI_BASE_URL".to_string(), "http://x".to_string());
        let extra = vec![("EDITOR".to_string(), "ed".to_string())];
        let e = child_env(
            parent(),
            EnvPolicy::Filtered,
            StreamFormat::Claude,
            &[],
            &vars,
            &extra,
        );
        assert_eq!(e[&OsString::from("EDITOR")], "ed");
        // Set explicitly by the agent's definition: not stripped.
        assert_eq!(e[&OsString::from("OPENAI_BASE_URL")], "http://x");
    }
}

#[cfg(test)]
mod non_utf8 {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn names_that_are_not_utf8_pass_only_under_inherit() {
        let odd = OsString::from_vec(vec![b'X', 0xff]);
        let parent = || vec![(odd.clone(), OsString::from("v"))];
        let none = BTreeMap::new();
        for (policy, kept) in [
            (EnvPolicy::Inherit, true),
            (EnvPolicy::Filtered, false),
            (EnvPolicy::Clean, false),
        ] {
            let e = child_env(parent(), policy, StreamFormat::Jsonl, &[], &none, &[]);
            assert_eq!(e.contains_key(&odd), kept, "{policy:?}");
        }
    }
}
