//! `[capacity]` and `[role_profiles.<name>]`, validated with positions, all
//! problems at once.

use std::path::Path;

use indexmap::IndexMap;

use super::diag::{Diagnostic, did_you_mean};
use super::reader::{Reader, Table};
use super::{OpDef, is_valid_name};
use crate::agents::AgentDef;
use crate::agents::argv::thinking_control;
use crate::capacity::config::{
    CapacityConfig, DEFAULT_MAX_NODES, DEFAULT_NAME_TEMPLATE, Lifetime, Reuse, RoleProfile,
    Thinking, WorkspaceMode, find_repo_root, render_name, sets_model_or_thinking,
};
use crate::palette::{Catalog, PaletteConfig, canonical};

const CAPACITY_KEYS: &[&str] = &[
    "enabled",
    "max_nodes",
    "default_lifetime",
    "name_template",
    "reuse",
];
const PROFILE_KEYS: &[&str] = &[
    "role",
    "provider",
    "model",
    "thinking",
    "workspace_mode",
    "workspace_group",
    "startup_args",
    "provider_profile",
    "max_instances",
    "reuse",
    "lifetime",
    "tools",
    "pinned",
    "review",
];

pub(super) fn read(
    r: &mut Reader,
    root: &Table<'_, '_>,
    palette: &PaletteConfig,
    dir: &Path,
    agents: &std::collections::BTreeMap<String, AgentDef>,
) -> Option<CapacityConfig> {
    let cap = root.get("capacity");
    let profiles_v = root.get("role_profiles");
    if cap.is_none() && profiles_v.is_none() {
        return None;
    }
    let mut cfg = CapacityConfig {
        enabled: true,
        max_nodes: DEFAULT_MAX_NODES,
        default_lifetime: Lifetime::CurrentRound,
        name_template: DEFAULT_NAME_TEMPLATE.to_string(),
        reuse: Reuse::PreferIdle,
        profiles: IndexMap::new(),
        repo_root: find_repo_root(dir),
        workspace: dir.to_path_buf(),
    };
    let mut explicit_max = None;
    let cap_table = cap.and_then(|v| r.table(v, "[capacity]"));
    match &cap_table {
        Some(t) => {
            t.deny_unknown(r, CAPACITY_KEYS);
            if let Some((b, _)) = t.bool(r, "enabled") {
                cfg.enabled = b;
            }
            if let Some((n, span)) = t.int(r, "max_nodes", 1, 1000) {
                cfg.max_nodes = n as u32;
                explicit_max = Some(span);
            }
            if let Some((l, _)) = t.choice(r, "default_lifetime", Lifetime::ALLOWED) {
                cfg.default_lifetime = Lifetime::parse(&l).expect("checked");
            }
            if let Some((reuse, _)) = t.choice(r, "reuse", Reuse::ALLOWED) {
                cfg.reuse = Reuse::parse(&reuse).expect("checked");
            }
            if let Some((tpl, span)) = t.string(r, "name_template") {
                check_template(r, &tpl, span);
                cfg.name_template = tpl;
            }
        }
        None if cap.is_none() => {
            let span = root.key_span("role_profiles");
            r.push(
                Diagnostic::new(
                    span,
                    "[role_profiles] needs a [capacity] table",
                    "no [capacity]",
                )
                .help("add [capacity] with enabled = true (and max_nodes) to use role profiles"),
            );
        }
        None => {}
    }

    // Where each profile is, and its `pinned` key, for checks across them.
    let mut spans: IndexMap<String, (super::Span, Option<super::Span>)> = IndexMap::new();
    if let Some(v) = profiles_v
        && let Some(t) = r.table(v, "[role_profiles]")
    {
        for (name, span, pv) in t.entries() {
            if !is_valid_name(name) {
                r.push(
                    Diagnostic::new(
                        span,
                        format!("role profile name {name:?} is not a valid name"),
                        "invalid name",
                    )
                    .help("names match ^[A-Za-z0-9][A-Za-z0-9._-]*$"),
                );
                broken_profile(r, name, pv, palette);
                continue;
            }
            if let Some(pt) = r.table(pv, &format!("[role_profiles.{name}]"))
                && let Some(p) = read_profile(r, &pt, name, palette, &cfg, agents)
            {
                let pinned = pt.contains("pinned").then(|| pt.key_span("pinned"));
                spans.insert(name.to_string(), (span.clone(), pinned));
                cfg.profiles.insert(name.to_string(), p);
            } else {
                broken_profile(r, name, pv, palette);
            }
        }
    }
    // A profile that could not be read is left out of the sums below;
    // checking them would report what follows from its error, not a
    // second one (and advise the wrong fix).
    let unread = !r.broken.profiles.is_empty();

    let cap_span = cap_table
        .as_ref()
        .map_or(0..0, |t| t.span.start..t.span.start);
    if cfg.enabled && cfg.profiles.is_empty() && profiles_v.is_none() {
        r.push(
            Diagnostic::new(cap_span, "[capacity] is enabled but no role profile is configured", "no profiles")
                .help("add [role_profiles.<name>] with role, provider and max_instances, or set enabled = false"),
        );
    }
    let total: u32 = cfg.profiles.values().map(|p| p.max_instances).sum();
    match explicit_max {
        Some(_) if unread => {}
        Some(span) if !cfg.profiles.is_empty() && cfg.max_nodes > total => r.push(
            Diagnostic::new(
                span,
                format!(
                    "max_nodes {} is greater than the sum of max_instances ({total})",
                    cfg.max_nodes
                ),
                "more nodes than profiles allow",
            )
            .help(format!(
                "set max_nodes to at most {total}, or raise max_instances"
            )),
        ),
        None if total > 0 => cfg.max_nodes = cfg.max_nodes.min(total),
        _ => {}
    }
    if !unread {
        check_pinned_nodes(r, &cfg, &spans);
    }
    let template_span = cap_table
        .as_ref()
        .filter(|t| t.contains("name_template"))
        .map(|t| t.key_span("name_template"));
    check_unique_names(r, &cfg, &spans, template_span);
    Some(cfg)
}

