//! `[palette]`, `[pack.roles.<name>]` and `[profiles.<name>]`: read and
//! validated with ADR-0036 D1's rules, every problem with its position,
//! before any operation, route, artifact directory or reservation exists.

mod packs;
use packs::*;

use std::collections::HashSet;

use indexmap::IndexMap;
use toml::de::DeValue;

use super::diag::{Diagnostic, did_you_mean, list};
use super::reader::{Reader, Table};
use super::{OpDef, is_valid_name};
use crate::agents::{BUILTIN_AGENTS, StreamFormat};
use crate::palette::{
    AgentSetup, CATALOG_NAME, Catalog, Disposition, Effort, PaletteConfig, PaletteExpansionPolicy,
    PaletteRole, PaletteSimulate, PlayRolePalette, SetupSites, UserProfile, canonical,
};

const PALETTE_KEYS: &[&str] = &["roles", "expansion", "simulate", "defaults"];
const ROLE_KEYS: &[&str] = &[
    "role",
    "disposition",
    "modes",
    "agent",
    "flag_profile",
    "tools",
];
const SETUP_KEYS: &[&str] = &["agent", "flag_profile", "tools"];
const EXPANSION_KEYS: &[&str] = &["max_new_roles", "orchestrator_may_expand", "catalog"];
const SIMULATE_KEYS: &[&str] = &["provision_delay_ms", "fail_roles"];
const PACK_KEYS: &[&str] = &["roles"];
const PACK_ROLE_KEYS: &[&str] = &["model", "effort", "default_modes", "modes_allow", "active"];
const PROFILE_KEYS: &[&str] = &["description", "model", "modes"];

fn unknown_mode(r: &mut Reader, mode: &str, span: super::Span, what: &str) {
    let catalog = Catalog::builtin();
    let names = catalog.mode_names();
    let mut help = format!("catalog modes: {}", names.join(", "));
    if let Some(m) = did_you_mean(mode, names.iter().copied()) {
        help = format!("did you mean \"{m}\"? {help}");
    }
    r.push(
        Diagnostic::new(
            span,
            format!("unknown mode {mode:?} in {what}"),
            "not a catalog mode",
        )
        .help(help),
    );
}

fn unknown_role_help(role: &str, known: &[&str]) -> String {
    let mut help = format!("catalog roles: {}", known.join(", "));
    if let Some(m) = did_you_mean(role, known.iter().copied()) {
        help = format!("did you mean \"{m}\"? {help}");
    }
    help
}

