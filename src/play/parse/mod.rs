//! Reads a play document into [`Play`], collecting every problem.

mod checks;
use checks::*;

mod graph_check;
mod sim;
use graph_check::*;
use sim::*;

use std::collections::BTreeMap;

// Keys are the play's own ids, hashed by the million for large plays: Fx.
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::UserFile;
use super::agents_section;
use super::diag::{Diagnostic, Diagnostics, Span, did_you_mean, list};
use super::reader::{Reader, Table, parse_document};
use super::segments;
use super::{
    DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_SPAWN, OpDef, Placement, Play, is_spawn_name, is_valid_name,
};
use crate::agents::{AgentDef, SimEmit, SimOutcome, SimSpec};
use crate::kernel::Condition;
use crate::kernel::graph::validate_json_pointer;

const ROOT_KEYS: &[&str] = &[
    "play",
    "operations",
    "palette",
    "pack",
    "profiles",
    "capacity",
    "role_profiles",
    "agents",
    "notify",
    "cluster",
    "retry",
    "budget",
    "prices",
    "workspace",
];
const PLAY_KEYS: &[&str] = &[
    "name",
    "objective",
    "max_concurrent",
    "parallel",
    "reactive",
    "max_spawn",
    "max_requests",
    "speed",
    "context",
    "flag_profile",
];
const OP_KEYS: &[&str] = &[
    "id",
    "role",
    "instruction",
    "depends_on",
    "when",
    "approval",
    "independent_root",
    "agent",
    "sim",
    "profile",
    "flag_profile",
    "tools",
    "agent_tools",
    "review",
];
const SIM_KEYS: &[&str] = &[
    "duration_ms",
    "outcome",
    "result",
    "context",
    "emits",
    "error",
    "escalation",
    "fail_attempts",
    "cause",
    "retry_after_ms",
    "usage",
];
const USAGE_KEYS: &[&str] = &[
    "cost_usd",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
];
const EMIT_KEYS: &[&str] = &["at_ms", "spawn_request", "escalation"];
const REQUEST_KEYS: &[&str] = &[
    "instruction",
    "assignee",
    "operation",
    "independent",
    "reason",
];
const WHEN_WORDS: &[&str] = &["succeeded", "failed", "always"];
const MAX_SIM_MS: i64 = 86_400_000;

/// Parses a play; the user's agents file's `[agents]` and `[prices]` are
/// merged under the play's, the play winning.
pub fn parse(
    file: &str,
    source: &str,
    dir: &std::path::Path,
    user: &UserFile,
) -> Result<Play, Diagnostics> {
    parse_with(file, source, dir, user, true)
}

/// `may_split`: a play with several operations may be read one operation
/// at a time (on several threads when it is large); without, it is read
/// whole. Both say the same, which the fuzz target checks.
pub(crate) fn parse_with(
    file: &str,
    source: &str,
    dir: &std::path::Path,
    user: &UserFile,
    may_split: bool,
) -> Result<Play, Diagnostics> {
    parse_play(file, source, None, dir, user, may_split, true)
}

/// [`parse`] of text the play keeps as it is (`Play::source` shares it): a
/// large play's text is then held once, not copied.
pub fn parse_shared(
    file: &str,
    source: &Arc<str>,
    dir: &std::path::Path,
    user: &UserFile,
) -> Result<Play, Diagnostics> {
    parse_play(file, source, Some(source), dir, user, true, true)
}

/// A play's sections without its operations (left empty): what a console
/// attached to a run needs of the run's own, already validated, copy —
/// reading a large play's operations would take it seconds.
pub fn parse_sections(
    file: &str,
    source: &str,
    dir: &std::path::Path,
) -> Result<Play, Diagnostics> {
    parse_play(file, source, None, dir, &UserFile::default(), true, false)
}