/// Records a role profile that failed to read (its error is reported),
/// with the role it is for when that much reads, so what names it, or
/// would run on it, is not reported again. A role that is none (a typo)
/// says nothing of which role was meant.
fn broken_profile(r: &mut Reader, name: &str, v: &super::reader::Val<'_>, palette: &PaletteConfig) {
    let quiet = &mut Reader::default();
    let role = quiet
        .table(v, name)
        .and_then(|t| t.string(quiet, "role"))
        .map(|(role, _)| canonical(&role))
        .filter(|role| {
            Catalog::builtin().role(role).is_some() || palette.profiles.contains_key(role)
        });
    r.broken.profiles.insert(name.to_string(), role);
}

/// The declared pinned instances are made when the run starts: together
/// they must fit `max_nodes`.
fn check_pinned_nodes(
    r: &mut Reader,
    cfg: &CapacityConfig,
    spans: &IndexMap<String, (super::Span, Option<super::Span>)>,
) {
    let mut sum = 0;
    for p in cfg.profiles.values() {
        sum += p.pinned;
        if p.pinned > 0 && sum > cfg.max_nodes {
            let span = spans
                .get(&p.name)
                .and_then(|(_, s)| s.clone())
                .unwrap_or(0..0);
            r.push(
                Diagnostic::new(
                    span,
                    format!(
                        "the declared pinned instances need {sum} nodes; max_nodes is {}",
                        cfg.max_nodes
                    ),
                    "more pinned instances than nodes",
                )
                .help("lower pinned, or raise max_nodes (and max_instances)"),
            );
            return;
        }
    }
    // Pinned instances that take every node leave none for the other
    // profiles: their operations would fail when the run starts.
    let starved: Vec<&str> = cfg
        .profiles
        .values()
        .filter(|p| p.pinned == 0)
        .map(|p| p.name.as_str())
        .collect();
    if sum > 0 && sum == cfg.max_nodes && !starved.is_empty() {
        let span = cfg
            .profiles
            .values()
            .find(|p| p.pinned > 0)
            .and_then(|p| spans.get(&p.name)?.1.clone())
            .unwrap_or(0..0);
        r.warn(
            span,
            format!(
                "the pinned instances take all {} of max_nodes, so role profile(s) {} can never start an instance: their operations fail when the run starts (raise max_nodes, or lower pinned)",
                cfg.max_nodes,
                starved.join(", ")
            ),
        );
    }
}

