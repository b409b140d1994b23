//! Read-only views for the command line: the catalog, a play's palette
//! plan, and the exact instruction an operation would receive.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::agents::argv::ArgvError;
use crate::kernel::{InstructionDecorator, Rejection, SpawnBudget};
use crate::palette::{Catalog, PaletteError, PaletteRouter};
use crate::play::Play;

/// Why a view could not be made: the operation or agent asked about, and
/// what the play has instead.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error(transparent)]
    Palette(#[from] PaletteError),
    #[error("no operation {op:?} in {file}; ids: {}", .ids.join(", "))]
    NoOperation {
        op: String,
        file: String,
        ids: Vec<String>,
    },
    #[error("--flag-profile: {0}")]
    FlagProfile(ArgvError),
    #[error(
        "operation {op:?} runs on the built-in agent {agent:?}, which has no command line; agent CLIs are defined under [agents.<name>] and chosen with `agent = \"<name>\"` (or a role profile's provider)"
    )]
    BuiltinAgent { op: String, agent: String },
    #[error(transparent)]
    Argv(ArgvError),
}

/// `playdeck catalog --json`.
pub fn catalog_json() -> Value {
    let c = Catalog::builtin();
    json!({
        "catalog": crate::palette::CATALOG_NAME,
        "roles": c.roles.iter().map(|(name, r)| json!({
            "name": name,
            "description": r.description,
            "emits": r.emits,
            "pack": r.pack,
        })).collect::<Vec<_>>(),
        "modes": c.modes.iter().map(|(name, m)| json!({"name": name, "description": m.description})).collect::<Vec<_>>(),
    })
}

/// `playdeck catalog`.
pub fn catalog_text() -> String {
    let c = Catalog::builtin();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "roles ({}), catalog \"{}\":",
        c.roles.len(),
        crate::palette::CATALOG_NAME
    );
    for (name, r) in &c.roles {
        let p = &r.pack;
        let _ = writeln!(s, "  {name:<22} {}", r.description);
        let _ = writeln!(
            s,
            "  {:<22} emits {} · model {} · effort {} · default modes {} · allows {}{}",
            "",
            r.emits.join(", "),
            p.model.as_deref().unwrap_or("-"),
            p.effort.map_or("-", |e| e.as_str()),
            if p.default_modes.is_empty() {
                "-".into()
            } else {
                p.default_modes.join(", ")
            },
            if p.modes_allow.is_empty() {
                "any mode".into()
            } else {
                p.modes_allow.join(", ")
            },
            if p.active { "" } else { " · inactive" },
        );
    }
    let _ = writeln!(s, "\nmodes ({}):", c.modes.len());
    for (name, m) in &c.modes {
        let _ = writeln!(s, "  {name:<14} {}", m.description);
    }
    s
}

/// A router for previews: no run directory, no simulated delay or failure.
fn preview_router(play: &Play) -> Arc<PaletteRouter> {
    crate::session::wiring::preview_router(play)
}

/// Provisions the initial palette and the planned expansions the way a run
/// would, without creating anything on disk.
async fn provisioned(
    play: &Play,
) -> Result<(Arc<PaletteRouter>, Vec<(String, Result<(), Rejection>)>), PaletteError> {
    let router = preview_router(play);
    router.provision_initial().await?;
    let mut outside: Vec<&str> = Vec::new();
    for op in &play.operations {
        if router.route(&op.role).is_none() && !outside.contains(&op.role.as_str()) {
            outside.push(&op.role);
        }
    }
    let mut planned = Vec::new();
    for role in outside {
        let outcome = router.resolve_planned(role).await.map(|_| ());
        planned.push((role.to_string(), outcome));
    }
    Ok((router, planned))
}

/// `playdeck palette PLAY --json`.
pub async fn palette_json(play: &Play) -> Result<Value, PaletteError> {
    let (router, planned) = provisioned(play).await?;
    let cfg = &play.palette;
    let roles: Vec<Value> = cfg
        .palette
        .roles
        .iter()
        .filter_map(|pr| router.route(&pr.role))
        .map(|r| {
            json!({
                "role": r.role,
                "disposition": r.disposition.as_str(),
                "modes": r.modes.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
                "model": r.model,
                "effort": r.effort.map(|e| e.as_str()),
                "agent": r.setup.as_ref().ok().map(|s| &s.agent),
                "profile": cfg.profiles.contains_key(&*r.role),
            })
        })
        .collect();
    Ok(json!({
        "play": play.name,
        "legacy": cfg.legacy,
        "planning_context": cfg.planning_context(),
        "initial": roles,
        "planned_expansions": planned.iter().map(|(role, outcome)| json!({
            "role": role,
            "outcome": match outcome {
                Ok(()) => "provisioned".to_string(),
                Err(rej) => format!("{}: {}", rej.reason.as_str(), rej.detail),
            },
        })).collect::<Vec<_>>(),
        "snapshot": router.snapshot(),
        "max_spawn": play.max_spawn,
        "simulate": cfg.simulate,
    }))
}