pub(super) fn read(r: &mut Reader, root: &Table<'_, '_>) -> PaletteConfig {
    let catalog = Catalog::builtin();
    let pack = read_pack(r, root);
    let profiles = read_profiles(r, root);
    let agents = PlayAgents::of(root);
    let sites = SetupSites {
        profiles: role_profiles(root),
        defined: agents.0.iter().map(|(n, _)| n.clone()).collect(),
        ..SetupSites::default()
    };
    let Some(pv) = root.get("palette") else {
        let mut cfg = PaletteConfig::legacy(pack, profiles);
        cfg.sites = sites;
        return cfg;
    };
    let mut cfg = PaletteConfig {
        palette: PlayRolePalette {
            roles: Vec::new(),
            expansion: PaletteExpansionPolicy::default(),
            defaults: None,
        },
        legacy: false,
        profiles,
        pack,
        simulate: PaletteSimulate::default(),
        sites,
    };
    let Some(t) = r.table(pv, "[palette]") else {
        return cfg;
    };
    t.deny_unknown(r, PALETTE_KEYS);

    // Rule 1: at least one role.
    match t.get("roles") {
        None => r.push(
            Diagnostic::new(
                t.span.start..t.span.start,
                "[palette] is missing `roles`",
                "a palette needs roles",
            )
            .help("roles = [ { role = \"orchestrator\", disposition = \"emission_capable\" } ]"),
        ),
        Some(v) => match v.get_ref() {
            DeValue::Array(items) if items.is_empty() => r.push(
                Diagnostic::new(v.span(), "the palette has no roles", "empty")
                    .help("a palette needs at least one role"),
            ),
            DeValue::Array(items) => {
                let mut seen: IndexMap<String, super::Span> = IndexMap::new();
                for (i, item) in items.iter().enumerate() {
                    let what = format!("[palette] roles[{i}]");
                    if let Some(rt) = r.table(item, &what)
                        && let Some(pr) = read_palette_role(r, &rt, &mut cfg, &agents, &mut seen)
                    {
                        cfg.palette.roles.push(pr);
                    }
                }
            }
            _ => r.push(
                Diagnostic::new(
                    v.span(),
                    "`roles` in [palette] must be an array of tables",
                    "expected an array",
                )
                .help(
                    "roles = [ { role = \"orchestrator\", disposition = \"emission_capable\" } ]",
                ),
            ),
        },
    }

    if let Some(e) = t.table(r, "expansion") {
        e.deny_unknown(r, EXPANSION_KEYS);
        // Rule 6: non-negative.
        if let Some((n, _)) = e.int(r, "max_new_roles", 0, 1000) {
            cfg.palette.expansion.max_new_roles = n as u32;
            cfg.sites.max_new_roles = Some(e.key_span("max_new_roles"));
        }
        if let Some((b, _)) = e.bool(r, "orchestrator_may_expand") {
            cfg.palette.expansion.orchestrator_may_expand = b;
        }
        // Rule 7: the closed catalog only.
        if let Some((c, span)) = e.string(r, "catalog") {
            if c != CATALOG_NAME {
                r.push(
                    Diagnostic::new(span, format!("expansion catalog {c:?} is not allowed"), "not the closed catalog")
                        .help(format!("the only expansion source is \"{CATALOG_NAME}\"; no path, module or provider is accepted")),
                );
            }
            cfg.palette.expansion.catalog = c;
        }
    }

    if let Some(d) = t.table(r, "defaults") {
        d.deny_unknown(r, SETUP_KEYS);
        if d.get("agent").is_none() {
            r.push(
                Diagnostic::new(
                    d.span.start..d.span.start,
                    "[palette.defaults] is missing `agent`",
                    "names no agent",
                )
                .help("agent = \"claude\": what roles with no agent of their own (recruited ones among them) run on"),
            );
        }
        cfg.palette.defaults = read_setup(r, &d, &agents, &mut cfg.sites);
    }
    // Written but unread (not a table, no agent, a bad one): its error is
    // reported, and which roles it would give an agent is not checked.
    if t.contains("defaults") && cfg.palette.defaults.is_none() {
        r.broken.defaults = true;
    }

    if let Some(s) = t.table(r, "simulate") {
        s.deny_unknown(r, SIMULATE_KEYS);
        if let Some((ms, _)) = s.int(r, "provision_delay_ms", 0, 600_000) {
            cfg.simulate.provision_delay_ms = ms as u64;
        }
        for (role, span) in s.strings(r, "fail_roles").unwrap_or_default() {
            let canon = canonical(&role);
            if catalog.role(&canon).is_none() {
                let help = unknown_role_help(&canon, &catalog.role_names());
                r.push(
                    Diagnostic::new(
                        span,
                        format!("fail_roles names unknown catalog role {role:?}"),
                        "unknown role",
                    )
                    .help(help),
                );
            } else if cfg.initial(&canon).is_some() {
                r.push(
                    Diagnostic::new(span, format!("fail_roles names {role:?}, an initial palette role"), "initial role")
                        .help("simulated failures apply to expansions; initial roles are provisioned before the run"),
                );
            } else {
                cfg.simulate.fail_roles.push(canon);
            }
        }
    }
    cfg
}