/// Instance names key worktrees, branches and lookups: two instances must
/// never get one name. Every profile × index up to its `max_instances`
/// is rendered (with a sample run id); a name rendered twice is an error.
/// (Past `max_instances` — instances released and made again — a name
/// already taken is passed over at run time.)
fn check_unique_names(
    r: &mut Reader,
    cfg: &CapacityConfig,
    spans: &IndexMap<String, (super::Span, Option<super::Span>)>,
    template_span: Option<super::Span>,
) {
    let mut seen: std::collections::HashMap<String, (&str, u32)> = Default::default();
    for p in cfg.profiles.values() {
        for index in 1..=p.max_instances {
            let name = render_name(&cfg.name_template, SAMPLE_RUN_ID, &p.name, index);
            if let Some((other, other_index)) = seen.get(&name) {
                let span = template_span
                    .clone()
                    .or_else(|| spans.get(&p.name).map(|(s, _)| s.clone()))
                    .unwrap_or(0..0);
                r.push(
                    Diagnostic::new(
                        span,
                        format!(
                            "name_template {:?} gives profile {other} (instance {other_index}) and profile {} (instance {index}) the same name {name:?}",
                            cfg.name_template, p.name
                        ),
                        "instance names collide",
                    )
                    .help("put a separator between {profile} and {index} (as in \"loop-{loop_id}-{profile}-{index}\"), or rename a profile"),
                );
                return;
            }
            seen.insert(name, (&p.name, index));
        }
    }
}

/// A run id of the shape runs get, for rendering sample names.
const SAMPLE_RUN_ID: &str = "20261129-120000-ab12";

fn check_template(r: &mut Reader, tpl: &str, span: super::Span) {
    let missing: Vec<&str> = ["{loop_id}", "{profile}", "{index}"]
        .into_iter()
        .filter(|p| !tpl.contains(p))
        .collect();
    if !missing.is_empty() {
        r.push(
            Diagnostic::new(span, format!("name_template is missing {}", missing.join(", ")), "incomplete template")
                .help("the template must contain {loop_id}, {profile} and {index}, so names are deterministic and never collide"),
        );
        return;
    }
    let sample = render_name(tpl, SAMPLE_RUN_ID, "coder", 1);
    if !is_valid_name(&sample) {
        r.push(
            Diagnostic::new(
                span,
                format!("name_template renders to an invalid name ({sample:?})"),
                "invalid names",
            )
            .help("names match ^[A-Za-z0-9][A-Za-z0-9._-]*$"),
        );
    }
}