fn parse_play(
    file: &str,
    source: &str,
    shared: Option<&Arc<str>>,
    dir: &std::path::Path,
    user: &UserFile,
    may_split: bool,
    with_ops: bool,
) -> Result<Play, Diagnostics> {
    let fail = |items: Vec<Diagnostic>| Diagnostics {
        file: Arc::from(file),
        source: Arc::from(source),
        items,
    };
    // Operations are parsed one at a time when the file splits plainly
    // (see `segments`); anything else is parsed whole, as are files with a
    // syntax error, so diagnostics never depend on the split.
    let split = segments::split(source).filter(|s| may_split && !s.operations.is_empty());
    let rest = split.as_ref().map(|s| segments::rest_joined(source, s));
    let whole_errors = || parse_document(source).err().unwrap_or_default();
    let doc = parse_document(rest.as_ref().map_or(source, |(text, _)| text))
        .map_err(|e| if split.is_some() { whole_errors() } else { e })
        .map_err(fail)?;
    // Positions in the file, where diagnostics point.
    let doc = match &rest {
        Some((_, parts)) => {
            let span = doc.span();
            let moved = segments::to_file_positions(
                Spanned::new(span, DeValue::Table(doc.into_inner())),
                parts,
            );
            let span = moved.span();
            let DeValue::Table(t) = moved.into_inner() else {
                return Err(fail(whole_errors()));
            };
            Spanned::new(span, t)
        }
        None => doc,
    };
    if split.is_some() && doc.get_ref().contains_key("operations") {
        // `operations` written both ways: TOML's own message says how.
        return Err(fail(whole_errors()));
    }
    let mut r = Reader::default();
    let root = Table {
        t: doc.get_ref(),
        span: 0..0,
        name: "the play file".into(),
    };
    root.deny_unknown(&mut r, ROOT_KEYS);

    let mut play = Play {
        file: Arc::from(file),
        source: shared.cloned().unwrap_or_else(|| Arc::from(source)),
        name: String::new(),
        objective: None,
        max_concurrent: DEFAULT_MAX_CONCURRENT,
        reactive: true,
        max_spawn: DEFAULT_MAX_SPAWN,
        max_requests: crate::kernel::executor::DEFAULT_MAX_REQUESTS,
        speed: 1.0,
        context: Map::new(),
        operations: Vec::new(),
        palette: crate::palette::PaletteConfig::legacy(
            crate::palette::PaletteConfig::builtin_pack(),
            Default::default(),
        ),
        warnings: Vec::new(),
        capacity: None,
        notify: None,
        cluster: None,
        retry: Default::default(),
        budget: None,
        workspace: Default::default(),
        dir: dir.to_path_buf(),
        agents: user.agents.clone(),
        prices: user.prices.clone(),
        flag_profile: None,
        dep_at: Vec::new(),
    };
    let own = agents_section::read(&mut r, &root, dir, std::path::Path::new(file));
    play.agents.extend(own);
    if let Some(v) = root.require(&mut r, "play", "{ name = \"...\" } (a [play] table)")
        && let Some(t) = r.table(v, "[play]")
    {
        read_play(&mut r, &t, &mut play);
    }
    let mut shapes = Vec::new();
    if let Some(split) = split.as_ref().filter(|_| with_ops) {
        let n = split.operations.len();
        let mut op_slots: Vec<Option<OpDef>> = Vec::new();
        op_slots.resize_with(n, || None);
        let mut shape_slots: Vec<Option<Shape>> = Vec::new();
        shape_slots.resize_with(n, || None);
        let Some(parts) = read_split(
            source,
            &split.operations,
            &play.agents,
            &r.broken,
            &mut op_slots,
            &mut shape_slots,
        ) else {
            return Err(fail(whole_errors()));
        };
        for part in parts {
            r.diags.extend(part.diags);
            r.warnings.extend(part.warnings);
            r.broken.op_roles.extend(part.broken.op_roles);
        }
        // Collected in place (std reuses a vector's allocation through
        // filter_map, not through flatten): the slots become the play's.
        #[allow(clippy::filter_map_identity)]
        {
            play.operations = op_slots.into_iter().filter_map(|d| d).collect();
            shapes = shape_slots.into_iter().filter_map(|s| s).collect();
        }
    } else if with_ops && let Some(v) = root.require(&mut r, "operations", "[[operations]] tables")
    {
        read_operations(&mut r, v, &play.agents, &mut play.operations, &mut shapes);
    }
    play.dep_at = check_graph(&mut r, &play.source, &shapes);
    play.palette = super::palette_section::read(&mut r, &root);
    super::palette_section::check_op_roles(&mut r, &play.palette, &play.operations);
    play.capacity = super::capacity_section::read(&mut r, &root, &play.palette, dir, &play.agents);
    // After the capacity section, which records its broken role profiles.
    // Without the operations (a run's own, already validated play) what
    // roles run on cannot be told, and was checked when the run started.
    if with_ops {
        super::palette_section::check_role_agents(
            &mut r,
            &play.palette,
            &play.operations,
            play.capacity.as_ref(),
        );
    }
    super::capacity_section::check_op_profiles(&mut r, play.capacity.as_ref(), &play.operations);
    play.notify = super::notify_section::read(&mut r, &root);
    let repo = crate::capacity::config::find_repo_root(&play.dir);
    play.workspace = super::workspace_section::read(&mut r, &root, repo.as_deref(), &play.dir)
        .unwrap_or_default();
    // Each operation has its own worktree now: an instance's would be a
    // second one, on a branch beside the run's.
    if play.workspace.isolated()
        && let Some(cap) = play.capacity.as_mut()
    {
        for p in cap.profiles.values_mut() {
            if p.workspace_mode == crate::capacity::WorkspaceMode::GitWorktree {
                p.workspace_mode = crate::capacity::WorkspaceMode::Inplace;
                play.warnings.push(format!(
                    "role profile {}: workspace_mode = \"git-worktree\" gives way to [workspace] isolation = \"worktree\": each operation on its instances works in a worktree of its own",
                    p.name
                ));
            }
        }
    }
    play.cluster = super::cluster_section::read(&mut r, &root, play.capacity.as_ref());
    play.retry = super::retry_section::read(&mut r, &root, "retry").unwrap_or_default();
    play.budget = super::budget_section::read(&mut r, &root);
    play.prices
        .extend(super::prices_section::read(&mut r, &root));
    check_usd_cap(&mut r, &root, &play);
    check_command_options(&mut r, &play);
    check_when_targets(&mut r, &play);
    if play.palette.legacy {
        play.warnings
            .push(format!("{file}: {}", crate::palette::model::LEGACY_WARNING));
    }
    r.warnings.sort_by_key(|(span, _)| span.start);
    for (span, w) in &r.warnings {
        let (l, c) = super::diag::line_col(source, span.start);
        play.warnings.push(format!("{file}:{l}:{c}: {w}"));
    }
    if r.has_errors() {
        // Report in file order, whatever order the checks ran in.
        r.diags.sort_by_key(|d| d.span.start);
        return Err(fail(r.diags));
    }
    Ok(play)
}