/// `playdeck palette PLAY`.
pub async fn palette_text(play: &Play) -> Result<String, PaletteError> {
    let v = palette_json(play).await?;
    let mut s = String::new();
    let ctx = &v["planning_context"];
    let _ = writeln!(
        s,
        "palette of \"{}\"{}",
        play.name,
        if play.palette.legacy {
            " (legacy roster: no [palette])"
        } else {
            ""
        }
    );
    let _ = writeln!(s, "\ninitial roles, provisioned before the run:");
    for r in v["initial"].as_array().into_iter().flatten() {
        let modes: Vec<&str> = r["modes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let _ = writeln!(
            s,
            "  {:<22} {:<17} model {:<7} effort {:<7} modes {}{}",
            r["role"].as_str().unwrap_or(""),
            r["disposition"].as_str().unwrap_or(""),
            r["model"].as_str().unwrap_or("-"),
            r["effort"].as_str().unwrap_or("-"),
            if modes.is_empty() {
                "-".into()
            } else {
                modes.join(", ")
            },
            if r["profile"] == true {
                "  (user profile)"
            } else {
                ""
            },
        );
    }
    let exp: Vec<&str> = ctx["expansion_only_roles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = writeln!(
        s,
        "\nexpansion-only roles: {}",
        if exp.is_empty() {
            "-".into()
        } else {
            exp.join(", ")
        }
    );
    let _ = writeln!(
        s,
        "budgets: max_new_roles {} (orchestrator may expand: {}), max_spawn {}",
        ctx["max_new_roles"], ctx["orchestrator_may_expand"], v["max_spawn"]
    );
    let planned = v["planned_expansions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !planned.is_empty() {
        let _ = writeln!(
            s,
            "\nroles outside the palette named by operations (recruited at the start, as the orchestrator):"
        );
        for p in planned {
            let _ = writeln!(
                s,
                "  {:<22} {}",
                p["role"].as_str().unwrap_or(""),
                p["outcome"].as_str().unwrap_or("")
            );
        }
    }
    Ok(s)
}

/// `playdeck prompt PLAY --op ID`: the instruction with the delegation
/// clause, as the operation's agent would receive it at the start of a run.
pub async fn prompt(play: &Play, op: &str) -> Result<String, InspectError> {
    let Some(def) = play.op(op) else {
        return Err(InspectError::NoOperation {
            op: op.to_string(),
            file: play.file.to_string(),
            ids: play.operations.iter().map(|o| o.id.clone()).collect(),
        });
    };
    let (router, _) = provisioned(play).await?;
    let instruction: Arc<str> = Arc::from(def.instruction.as_str());
    Ok(router
        .decorate(
            Some(&def.role),
            &instruction,
            SpawnBudget {
                accepted: 0,
                max: play.max_spawn,
            },
        )
        .to_string())
}

/// What `playdeck argv` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgvView {
    pub agent: String,
    pub command: crate::agents::argv::BuiltCommand,
}

/// The command line of an operation's agent CLI, with the prompt it would
/// get at the start of a run (its decorated instruction and the play's
/// context; predecessor results join the context only when they exist).
pub async fn argv(
    play: &Play,
    op: &str,
    flag_profile: Option<&str>,
) -> Result<ArgvView, InspectError> {
    if let Some(p) = flag_profile {
        crate::agents::argv::check_profile_name(p).map_err(InspectError::FlagProfile)?;
    }
    let instruction = prompt(play, op).await?;
    let def = play.op(op).expect("prompt() found it");
    let agent = play.runs_on(def);
    let Some(agent_def) = play.agents.get(agent) else {
        return Err(InspectError::BuiltinAgent {
            op: op.to_string(),
            agent: agent.to_string(),
        });
    };
    let mut params = crate::agents::AgentParams::from_value(&def.params());
    if let Some(p) = flag_profile {
        params.flag_profile = Some(p.to_string());
    }
    let ctx =
        crate::session::wiring::run_context(play, "preview", None, crate::agents::Tails::new());
    let prompt_text = crate::agents::command::prompt_text(&instruction, &play.context);
    let profile = play.profile_for(def).map(|p| p.name.as_str());
    let command = crate::agents::command::command_for(
        agent_def,
        &ctx,
        &params,
        profile,
        &prompt_text,
        None,
        None,
        None,
    )
    .map_err(InspectError::Argv)?;
    Ok(ArgvView {
        agent: agent.to_string(),
        command,
    })
}
