//! Whether an attempt continues the conversation an earlier attempt of its
//! operation had with the CLI, and what it is told when it does. Where the
//! CLI cannot continue, or its session store no longer has the session, the
//! attempt starts afresh and the operator is told why.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::super::argv::can_resume;
use super::super::def::{AgentDef, Continue, StreamFormat};
use crate::kernel::{CarryOn, Invocation};

/// What the attempt does with the conversation it was handed.
#[derive(Debug, Clone, PartialEq)]
pub enum Carry {
    /// Nothing to continue: the attempt's own prompt.
    None,
    /// Continues `session` with `prompt` in place of the instruction.
    Session { session: String, prompt: String },
    /// Starts afresh although there was a conversation; `why` is said.
    Fresh { why: String },
}

/// Decides for `inv`, given what the CLI can (`knows_resume`: gemini asked
/// about its `--resume`) and the child's environment (where its session
/// store is).
pub fn decide(
    def: &AgentDef,
    inv: &Invocation,
    knows_resume: bool,
    env: &BTreeMap<OsString, OsString>,
    cwd: &Path,
) -> Carry {
    let Some(c) = &inv.carry_on else {
        return Carry::None;
    };
    if def.continue_with == Continue::Fresh {
        return Carry::None;
    }
    let format = def.stream_format;
    if !can_resume(format) || !knows_resume {
        return Carry::Fresh {
            why: format!(
                "agent {:?} ({} format{}) cannot continue a conversation: attempt {} starts afresh, without the turns of session {}",
                def.name,
                format.as_str(),
                if can_resume(format) {
                    ", a version without --resume"
                } else {
                    ""
                },
                inv.attempt,
                c.session
            ),
        };
    }
    if let Err(looked) = in_store(format, &c.session, env, cwd) {
        return Carry::Fresh {
            why: format!(
                "agent {:?}: session {} is not in its store (looked in {}): attempt {} starts afresh",
                def.name,
                c.session,
                looked.display(),
                inv.attempt
            ),
        };
    }
    Carry::Session {
        session: c.session.to_string(),
        prompt: continuation(c, &inv.instruction),
    }
}

/// What a continued session is told: what ended the attempt before, the
/// task again (a CLI that lost the session silently still has it; the
/// context, which may be large, is in the earlier turns), and what the
/// operator said when they sent it back.
pub fn continuation(c: &CarryOn, instruction: &str) -> String {
    let mut p = format!(
        "Your previous attempt at this task stopped before it was done ({}). Carry on from where you left off. The task, as given before:\n\n{instruction}",
        c.ended
    );
    if let Some(note) = &c.note {
        p.push_str("\n\nThe operator says: ");
        p.push_str(note);
    }
    p
}

/// The warning when a CLI was asked to continue `asked` and named another
/// session: it began a new one (codex 0.47 does so, silently, when the
/// old one is gone).
pub fn not_continued(def: &AgentDef, asked: &str, named: &str) -> Option<String> {
    (asked != named).then(|| {
        format!(
            "agent {:?} did not continue session {asked}: it began {named}, without the earlier turns",
            def.name
        )
    })
}

fn var<'a>(env: &'a BTreeMap<OsString, OsString>, name: &str) -> Option<&'a OsStr> {
    env.get(OsStr::new(name))
        .map(OsString::as_os_str)
        .filter(|v| !v.is_empty())
}