fn read_palette_role(
    r: &mut Reader,
    t: &Table<'_, '_>,
    cfg: &mut PaletteConfig,
    agents: &PlayAgents,
    seen: &mut IndexMap<String, super::Span>,
) -> Option<PaletteRole> {
    t.deny_unknown(r, ROLE_KEYS);
    let catalog = Catalog::builtin();
    let (name, span) = t
        .require(r, "role", "\"implementer\"")
        .and_then(|_| t.string(r, "role"))?;
    // Rule 2: non-empty after stripping, unique by canonical name.
    if name.trim().is_empty() {
        r.error(
            span,
            format!("`role` in {} is empty", t.name),
            "empty role name",
        );
        return None;
    }
    let canon = canonical(&name);
    if seen.contains_key(&canon) {
        r.push(
            Diagnostic::new(span, format!("palette role {name:?} appears twice"), "duplicate role")
                .help(format!("each role is listed once; {canon:?} is already in the palette (names are compared in canonical form)")),
        );
        return None;
    }
    seen.insert(canon.clone(), span.clone());
    // Rule 3: a catalog role or a configured user profile.
    let profile = cfg.profiles.get(&canon);
    // A user profile with errors is reported where it is defined; its
    // operations are not reported either (see `check_op_roles`).
    if profile.is_none() && r.broken.user_profiles.contains(&canon) {
        return None;
    }
    if catalog.role(&canon).is_none() && profile.is_none() {
        let mut known = catalog.role_names();
        known.extend(cfg.profiles.keys().map(String::as_str));
        r.push(
            Diagnostic::new(
                span,
                format!("unknown role {name:?} in the palette"),
                "not a catalog role or profile",
            )
            .help(unknown_role_help(&canon, &known)),
        );
        return None;
    }
    // A bad disposition or mode is reported where it is written, and the
    // role still counts as declared: leaving it out would make every
    // operation of the role look outside the palette, a second error
    // ("needs a new-role unit") that follows from the first.
    let disposition = match t.get("disposition") {
        None => Disposition::Terminal,
        Some(_) => match t.choice(r, "disposition", &Disposition::ALLOWED) {
            Some((d, _)) if d == "emission_capable" => Disposition::EmissionCapable,
            _ => Disposition::Terminal,
        },
    };
    let mut modes = Vec::new();
    let mut dup = HashSet::new();
    for (mode, mspan) in t.strings(r, "modes").unwrap_or_default() {
        let m = canonical(&mode);
        // Rule 5: no duplicates, rejected rather than deduplicated.
        if !dup.insert(m.clone()) {
            r.push(
                Diagnostic::new(
                    mspan,
                    format!("mode {mode:?} is listed twice for {canon}"),
                    "duplicate mode",
                )
                .help("list each mode once"),
            );
            continue;
        }
        // Rule 4: a catalog mode the role's pack allows.
        if !catalog.has_mode(&m) {
            unknown_mode(r, &mode, mspan, &format!("palette role {canon}"));
        } else if let Some(pack) = cfg.pack.get(&canon)
            && !pack.allows(&m)
        {
            r.push(
                Diagnostic::new(
                    mspan,
                    format!("mode {mode:?} is not allowed for {canon}"),
                    "not in modes_allow",
                )
                .help(format!("{canon} allows: {}", pack.modes_allow.join(", "))),
            );
        } else {
            modes.push(m);
        }
    }
    let before = r.diags.len();
    let setup = read_setup(r, t, agents, &mut cfg.sites);
    // A setup written but unread is reported as such, not again as a role
    // with no agent.
    if setup.is_none() && (r.diags.len() > before || t.contains("agent")) {
        r.broken.role_setups.insert(canon.clone());
    }
    cfg.sites.roles.push((canon.clone(), span));
    Some(PaletteRole {
        role: canon,
        disposition,
        modes,
        setup,
    })
}