fn read_play(r: &mut Reader, t: &Table<'_, '_>, play: &mut Play) {
    t.deny_unknown(r, PLAY_KEYS);
    if t.require(r, "name", "\"my play\"").is_some()
        && let Some((name, span)) = t.string(r, "name")
    {
        if name.trim().is_empty() {
            r.error(span, "`name` in [play] is empty", "write a name");
        }
        play.name = name;
    }
    play.objective = t.string(r, "objective").map(|(s, _)| s);
    // ADR-0033 D1: no limit at all falls back to the environment's, else
    // 10 000 — effectively unlimited, still a limiter.
    let unbounded = t
        .get("max_concurrent")
        .is_some_and(|v| matches!(v.get_ref(), DeValue::String(s) if s == "unbounded"));
    if unbounded {
        match unbounded_limit(std::env::var("PLAYDECK_MAX_CONCURRENCY").ok().as_deref()) {
            Ok(n) => play.max_concurrent = n,
            Err(why) => r.error(
                t.key_span("max_concurrent"),
                why,
                "PLAYDECK_MAX_CONCURRENCY",
            ),
        }
    } else if let Some(v) = t.get("max_concurrent")
        && matches!(v.get_ref(), DeValue::String(_))
    {
        r.error(
            v.span(),
            "`max_concurrent` in [play] must be an integer from 1 to 100000, or \"unbounded\"",
            "an integer or \"unbounded\"",
        );
    } else if let Some((n, _)) = t.int(r, "max_concurrent", 1, 100_000) {
        play.max_concurrent = n as usize;
    }
    if let Some((false, _)) = t.bool(r, "parallel") {
        play.max_concurrent = 1;
    }
    if let Some((b, _)) = t.bool(r, "reactive") {
        play.reactive = b;
    }
    if let Some((n, _)) = t.int(r, "max_spawn", 0, 1_000_000) {
        play.max_spawn = n as usize;
    }
    if let Some((n, _)) = t.int(r, "max_requests", 1, 10_000_000) {
        play.max_requests = n as usize;
    }
    let (lo, hi) = crate::vocab::SPEED_RANGE;
    if let Some((x, _)) = t.number(
        r,
        "speed",
        |x| (lo..=hi).contains(&x),
        "a number from 0.01 to 1000",
    ) {
        play.speed = x;
    }
    if let Some((ctx, _)) = t.json_object(r, "context") {
        play.context = ctx;
    }
    play.flag_profile = agents_section::read_flag_profile(r, t, "flag_profile");
}