fn read_profile(
    r: &mut Reader,
    t: &Table<'_, '_>,
    name: &str,
    palette: &PaletteConfig,
    cfg: &CapacityConfig,
    agents: &std::collections::BTreeMap<String, AgentDef>,
) -> Option<RoleProfile> {
    t.deny_unknown(r, PROFILE_KEYS);
    let before = r.diags.len();
    let catalog = Catalog::builtin();
    let role = t
        .require(r, "role", "\"implementer\"")
        .and_then(|_| t.string(r, "role"));
    if let Some((role, span)) = &role {
        let canon = canonical(role);
        if catalog.role(&canon).is_none()
            && !palette.profiles.contains_key(&canon)
            // A user profile with errors: reported where it is defined.
            && !r.broken.user_profiles.contains(&canon)
        {
            let mut known = catalog.role_names();
            known.extend(palette.profiles.keys().map(String::as_str));
            let mut help = format!("available roles: {}", known.join(", "));
            if let Some(m) = did_you_mean(&canon, known.iter().copied()) {
                help = format!("did you mean \"{m}\"? {help}");
            }
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("role profile {name} names unknown role {role:?}"),
                    "unknown role",
                )
                .help(help),
            );
        }
    }
    let provider = t
        .require(r, "provider", "\"sim\"")
        .and_then(|_| super::agents_section::read_agent_ref(r, t, "provider", agents));
    let max = t
        .require(r, "max_instances", "2")
        .and_then(|_| t.int(r, "max_instances", 1, 1000));
    let model = t.string(r, "model");
    let thinking = t.choice(r, "thinking", Thinking::ALLOWED);
    // A provider that cannot take a thinking level fails visibly (spec:
    // never silently ignored).
    if let (Some((_, span)), Some(p)) = (&thinking, provider.as_ref().and_then(|p| agents.get(p)))
        && thinking_control(p.stream_format).is_none()
    {
        r.push(
            Diagnostic::new(
                span.clone(),
                format!(
                    "role profile {name} sets thinking, but agent {:?} ({} format) has no thinking control",
                    p.name,
                    p.stream_format.as_str()
                ),
                "unsupported by the provider",
            )
            .help("thinking maps to claude (MAX_THINKING_TOKENS), codex (model_reasoning_effort) and jsonl (PLAYDECK_THINKING) agents; remove thinking or use one of those"),
        );
    }
    let mode = match t.choice(r, "workspace_mode", WorkspaceMode::ALLOWED) {
        Some((m, span)) => {
            let mode = WorkspaceMode::parse(&m).expect("checked");
            if mode == WorkspaceMode::GitWorktree && cfg.repo_root.is_none() {
                r.push(
                    Diagnostic::new(span, format!("role profile {name} uses git-worktree, but the play is not in a git repository"), "no git repository")
                        .help(format!("move the play into a git repository, or use workspace_mode = \"inplace\" (looked from {})", cfg.workspace.display())),
                );
            }
            mode
        }
        None => WorkspaceMode::Inplace,
    };
    let group = t.string(r, "workspace_group");
    if let Some((_, span)) = &group
        && mode != WorkspaceMode::GitWorktree
    {
        r.push(
            Diagnostic::new(
                span.clone(),
                format!("workspace_group of {name} applies only to git-worktree"),
                "conflicts with workspace_mode",
            )
            .help("set workspace_mode = \"git-worktree\", or remove workspace_group"),
        );
    }
    let mut startup_args = Vec::new();
    let args = t.strings(r, "startup_args").unwrap_or_default();
    // codex's `-p` is its config profile (elsewhere playdeck's own print
    // or prompt flag, which it sets itself).
    let codex = provider
        .as_ref()
        .and_then(|p| agents.get(p))
        .is_some_and(|d| d.stream_format == crate::agents::StreamFormat::Codex);
    let mut i = 0;
    while i < args.len() {
        let (arg, span) = &args[i];
        // The flag forms, and codex's config overrides in every form
        // (`-c model=o3`, `--config=model=o3`, `-cmodel=o3`): all refused
        // here, at their position, rather than dropped when argv is built.
        let (what, shown, used) = match arg.as_str() {
            "-c" | "--config" => match args.get(i + 1) {
                Some((kv, _)) => (
                    crate::capacity::config::config_sets_model_or_thinking(kv),
                    format!("{arg} {kv}"),
                    2,
                ),
                None => (None, arg.clone(), 1),
            },
            _ => match crate::capacity::config::inline_config(arg) {
                Some(kv) => (
                    crate::capacity::config::config_sets_model_or_thinking(kv),
                    arg.clone(),
                    1,
                ),
                None if codex && (arg == "-p" || arg.starts_with("-p")) => (
                    Some("the model (a config profile)"),
                    match args.get(i + 1).filter(|_| arg == "-p") {
                        Some((v, _)) => format!("{arg} {v}"),
                        None => arg.clone(),
                    },
                    if arg == "-p" && i + 1 < args.len() {
                        2
                    } else {
                        1
                    },
                ),
                None => (sets_model_or_thinking(arg), arg.clone(), 1),
            },
        };
        match what {
            Some(what) => r.push(
                Diagnostic::new(span.clone(), format!("startup_args of {name} sets {what} ({shown})"), "conflicts with the profile")
                    .help("use the profile's `model` and `thinking` fields; startup_args may not set them"),
            ),
            None => startup_args.extend(args[i..i + used].iter().map(|(a, _)| a.clone())),
        }
        i += used;
    }
    let provider_profile = t.string(r, "provider_profile");
    if let Some((pp, span)) = &provider_profile
        && !is_valid_name(pp)
    {
        r.push(
            Diagnostic::new(
                span.clone(),
                format!("provider_profile {pp:?} of {name} is not a valid name"),
                "invalid name",
            )
            .help("names match ^[A-Za-z0-9][A-Za-z0-9._-]*$"),
        );
    }
    let reuse = t.choice(r, "reuse", Reuse::ALLOWED);
    let lifetime = t.choice(r, "lifetime", Lifetime::ALLOWED);
    let pinned = t.int(r, "pinned", 0, 1000);
    if let Some((n, span)) = &pinned {
        let effective = reuse
            .as_ref()
            .and_then(|(x, _)| Reuse::parse(x))
            .unwrap_or(cfg.reuse);
        if effective != Reuse::Pinned {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!(
                        "pinned of {name} declares pinned instances, but its reuse is {effective}"
                    ),
                    "needs reuse = \"pinned\"",
                )
                .help("set reuse = \"pinned\" on the profile (or in [capacity]), or remove pinned"),
            );
        } else if let Some((max, _)) = &max
            && n > max
        {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("pinned = {n} of {name} is more than its max_instances {max}"),
                    "more than max_instances",
                )
                .help(format!(
                    "declare at most {max} pinned instances, or raise max_instances"
                )),
            );
        }
    }
    let tools = super::agents_section::read_tools(r, t, "tools");
    match provider.as_deref().map(|p| (p, agents.get(p))) {
        Some((p, None)) => {
            // The built-in agents run no model: recorded, but nothing uses it.
            for (key, set) in [("model", model.is_some()), ("thinking", thinking.is_some())] {
                if set {
                    r.warn(
                        t.key_span(key),
                        format!("{key} of role profile {name} has no effect: its provider {p:?} is a built-in agent, which runs no model"),
                    );
                }
            }
        }
        Some((_, Some(def))) => {
            if let Some(tools) = &tools
                && let Err(e) = crate::agents::argv::check_toolset(def.stream_format, tools)
            {
                r.push(super::agents_section::toolset_refused(
                    t.key_span("tools"),
                    &e,
                ));
            }
            warn_overridden_flags(r, t, name, def, model.as_ref(), thinking.as_ref());
        }
        None => {}
    }
    // Options only agent CLIs take would be silently ignored on a built-in
    // provider.
    if let Some(p) = provider.as_deref().filter(|p| !agents.contains_key(*p)) {
        for key in ["tools", "provider_profile"] {
            if t.contains(key) {
                r.push(
                    Diagnostic::new(
                        t.key_span(key),
                        format!("{key} of role profile {name} has no effect: its provider {p:?} is a built-in agent"),
                        "ignored by this provider",
                    )
                    .help("name an agent defined under [agents.<name>] as the provider, or remove it"),
                );
            }
        }
    }
    if r.diags.len() > before {
        return None;
    }
    Some(RoleProfile {
        name: name.to_string(),
        role: canonical(&role?.0),
        provider: provider?,
        model: model.map(|(m, _)| m),
        thinking: thinking.and_then(|(t, _)| Thinking::parse(&t)),
        workspace_mode: mode,
        workspace_group: group.map(|(g, _)| g),
        startup_args,
        provider_profile: provider_profile.map(|(p, _)| p),
        max_instances: max?.0 as u32,
        reuse: reuse.and_then(|(x, _)| Reuse::parse(&x)),
        lifetime: lifetime.and_then(|(x, _)| Lifetime::parse(&x)),
        tools,
        pinned: pinned.map_or(0, |(n, _)| n as u32),
        review: t.bool(r, "review").is_some_and(|(b, _)| b),
    })
}