/// The play's own `[agents]` (names and stream formats), read quietly: the
/// agents section reports their problems. The user's agents file is not
/// visible here; names from it are checked against the operations later
/// and again when a run starts.
struct PlayAgents(Vec<(String, Option<StreamFormat>)>);

impl PlayAgents {
    fn of(root: &Table<'_, '_>) -> PlayAgents {
        let mut quiet = Reader::default();
        let Some(t) = root.table(&mut quiet, "agents") else {
            return PlayAgents(Vec::new());
        };
        let mut out = Vec::new();
        for (name, _, v) in t.entries() {
            let format = quiet
                .table(v, name)
                .and_then(|a| a.string(&mut quiet, "stream_format"))
                .and_then(|(f, _)| StreamFormat::parse(&f));
            out.push((name.to_string(), format));
        }
        PlayAgents(out)
    }

    fn get(&self, name: &str) -> Option<Option<StreamFormat>> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, f)| *f)
    }
}

/// `(role, provider)` of each role profile an enabled `[capacity]` uses,
/// read quietly (the capacity section validates them).
fn role_profiles(root: &Table<'_, '_>) -> Vec<(String, String)> {
    let mut quiet = Reader::default();
    let enabled = root
        .table(&mut quiet, "capacity")
        .and_then(|c| c.bool(&mut quiet, "enabled"))
        .is_none_or(|(b, _)| b);
    let Some(t) = root.table(&mut quiet, "role_profiles").filter(|_| enabled) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, _, v) in t.entries() {
        let Some(p) = quiet.table(v, name) else {
            continue;
        };
        if let (Some((role, _)), Some((provider, _))) = (
            p.string(&mut quiet, "role"),
            p.string(&mut quiet, "provider"),
        ) {
            out.push((canonical(&role), provider));
        }
    }
    out
}

/// `agent`, `flag_profile` and `tools` of a roles entry or of
/// `[palette.defaults]`: what work of a role runs on. The flag profile and
/// ToolSet are written for that agent, so they need it beside them.
fn read_setup(
    r: &mut Reader,
    t: &Table<'_, '_>,
    agents: &PlayAgents,
    sites: &mut SetupSites,
) -> Option<AgentSetup> {
    let agent = t.string(r, "agent").and_then(|(a, span)| {
        if is_valid_name(&a) {
            Some((a, span))
        } else if r.broken.agents.contains(&a) {
            // `[agents."<a>"]`'s invalid name is reported there.
            None
        } else {
            r.push(
                Diagnostic::new(
                    span,
                    format!("`agent` of {} is not an agent name: {a:?}", t.name),
                    "invalid name",
                )
                .help("an agent defined under [agents.<name>], or sim or noop"),
            );
            None
        }
    });
    let flag_profile = super::agents_section::read_flag_profile(r, t, "flag_profile");
    let tools = super::agents_section::read_tools(r, t, "tools");
    let Some((agent, agent_span)) = agent else {
        if t.get("agent").is_none() {
            for key in ["flag_profile", "tools"] {
                if t.contains(key) {
                    r.push(
                        Diagnostic::new(
                            t.key_span(key),
                            format!("`{key}` of {} needs `agent` beside it", t.name),
                            "no agent",
                        )
                        .help("flag profiles and ToolSets are written for one agent's command line: name it with agent = \"...\""),
                    );
                }
            }
        }
        return None;
    };
    if BUILTIN_AGENTS.contains(&agent.as_str()) {
        for (key, set) in [
            ("flag_profile", flag_profile.is_some()),
            ("tools", tools.is_some()),
        ] {
            if set {
                r.push(
                    Diagnostic::new(
                        t.key_span(key),
                        format!(
                            "`{key}` of {} has no effect: agent {agent:?} is built in",
                            t.name
                        ),
                        "ignored by this agent",
                    )
                    .help("name an agent defined under [agents.<name>], or remove it"),
                );
            }
        }
    } else if let (Some(Some(format)), Some(tools)) = (agents.get(&agent), &tools)
        && let Err(e) = crate::agents::argv::check_toolset(format, tools)
    {
        r.push(super::agents_section::toolset_refused(
            t.key_span("tools"),
            &e,
        ));
    }
    sites.agents.push((agent.clone(), agent_span));
    Some(AgentSetup {
        agent,
        flag_profile,
        tools,
    })
}

