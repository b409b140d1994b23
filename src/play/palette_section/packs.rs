//! The role pack (`[pack]`: the catalog roles' models and modes) and user
//! profiles (`[profiles]`), read before the palette they configure.

use super::*;

pub(super) fn read_pack(
    r: &mut Reader,
    root: &Table<'_, '_>,
) -> IndexMap<String, crate::palette::RoleConfig> {
    let catalog = Catalog::builtin();
    let mut pack = PaletteConfig::builtin_pack();
    let Some(t) = root.table(r, "pack") else {
        return pack;
    };
    t.deny_unknown(r, PACK_KEYS);
    let Some(roles) = t.table(r, "roles") else {
        return pack;
    };
    for (name, span, v) in roles.entries() {
        let canon = canonical(name);
        let Some(cfg) = pack.get_mut(&canon) else {
            r.push(
                Diagnostic::new(
                    span,
                    format!("[pack.roles.{name}] names no catalog role"),
                    "unknown role",
                )
                .help(unknown_role_help(&canon, &catalog.role_names())),
            );
            continue;
        };
        let Some(rt) = r.table(v, &format!("[pack.roles.{name}]")) else {
            continue;
        };
        rt.deny_unknown(r, PACK_ROLE_KEYS);
        if let Some((m, _)) = rt.string(r, "model") {
            cfg.model = Some(m);
        }
        if let Some((e, _)) = rt.choice(r, "effort", &Effort::ALLOWED) {
            cfg.effort = Effort::parse(&e);
        }
        if let Some((b, _)) = rt.bool(r, "active") {
            cfg.active = b;
        }
        if let Some(allow) = rt.strings(r, "modes_allow") {
            let mut modes = Vec::new();
            for (mode, mspan) in allow {
                let m = canonical(&mode);
                if catalog.has_mode(&m) {
                    modes.push(m);
                } else {
                    unknown_mode(r, &mode, mspan, &format!("[pack.roles.{name}] modes_allow"));
                }
            }
            cfg.modes_allow = modes;
        }
        if let Some(defaults) = rt.strings(r, "default_modes") {
            let mut modes = Vec::new();
            for (mode, mspan) in defaults {
                let m = canonical(&mode);
                if !catalog.has_mode(&m) {
                    unknown_mode(
                        r,
                        &mode,
                        mspan,
                        &format!("[pack.roles.{name}] default_modes"),
                    );
                } else if !cfg.allows(&m) {
                    r.push(
                        Diagnostic::new(
                            mspan,
                            format!("default mode {mode:?} is not in {canon}'s modes_allow"),
                            "not allowed",
                        )
                        .help(format!("{canon} allows: {}", cfg.modes_allow.join(", "))),
                    );
                } else {
                    modes.push(m);
                }
            }
            cfg.default_modes = modes;
        } else if rt.contains("modes_allow") {
            // The catalog's default modes stay: they must pass the new
            // allow-list too, or the role would be provisioned with a mode
            // the pack forbids and a resume would refuse the unchanged play.
            let forbidden: Vec<&str> = cfg
                .default_modes
                .iter()
                .filter(|m| !cfg.allows(m))
                .map(String::as_str)
                .collect();
            if !forbidden.is_empty() {
                let quoted = |v: &[&str]| {
                    v.iter()
                        .map(|m| format!("{m:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let defaults: Vec<&str> = cfg.default_modes.iter().map(String::as_str).collect();
                let (s, verb) = if forbidden.len() == 1 {
                    ("", "is")
                } else {
                    ("s", "are")
                };
                r.push(
                    Diagnostic::new(
                        rt.key_span("modes_allow"),
                        format!(
                            "{canon}'s default mode{s} {} {verb} not in its modes_allow",
                            quoted(&forbidden)
                        ),
                        "excludes a default mode",
                    )
                    .help(format!(
                        "the catalog gives {canon} default_modes = [{}]; set default_modes in [pack.roles.{name}] too (modes it allows, or []), or allow {}",
                        quoted(&defaults),
                        forbidden.join(", ")
                    )),
                );
            }
        }
    }
    pack
}

pub(super) fn read_profiles(r: &mut Reader, root: &Table<'_, '_>) -> IndexMap<String, UserProfile> {
    let catalog = Catalog::builtin();
    let mut out = IndexMap::new();
    let Some(t) = root.table(r, "profiles") else {
        return out;
    };
    for (name, span, v) in t.entries() {
        if !is_valid_name(name) {
            r.push(
                Diagnostic::new(
                    span,
                    format!("profile name {name:?} is not a valid name"),
                    "invalid name",
                )
                .help("names match ^[A-Za-z0-9][A-Za-z0-9._-]*$"),
            );
            r.broken.user_profiles.insert(canonical(name));
            continue;
        }
        let canon = canonical(name);
        if catalog.role(&canon).is_some() {
            r.push(
                Diagnostic::new(
                    span,
                    format!("profile {name:?} has the name of a catalog role"),
                    "ambiguous",
                )
                .help("choose another name; use [pack.roles.<name>] to change a catalog role"),
            );
            continue;
        }
        let Some(pt) = r.table(v, &format!("[profiles.{name}]")) else {
            r.broken.user_profiles.insert(canon);
            continue;
        };
        pt.deny_unknown(r, PROFILE_KEYS);
        let mut modes = Vec::new();
        for (mode, mspan) in pt.strings(r, "modes").unwrap_or_default() {
            let m = canonical(&mode);
            if catalog.has_mode(&m) {
                modes.push(m);
            } else {
                unknown_mode(r, &mode, mspan, &format!("[profiles.{name}]"));
            }
        }
        out.insert(
            canon,
            UserProfile {
                description: pt.string(r, "description").map(|(s, _)| s),
                model: pt.string(r, "model").map(|(s, _)| s),
                modes,
            },
        );
    }
    out
}