/// A role profile's `model` and `thinking` win over flags of the same
/// meaning in its provider's flag profiles: those flags have no effect on
/// its instances, and validation says which.
fn warn_overridden_flags(
    r: &mut Reader,
    t: &Table<'_, '_>,
    name: &str,
    def: &AgentDef,
    model: Option<&(String, std::ops::Range<usize>)>,
    thinking: Option<&(String, std::ops::Range<usize>)>,
) {
    use crate::agents::argv::{model_flags, split_flags, thinking_flags};
    let format = def.stream_format;
    for (key, set, table) in [
        ("model", model, model_flags(format)),
        ("thinking", thinking, thinking_flags(format)),
    ] {
        let Some((value, _)) = set else { continue };
        for (profile, flags) in &def.flags {
            let (_, groups) = split_flags(&table, flags);
            for g in groups {
                r.warn(
                    t.key_span(key),
                    format!(
                        "flag profile {profile:?} of agent {:?} sets the {key} ({}); on role profile {name}'s instances its {key} = {value:?} wins and that flag is dropped",
                        def.name,
                        g.join(" ")
                    ),
                );
            }
        }
    }
}

/// An operation's explicit `profile` must exist, be for its role, and
/// needs capacity.
pub(super) fn check_op_profiles(r: &mut Reader, cfg: Option<&CapacityConfig>, ops: &[OpDef]) {
    warn_pinned_without_instances(r, cfg, ops);
    for op in ops {
        let (Some(p), Some(span)) = (&op.profile, &op.profile_span) else {
            continue;
        };
        let Some(cfg) = cfg else {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!(
                        "operation {:?} names profile {p:?}, but the play has no [capacity]",
                        op.id
                    ),
                    "no capacity",
                )
                .help("add [capacity] and [role_profiles.<name>], or remove profile"),
            );
            continue;
        };
        match cfg.profiles.get(p) {
            // Its definition's error is reported where it is written.
            None if r.broken.profiles.contains_key(p) => {}
            None => {
                let names: Vec<&str> = cfg.profiles.keys().map(String::as_str).collect();
                let broken: Vec<&str> = r.broken.profiles.keys().map(String::as_str).collect();
                // Never an empty list: say there is none, and how to add one.
                let mut help = match (names.is_empty(), broken.is_empty()) {
                    (true, true) => "no role profile is configured; define it under [role_profiles.<name>] with role, provider and max_instances, or remove profile".to_string(),
                    (true, false) => format!("no role profile reads without errors; with errors of their own: {}", broken.join(", ")),
                    (false, true) => format!("configured profiles: {}", names.join(", ")),
                    (false, false) => format!("configured profiles: {}; with errors of their own: {}", names.join(", "), broken.join(", ")),
                };
                if let Some(m) = did_you_mean(p, names.iter().chain(&broken).copied()) {
                    help = format!("did you mean {m:?}? {help}");
                }
                r.push(
                    Diagnostic::new(
                        span.clone(),
                        format!("operation {:?} names unknown profile {p:?}", op.id),
                        "unknown profile",
                    )
                    .help(help),
                );
            }
            Some(prof) if prof.role != op.role => r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("profile {p:?} is for role {}, not {}", prof.role, op.role),
                    "role mismatch",
                )
                .help(format!(
                    "operation {:?} has role {}; name a profile for that role",
                    op.id, op.role
                )),
            ),
            Some(_) => {}
        }
    }
}

/// An operation on a pinned profile that declares no instances runs only
/// if someone ensures one before it starts; otherwise it fails at once
/// with `capacity_unavailable`. Said at validation, where it can be fixed.
fn warn_pinned_without_instances(r: &mut Reader, cfg: Option<&CapacityConfig>, ops: &[OpDef]) {
    let Some(cfg) = cfg else { return };
    for op in ops {
        let Some(p) = cfg.profile_for(Some(&op.role), op.profile.as_deref()) else {
            continue;
        };
        if cfg.reuse_of(p) == Reuse::Pinned && p.pinned == 0 {
            let span = op
                .profile_span
                .clone()
                .unwrap_or_else(|| op.role_span.clone());
            r.warn(
                span,
                format!(
                    "operation {:?} runs on pinned profile {} that declares no instances: it fails with capacity_unavailable unless `playdeck capacity ensure --profile {}` made one before it starts; declare pinned = N in [role_profiles.{}]",
                    op.id, p.name, p.name, p.name
                ),
            );
        }
    }
}