/// Every operation's role must be assignable (in the palette) or, with a
/// declared palette, an expansion-only catalog role the orchestrator may
/// recruit within `max_new_roles` (D2). Unknown roles are
/// `unknown_catalog_role`, never reinterpreted.
pub(super) fn check_op_roles(r: &mut Reader, cfg: &PaletteConfig, ops: &[OpDef]) {
    let catalog = Catalog::builtin();
    let assignable: Vec<&str> = cfg.palette.roles.iter().map(|p| p.role.as_str()).collect();
    let mut expansions: Vec<(&str, &OpDef)> = Vec::new();
    for op in ops {
        let role = op.role.as_str();
        if cfg.initial(role).is_some() {
            continue;
        }
        let span = op.role_span.clone();
        if r.broken.user_profiles.contains(role) && !cfg.profiles.contains_key(role) {
            // The profile's own error is the one to fix.
            continue;
        }
        if cfg.profiles.contains_key(role) {
            r.push(
                Diagnostic::new(span, format!("operation {:?} uses profile {role:?}, which is not in the palette", op.id), "not in the palette")
                    .help("profiles are usable only when named in the initial palette; add it to [palette] roles"),
            );
        } else if catalog.role(role).is_some() {
            if cfg.legacy {
                r.push(
                    Diagnostic::new(span, format!("operation {:?} uses {role:?}, which the pack marks inactive", op.id), "inactive role")
                        .help("without [palette] only active roles are in the roster; declare a [palette] or set [pack.roles.<role>] active = true"),
                );
            } else if !cfg.palette.expansion.orchestrator_may_expand {
                r.push(
                    Diagnostic::new(span, format!("operation {:?} needs {role:?}, outside the palette, but orchestrator_may_expand is false", op.id), "requester_not_authorized")
                        .help(format!("add {role:?} to [palette] roles, or allow expansion")),
                );
            } else if !expansions.iter().any(|(r, _)| *r == role) {
                expansions.push((role, op));
            }
        } else {
            let mut known = assignable.clone();
            for name in catalog.role_names() {
                if !known.contains(&name) {
                    known.push(name);
                }
            }
            r.push(
                Diagnostic::new(
                    span,
                    format!("operation {:?} has unknown role {role:?}", op.id),
                    "unknown_catalog_role",
                )
                .help(format!(
                    "palette roles: {}; {}",
                    list(&assignable, 20),
                    unknown_role_help(role, &catalog.role_names())
                )),
            );
        }
    }
    let max = cfg.palette.expansion.max_new_roles as usize;
    if expansions.len() > max {
        let names: Vec<&str> = expansions.iter().map(|(r, _)| *r).collect();
        for (role, op) in &expansions[max..] {
            r.push(
                Diagnostic::new(op.role_span.clone(), format!("operation {:?} needs a new-role unit for {role:?}, but max_new_roles is {max}", op.id), "palette_budget_exhausted")
                    .help(format!("roles outside the palette used by operations: {}; add them to [palette] roles or raise [palette.expansion] max_new_roles", names.join(", "))),
            );
        }
    }
}