/// The id and dependencies of an operation, read even when the rest of it
/// has errors, so graph problems are reported in the same pass.
struct Shape {
    id: String,
    id_span: Span,
    deps: Vec<(String, Span)>,
    /// How it is placed (an explicit `depends_on`, a root, or after the
    /// heads before it), as the graph builder will place it.
    placement: ShapePlacement,
}

#[derive(Clone, Copy, PartialEq)]
enum ShapePlacement {
    After,
    Root,
    AfterHeads,
}

/// What one reading thread found besides the definitions it wrote in
/// place.
type SplitPart = Reader;

/// Reads the operations at `ranges` of `source`, each parsed alone, on as
/// many threads as there are cores when there are many (they are
/// independent; what each finds is put back in file order). `None`: a part
/// has a syntax error or is not one operation, and the file is parsed whole.
/// Each operation's definition and shape go to its own slot of `ops` and
/// `shapes` (one per range, in file order): the threads write into the
/// play's one vector, and no definition is ever copied to gather them (a
/// million were held 1.5 times over while vectors grew: 200 MB).
fn read_split(
    source: &str,
    ranges: &[std::ops::Range<usize>],
    agents: &BTreeMap<String, AgentDef>,
    broken: &super::reader::Broken,
    ops: &mut [Option<OpDef>],
    shapes: &mut [Option<Shape>],
) -> Option<Vec<SplitPart>> {
    const PER_THREAD: usize = 4096;
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(ranges.len().div_ceil(PER_THREAD))
        .max(1);
    let chunk = ranges.len().div_ceil(threads).max(1);
    let read = |first: usize,
                ranges: &[std::ops::Range<usize>],
                op_slots: &mut [Option<OpDef>],
                shape_slots: &mut [Option<Shape>]|
     -> Option<SplitPart> {
        // The definitions read so far, so each part skips references to
        // broken ones as the whole parse does.
        let mut r = Reader {
            broken: broken.clone(),
            ..Reader::default()
        };
        let (mut op, mut shape) = (Vec::with_capacity(1), Vec::with_capacity(1));
        for (i, range) in ranges.iter().enumerate() {
            let (part, errors) = DeTable::parse_recoverable(&source[range.clone()]);
            if !errors.is_empty() {
                return None;
            }
            let part = segments::shift(
                Spanned::new(part.span(), DeValue::Table(part.into_inner())),
                range.start,
            );
            let DeValue::Table(t) = part.get_ref() else {
                return None;
            };
            let Some(DeValue::Array(a)) = t.get("operations").map(Spanned::get_ref) else {
                return None;
            };
            let [item] = &a[..] else {
                return None;
            };
            read_operation_item(&mut r, first + i, item, agents, &mut op, &mut shape);
            op_slots[i] = op.pop();
            shape_slots[i] = shape.pop();
        }
        Some(r)
    };
    if threads == 1 {
        return read(0, ranges, ops, shapes).map(|p| vec![p]);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .chunks(chunk)
            .zip(ops.chunks_mut(chunk))
            .zip(shapes.chunks_mut(chunk))
            .enumerate()
            .map(|(k, ((part, o), sh))| scope.spawn(move || read(k * chunk, part, o, sh)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    })
}

fn read_operations(
    r: &mut Reader,
    v: &super::reader::Val<'_>,
    agents: &BTreeMap<String, AgentDef>,
    out: &mut Vec<OpDef>,
    shapes: &mut Vec<Shape>,
) {
    let DeValue::Array(items) = v.get_ref() else {
        r.push(
            Diagnostic::new(
                v.span(),
                "`operations` must be an array of tables",
                "expected [[operations]]",
            )
            .help("write each operation as an [[operations]] table"),
        );
        return;
    };
    if items.is_empty() {
        r.push(
            Diagnostic::new(v.span(), "a play needs at least one operation", "empty")
                .help("add an [[operations]] table"),
        );
    }
    for (i, item) in items.iter().enumerate() {
        read_operation_item(r, i, item, agents, out, shapes);
    }
}

/// Reads `operations[i]`, and its shape even when it has errors.
fn read_operation_item(
    r: &mut Reader,
    i: usize,
    item: &super::reader::Val<'_>,
    agents: &BTreeMap<String, AgentDef>,
    out: &mut Vec<OpDef>,
    shapes: &mut Vec<Shape>,
) {
    let name = format!("operations[{i}]");
    let Some(t) = r.table(item, &name) else {
        return;
    };
    let quiet = &mut Reader::default();
    match read_operation(r, &t, agents) {
        Some(op) => out.push(op),
        // Its role still has work of its own: a palette role's missing
        // agent would follow from this operation's error.
        None => {
            if let Some((role, _)) = t.string(quiet, "role") {
                r.broken.op_roles.insert(crate::palette::canonical(&role));
            }
        }
    }
    if let Some((id, id_span)) = t.string(quiet, "id") {
        let explicit = t.strings(quiet, "depends_on");
        let placement = match (&explicit, t.bool(quiet, "independent_root")) {
            (Some(d), _) if !d.is_empty() => ShapePlacement::After,
            (Some(_), _) | (None, Some((true, _))) => ShapePlacement::Root,
            (None, _) => ShapePlacement::AfterHeads,
        };
        let deps = explicit.unwrap_or_default();
        shapes.push(Shape {
            id,
            id_span,
            deps,
            placement,
        });
    }
}

fn read_operation(
    r: &mut Reader,
    t: &Table<'_, '_>,
    agents: &BTreeMap<String, AgentDef>,
) -> Option<OpDef> {
    t.deny_unknown(r, OP_KEYS);
    let before = r.diags.len();
    let id = t
        .require(r, "id", "\"build-api\"")
        .and_then(|_| t.string(r, "id"));
    let name = match &id {
        Some((id, _)) => format!("operation \"{id}\""),
        None => t.name.clone(),
    };
    let t = Table {
        t: t.t,
        span: t.span.clone(),
        name,
    };
    if let Some((id, span)) = &id {
        if !is_valid_name(id) {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("operation id {} is not a valid name", short(id)),
                    "invalid id",
                )
                .help(format!("ids match {}", crate::vocab::NAME_RULE)),
            );
        } else if is_spawn_name(id) {
            r.push(
                Diagnostic::new(
                    span.clone(),
                    format!("operation id {id:?} is reserved"),
                    "reserved",
                )
                .help("spawn-<number> names are given to spawned operations; choose another id"),
            );
        }
    }
    let role = t
        .require(r, "role", "\"implementer\"")
        .and_then(|_| t.string(r, "role"));
    if let Some((role, span)) = &role
        && role.trim().is_empty()
    {
        r.error(
            span.clone(),
            format!("`role` of {} is empty", t.name),
            "empty role",
        );
    }
    let instruction = t
        .require(r, "instruction", "\"what to do\"")
        .and_then(|_| t.string(r, "instruction"));

    let deps = t.strings(r, "depends_on");
    let independent = t.bool(r, "independent_root");
    let placement = match (deps, independent) {
        (Some(deps), Some((true, ispan))) => {
            r.push(
                Diagnostic::new(
                    ispan,
                    format!("{} is an independent root but has depends_on", t.name),
                    "conflicts with depends_on",
                )
                .help("remove depends_on, or set independent_root = false"),
            );
            Placement::After(deps)
        }
        (Some(deps), _) if deps.is_empty() => {
            r.push(
                Diagnostic::new(t.get("depends_on").map_or(t.span.clone(), |v| v.span()), format!("depends_on of {} is empty", t.name), "empty list")
                    .help("use independent_root = true for a root, or omit depends_on to run after the operations before it"),
            );
            Placement::Root
        }
        (Some(deps), _) => Placement::After(deps),
        (None, Some((true, _))) => Placement::Root,
        (None, _) => Placement::AfterHeads,
    };

    let mut when = Condition::Succeeded;
    let when_span = t.get("when").map(|_| t.key_span("when"));
    if let Some(v) = t.get("when") {
        if !matches!(placement, Placement::After(_)) {
            r.push(
                Diagnostic::new(
                    t.key_span("when"),
                    format!("`when` of {} has no effect without depends_on", t.name),
                    "no incoming edges to condition",
                )
                .help("when conditions the edges from depends_on; add depends_on or remove when"),
            );
        }
        if let Some(c) = read_when(r, &t, v) {
            when = c;
        }
    }
    let approval = t.bool(r, "approval").is_some_and(|(b, _)| b);
    let review = t.bool(r, "review").is_some_and(|(b, _)| b);
    let agent = match t.get("agent") {
        Some(_) => agents_section::read_agent_ref(r, &t, "agent", agents),
        None => Some("sim".to_string()),
    };
    let sim = t.get("sim").and_then(|v| {
        if agent.as_deref().is_some_and(|a| a != "sim") {
            r.push(
                Diagnostic::new(
                    t.key_span("sim"),
                    format!("`sim` of {} applies only to agent = \"sim\"", t.name),
                    "ignored by this agent",
                )
                .help("remove sim, or set agent = \"sim\""),
            );
        }
        r.table(v, &format!("`sim` of {}", t.name))
            .and_then(|s| read_sim(r, &s))
            .map(Box::new)
    });
    let profile = t.string(r, "profile");
    let flag_profile = agents_section::read_flag_profile(r, &t, "flag_profile");
    let flag_profile_span = flag_profile.as_ref().map(|_| t.key_span("flag_profile"));
    let tools = agents_section::read_tools(r, &t, "tools");
    let tools_span = tools.as_ref().map(|_| t.key_span("tools"));
    // ADR-011's top tier: a ToolSet per agent the operation may run on
    // (its own, or a role profile's provider).
    let mut agent_tools = Vec::new();
    if let Some(v) = t.get("agent_tools")
        && let Some(at) = r.table(v, &format!("`agent_tools` of {}", t.name))
    {
        for (name, span, _) in at.entries() {
            if let Some(ts) = agents_section::read_tools(r, &at, name) {
                agent_tools.push((name.to_string(), ts, span));
            }
        }
    }
    if r.diags.len() > before {
        return None;
    }
    let (id, id_span) = id?;
    let (role, role_span) = role?;
    Some(OpDef {
        id,
        id_span,
        role: crate::palette::canonical(&role),
        role_span,
        instruction: instruction?.0,
        placement,
        when,
        when_span,
        approval,
        review,
        agent: agent?,
        sim,
        profile_span: profile.as_ref().map(|(_, s)| s.clone()),
        profile: profile.map(|(p, _)| p),
        flag_profile,
        flag_profile_span,
        tools: tools.map(Box::new),
        tools_span,
        agent_tools,
    })
}

