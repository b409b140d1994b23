//! The environment a child agent sees. `filtered` (the default) keeps
//! credentials of other providers and services out of agents that have no
//! business with them; what an agent does need is pass-listed by name.

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::def::EnvPolicy;

/// Prefixes of variables that carry credentials.
const SECRET_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "OPENAI_",
    "AZURE_",
    "GH_",
    "GITHUB_",
    "GITLAB_",
    "AWS_",
    "GOOGLE_",
    "GEMINI_",
    "GCP_",
    "CLOUDSDK_",
    "HF_",
    "HUGGINGFACE_",
    "OPENROUTER_",
    "MISTRAL_",
    "GROQ_",
    "DEEPSEEK_",
    "XAI_",
    "COHERE_",
    "COPILOT_",
    "DOCKER_",
    "NPM_",
    "PYPI_",
    "CARGO_REGISTRY_",
    "SSH_AUTH_SOCK",
];

/// Suffixes of variables that carry credentials, whatever the service.
const SECRET_SUFFIXES: &[&str] = &[
    "_TOKEN",
    "_SECRET",
    "_SECRET_KEY",
    "_API_KEY",
    "_APIKEY",
    "_ACCESS_KEY",
    "_PRIVATE_KEY",
    "_PASSWORD",
    "_PASSWD",
    "_CREDENTIALS",
    "_AUTH",
];

/// What a program needs to run at all; `clean` keeps only these.
const ESSENTIAL: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM",
    "TMPDIR", "TZ",
];

/// Whether `filtered` strips `name`.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
}

/// A pass-list entry is a name or a `PREFIX*` pattern.
fn passlisted(name: &str, passlist: &[String]) -> bool {
    passlist.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    })
}

/// The child's environment from `parent`: the policy, then the agent's
/// `env_vars`, then what the invocation adds (those win). A variable whose
/// name is not UTF-8 cannot be judged by name: `clean` drops it, the others
/// keep it.
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    policy: EnvPolicy,
    passlist: &[String],
    env_vars: &BTreeMap<String, String>,
    extra: &[(String, String)],
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(k, _)| match (policy, k.to_str()) {
            (EnvPolicy::Inherit, _) => true,
            (EnvPolicy::Filtered, Some(k)) => !looks_secret(k) || passlisted(k, passlist),
            (EnvPolicy::Filtered, None) => true,
            (EnvPolicy::Clean, Some(k)) => ESSENTIAL.contains(&k) || passlisted(k, passlist),
            (EnvPolicy::Clean, None) => false,
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

    fn parent() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_API_KEY", "o"),
            ("GH_TOKEN", "g"),
            ("AWS_SECRET_ACCESS_KEY", "w"),
            ("MY_SERVICE_TOKEN", "t"),
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
    fn policies() {
        let none = BTreeMap::new();
        let e = child_env(parent(), EnvPolicy::Inherit, &[], &none, &[]);
        assert_eq!(e.len(), 8);
        let e = child_env(parent(), EnvPolicy::Filtered, &[], &none, &[]);
        assert_eq!(keys(&e), ["EDITOR", "HOME", "PATH"]);
        let pass = vec!["ANTHROPIC_*".to_string(), "GH_TOKEN".to_string()];
        let e = child_env(parent(), EnvPolicy::Filtered, &pass, &none, &[]);
        assert_eq!(
            keys(&e),
            ["ANTHROPIC_API_KEY", "EDITOR", "GH_TOKEN", "HOME", "PATH"]
        );
        let e = child_env(parent(), EnvPolicy::Clean, &pass, &none, &[]);
        assert_eq!(keys(&e), ["ANTHROPIC_API_KEY", "GH_TOKEN", "HOME", "PATH"]);
    }

    #[test]
    fn env_vars_and_extras_win() {
        let mut vars = BTreeMap::new();
        vars.insert("EDITOR".to_string(), "nano".to_string());
        vars.insert("OPENAI_BASE_URL".to_string(), "http://x".to_string());
        let extra = vec![("EDITOR".to_string(), "ed".to_string())];
        let e = child_env(parent(), EnvPolicy::Filtered, &[], &vars, &extra);
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
    fn names_that_are_not_utf8_are_kept_unless_clean() {
        let odd = OsString::from_vec(vec![b'X', 0xff]);
        let parent = || vec![(odd.clone(), OsString::from("v"))];
        let none = BTreeMap::new();
        for (policy, kept) in [
            (EnvPolicy::Inherit, true),
            (EnvPolicy::Filtered, true),
            (EnvPolicy::Clean, false),
        ] {
            let e = child_env(parent(), policy, &[], &none, &[]);
            assert_eq!(e.contains_key(&odd), kept, "{policy:?}");
        }
    }
}