/// Whether the CLI's session store holds `session` for `cwd`, where it can
/// be told; `Err` names where it looked. Formats whose store playdeck does
/// not read pass here, and their stream says afterwards.
fn in_store(
    format: StreamFormat,
    session: &str,
    env: &BTreeMap<OsString, OsString>,
    cwd: &Path,
) -> Result<(), PathBuf> {
    let home = var(env, "HOME").map(PathBuf::from);
    match format {
        // ~/.claude/projects/<the directory, each non-alphanumeric a '-'>/
        // <id>.jsonl; claude 2.0 finds a session only from its directory.
        StreamFormat::Claude => {
            let Some(config) = var(env, "CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".claude")))
            else {
                return Ok(());
            };
            // claude names the directory as its process sees it: whole,
            // links resolved (a run from the play's directory works in `.`).
            let cwd = std::fs::canonicalize(cwd)
                .or_else(|_| std::path::absolute(cwd))
                .unwrap_or_else(|_| cwd.to_path_buf());
            let slug: String = cwd
                .display()
                .to_string()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let file = config
                .join("projects")
                .join(slug)
                .join(format!("{session}.jsonl"));
            if file.is_file() { Ok(()) } else { Err(file) }
        }
        // $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl.
        StreamFormat::Codex => {
            let Some(codex_home) = var(env, "CODEX_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".codex")))
            else {
                return Ok(());
            };
            let sessions = codex_home.join("sessions");
            let suffix = format!("-{session}.jsonl");
            if holds(&sessions, &suffix, 4) {
                Ok(())
            } else {
                Err(sessions)
            }
        }
        _ => Ok(()),
    }
}

/// Whether a file whose name ends in `suffix` is under `dir`, `depth`
/// levels down at most.
fn holds(dir: &Path, suffix: &str, depth: u32) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        match e.file_type() {
            Ok(t) if t.is_dir() => depth > 0 && holds(&e.path(), suffix, depth - 1),
            Ok(_) => name.to_string_lossy().ends_with(suffix),
            Err(_) => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::AgentEvents;
    use std::sync::Arc;

    fn inv(carry: Option<CarryOn>) -> Invocation {
        Invocation {
            op_id: uuid::Uuid::nil(),
            name: Arc::from("op"),
            role: None,
            instruction: Arc::from("write the tests"),
            params: Arc::new(serde_json::Value::Null),
            context: serde_json::Map::new(),
            attempt: 2,
            events: AgentEvents::detached(),
            instance: None,
            workspace: None,
            profile: None,
            usd_headroom: None,
            carry_on: carry,
            land_only: false,
        }
    }

    fn carry(session: &str) -> CarryOn {
        CarryOn {
            session: Arc::from(session),
            ended: Arc::from("rate_limited: 429"),
            note: None,
            by: None,
        }
    }

    fn env_home(home: &Path) -> BTreeMap<OsString, OsString> {
        [(OsString::from("HOME"), home.as_os_str().to_owned())].into()
    }

    #[test]
    fn claude_continues_a_session_its_store_has_for_this_directory() {
        let home = tempfile::tempdir().unwrap();
        let cwd = Path::new("/srv/work.x_y");
        let dir = home.path().join(".claude/projects/-srv-work-x-y");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s-1.jsonl"), "{}\n").unwrap();
        let def = AgentDef::new("claude", "claude", StreamFormat::Claude);
        let env = env_home(home.path());
        match decide(&def, &inv(Some(carry("s-1"))), true, &env, cwd) {
            Carry::Session { session, prompt } => {
                assert_eq!(session, "s-1");
                assert!(prompt.contains("(rate_limited: 429)"), "{prompt}");
            }
            other => panic!("{other:?}"),
        }
        // Another directory's session, or one that is gone: afresh, said.
        let Carry::Fresh { why } = decide(
            &def,
            &inv(Some(carry("s-1"))),
            true,
            &env,
            Path::new("/srv/other"),
        ) else {
            panic!()
        };
        assert!(why.contains("session s-1 is not in its store"), "{why}");
        assert!(why.contains("-srv-other/s-1.jsonl"), "{why}");
        assert_eq!(decide(&def, &inv(None), true, &env, cwd), Carry::None);
    }

    /// An operation in the play's own directory works in `.`: its
    /// session is under the slug of the whole directory, as claude named it.
    #[test]
    fn claude_finds_a_session_of_a_relative_directory_under_its_whole_name() {
        let home = tempfile::tempdir().unwrap();
        let here = std::env::current_dir().unwrap();
        let slug: String = std::fs::canonicalize(&here)
            .unwrap()
            .display()
            .to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = home.path().join(".claude/projects").join(slug);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s-2.jsonl"), "{}\n").unwrap();
        let def = AgentDef::new("claude", "claude", StreamFormat::Claude);
        let env = env_home(home.path());
        let got = decide(&def, &inv(Some(carry("s-2"))), true, &env, Path::new("."));
        assert!(matches!(got, Carry::Session { .. }), "{got:?}");
    }

    #[test]
    fn codex_looks_for_the_rollout_under_codex_home() {
        let home = tempfile::tempdir().unwrap();
        let day = home.path().join("c/sessions/2026/12/04");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(day.join("rollout-2026-12-04T10-00-00-t-9.jsonl"), "").unwrap();
        let def = AgentDef::new("codex", "codex", StreamFormat::Codex);
        let mut env = env_home(home.path());
        env.insert("CODEX_HOME".into(), home.path().join("c").into_os_string());
        assert!(matches!(
            decide(&def, &inv(Some(carry("t-9"))), true, &env, Path::new("/w")),
            Carry::Session { .. }
        ));
        assert!(matches!(
            decide(&def, &inv(Some(carry("t-8"))), true, &env, Path::new("/w")),
            Carry::Fresh { .. }
        ));
    }

    #[test]
    fn fresh_by_choice_is_silent_and_a_cli_that_cannot_is_said() {
        let env = BTreeMap::new();
        let mut def = AgentDef::new("g", "gemini", StreamFormat::Gemini);
        let Carry::Fresh { why } =
            decide(&def, &inv(Some(carry("u"))), false, &env, Path::new("/"))
        else {
            panic!()
        };
        assert!(why.contains("a version without --resume"), "{why}");
        def.continue_with = Continue::Fresh;
        assert_eq!(
            decide(&def, &inv(Some(carry("u"))), true, &env, Path::new("/")),
            Carry::None
        );
        let ag = AgentDef::new("a", "antigravity", StreamFormat::Antigravity);
        assert!(matches!(
            decide(&ag, &inv(Some(carry("u"))), true, &env, Path::new("/")),
            Carry::Fresh { .. }
        ));
    }

    #[test]
    fn the_operators_note_follows_what_ended_the_attempt() {
        let mut c = carry("s");
        c.note = Some(Arc::from("use the fixture in tests/data"));
        let p = continuation(&c, "write the tests");
        assert!(p.contains("as given before:\n\nwrite the tests\n\n"), "{p}");
        assert!(
            p.ends_with("The operator says: use the fixture in tests/data"),
            "{p}"
        );
        let def = AgentDef::new("codex", "codex", StreamFormat::Codex);
        assert_eq!(not_continued(&def, "a", "a"), None);
        assert!(
            not_continued(&def, "a", "b")
                .unwrap()
                .contains("it began b")
        );
    }
}