/// A long value shown in a message: its start and its length.
fn short(s: &str) -> String {
    if s.chars().count() <= 40 {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(32).collect();
        format!("\"{head}…\" ({} characters)", s.chars().count())
    }
}

fn read_when(r: &mut Reader, t: &Table<'_, '_>, v: &super::reader::Val<'_>) -> Option<Condition> {
    match v.get_ref() {
        DeValue::String(_) => {
            let (w, _) = t.choice(r, "when", &["succeeded", "failed", "always"])?;
            Some(match w.as_str() {
                "succeeded" => Condition::Succeeded,
                "failed" => Condition::Failed,
                _ => Condition::Always,
            })
        }
        DeValue::Table(_) => {
            let c = r.table(v, &format!("`when` of {}", t.name))?;
            c.deny_unknown(r, &["pointer", "equals"]);
            let pointer = c
                .require(r, "pointer", "\"/verdict\"")
                .and_then(|_| c.string(r, "pointer"));
            let equals = c
                .require(r, "equals", "\"ship\"")
                .and_then(|_| c.json(r, "equals"));
            let (pointer, pspan) = pointer?;
            if let Err(msg) = validate_json_pointer(&pointer) {
                r.push(
                    Diagnostic::new(
                        pspan,
                        format!("invalid JSON pointer in {}", c.name),
                        "invalid pointer",
                    )
                    .help(msg.to_string()),
                );
                return None;
            }
            Some(Condition::pointer(pointer, equals?.0))
        }
        _ => {
            r.push(
                Diagnostic::new(
                    v.span(),
                    format!("`when` of {} must be a string or a table", t.name),
                    "expected a condition",
                )
                .help(format!(
                    "allowed: {}, or {{ pointer = \"/json/pointer\", equals = <value> }}",
                    WHEN_WORDS.join(", ")
                )),
            );
            None
        }
    }
}

/// The limit of `max_concurrent = "unbounded"`: `PLAYDECK_MAX_CONCURRENCY`
/// when set (1 to 100 000), else 10 000.
pub fn unbounded_limit(env: Option<&str>) -> Result<usize, String> {
    match env {
        None | Some("") => Ok(10_000),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=100_000).contains(&n) => Ok(n),
            _ => Err(format!(
                "max_concurrent = \"unbounded\" takes its limit from PLAYDECK_MAX_CONCURRENCY, which is {v:?}; allowed: an integer from 1 to 100000 (or unset, for 10000)"
            )),
        },
    }
}

#[cfg(test)]
mod tests;