/// Where spawned work would have no agent, before a run finds out
/// (ADR-0036 D3: a route is published only with its agent set up; playdeck
/// never falls back to the simulator in a play whose work runs on agent
/// CLIs). Mirrors `Play::role_setups`, with what the file shows: an agent
/// named only by the user's agents file is known once an operation uses
/// it, and checked again when the run starts.
///
/// A declared palette role with no agent is an error at its entry (A36-41):
/// it would be provisioned, then refuse all its work. Roles of the legacy
/// roster, and those the orchestrator may recruit, are warned about: the
/// play did not name them. A role whose agent would come from a definition
/// that failed to read (its entry's setup, an operation, a role profile,
/// `[palette.defaults]`) is not reported: that definition's error is.
pub(super) fn check_role_agents(
    r: &mut Reader,
    cfg: &PaletteConfig,
    ops: &[OpDef],
    capacity: Option<&crate::capacity::CapacityConfig>,
) {
    let builtin = |a: &str| BUILTIN_AGENTS.contains(&a);
    let sites = &cfg.sites;
    let mut known: Vec<&str> = ops.iter().map(|o| o.agent.as_str()).collect();
    known.extend(sites.profiles.iter().map(|(_, p)| p.as_str()));
    known.extend(sites.defined.iter().map(String::as_str));
    for (agent, span) in &sites.agents {
        if builtin(agent) || known.contains(&agent.as_str()) {
            continue;
        }
        r.warn(
            span.clone(),
            format!(
                "agent {agent:?} is neither built in, nor defined under [agents] in this play, nor used by one of its operations; unless your agents file defines it, the run is refused when it starts"
            ),
        );
    }
    let mut clis: Vec<&str> = ops
        .iter()
        .map(|o| o.agent.as_str())
        .chain(sites.profiles.iter().map(|(_, p)| p.as_str()))
        .chain(sites.agents.iter().map(|(a, _)| a.as_str()))
        .filter(|a| !builtin(a))
        .collect();
    clis.sort_unstable();
    clis.dedup();
    if clis.is_empty() || cfg.palette.defaults.is_some() || r.broken.defaults {
        return;
    }
    let capacity_on = capacity.is_some_and(|c| c.enabled);
    let broken = &r.broken;
    let has_own = |role: &str| {
        cfg.initial(role).is_some_and(|p| p.setup.is_some())
            || ops.iter().any(|o| o.role == role)
            || sites.profiles.iter().any(|(r, _)| r == role)
            || broken.role_setups.contains(role)
            || broken.op_roles.contains(role)
            || (capacity_on && broken.may_serve(role, None))
    };
    let why = format!(
        "this play's work runs on agent CLIs ({}) and [palette.defaults] names no agent",
        clis.join(", ")
    );
    if cfg.legacy {
        let bare: Vec<&str> = cfg
            .palette
            .roles
            .iter()
            .map(|p| p.role.as_str())
            .filter(|role| !has_own(role))
            .collect();
        if !bare.is_empty() {
            r.warn(
                0..0,
                format!(
                    "roles of the legacy roster with no operation or role profile have no agent ({why}): work spawned onto {} is refused (role_provision_failed); declare [palette] roles with agent = \"...\"",
                    list(&bare, 8)
                ),
            );
        }
        return;
    }
    let bare: Vec<&(String, super::Span)> = sites
        .roles
        .iter()
        .filter(|(role, _)| !has_own(role))
        .collect();
    for (role, span) in bare {
        r.push(
            Diagnostic::new(
                span.clone(),
                format!(
                    "palette role {role:?} has no agent: no agent on its entry, no operation or role profile of its own, and {why}; it would be provisioned, then refuse all its work (role_provision_failed)"
                ),
                "no agent",
            )
            .help("give its entry agent = \"...\", or set [palette.defaults] agent"),
        );
    }
    let policy = &cfg.palette.expansion;
    if policy.orchestrator_may_expand
        && policy.max_new_roles > 0
        && let Some(span) = &sites.max_new_roles
    {
        r.warn(
            span.clone(),
            format!(
                "roles the orchestrator recruits have no agent ({why}): recruiting a role with no operation or role profile of its own fails (role_provision_failed); set [palette.defaults] agent"
            ),
        );
    }
}
