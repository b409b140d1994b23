//! Checks across sections, made once the play is read: a USD cap every
//! agent's spend can be measured against, and agent-CLI options only on
//! operations an agent CLI can run.

use super::*;

/// A USD cap needs the spend of every agent CLI the play runs in USD:
/// reported by the CLI, or derived from its tokens by the `[prices]` of the
/// model it runs. One that can be neither would spend unseen.
pub(super) fn check_usd_cap(r: &mut Reader, root: &Table<'_, '_>, play: &Play) {
    let Some(b) = &play.budget else {
        return;
    };
    let capped = b.usd.is_some() || b.roles.values().any(|c| c.usd.is_some());
    if !capped {
        return;
    }
    // What runs: each operation's agent with the agent's model, and each
    // role profile's provider with the profile's model over the agent's.
    let model_of = |agent: &str| play.agents.get(agent).and_then(|a| a.model.clone());
    let used = play
        .operations
        .iter()
        .map(|o| (o.agent.as_str(), model_of(&o.agent)))
        .chain(play.capacity.iter().flat_map(|c| {
            c.profiles.values().map(|p| {
                let model = p.model.clone().or_else(|| model_of(&p.provider));
                (p.provider.as_str(), model)
            })
        }));
    // A price written but wrong has its own error; not "no price" too.
    let written = |m: &String| {
        play.prices.contains_key(m)
            || root
                .get("prices")
                .and_then(|v| v.get_ref().as_table())
                .is_some_and(|t| t.contains_key(m.as_str()))
    };
    let mut unpriced = std::collections::BTreeSet::new();
    for (name, model) in used {
        if let Some(a) = play.agents.get(name)
            && !a.stream_format.reports_cost()
            && model.as_ref().is_none_or(|m| !written(m))
        {
            unpriced.insert((name.to_string(), a.stream_format.as_str(), model));
        }
    }
    let Some((name, format, model)) = unpriced.into_iter().next() else {
        return;
    };
    let (message, help) = match model {
        None => (
            format!(
                "[budget] caps USD, but agent {name:?} ({format}) reports no cost and names no model, so its spend cannot be priced"
            ),
            format!(
                "set `model` on [agents.{name}] (or on the role profiles that run it) and give its price under [prices.\"<model>\"], or cap tokens instead (tokens = N)"
            ),
        ),
        Some(m) => (
            format!(
                "[budget] caps USD, but agent {name:?} ({format}) reports no cost and model {m:?} has no price"
            ),
            format!(
                "add [prices.\"{m}\"] with input, cached_input and output in USD per million tokens (in the play or the user's agents.toml), or cap tokens instead (tokens = N)"
            ),
        ),
    };
    r.push(Diagnostic::new(root.key_span("budget"), message, "USD cannot be computed").help(help));
}

/// `flag_profile` and `tools` only mean something to agent CLIs: on an
/// operation that can only run on a built-in agent they would be silently
/// ignored, so they are refused.
pub(super) fn check_command_options(r: &mut Reader, play: &Play) {
    let capacity_on = play.capacity.as_ref().is_some_and(|c| c.enabled);
    for op in &play.operations {
        let agent = play.runs_on(op);
        for (name, tools, span) in &op.agent_tools {
            match play.agents.get(name) {
                Some(def) => {
                    if let Err(e) = crate::agents::argv::check_toolset(def.stream_format, tools) {
                        r.push(crate::play::agents_section::toolset_refused(
                            span.clone(),
                            &e,
                        ));
                    }
                }
                // Its definition's error is the one to fix.
                None if r.broken.agents.contains(name) => {}
                None => {
                    // Only defined CLIs take a ToolSet; built-in agents none.
                    let known: Vec<&str> = play.agents.keys().map(String::as_str).collect();
                    let message = format!(
                        "agent_tools of operation {:?} names agent {name:?}, which is not defined under [agents]",
                        op.id
                    );
                    r.push(crate::play::agents_section::unknown_agent(
                        span.clone(),
                        message,
                        name,
                        &known,
                    ));
                }
            }
        }
        if let Some(def) = play.agents.get(agent) {
            if let (Some(tools), Some(span)) = (&op.tools, &op.tools_span)
                && let Err(e) = crate::agents::argv::check_toolset(def.stream_format, tools)
            {
                r.push(crate::play::agents_section::toolset_refused(
                    span.clone(),
                    &e,
                ));
            }
            continue;
        }
        // It would run on a broken role profile's provider: what that is
        // is known once the profile's own error is fixed.
        if capacity_on
            && play.profile_for(op).is_none()
            && r.broken.may_serve(&op.role, op.profile.as_deref())
        {
            continue;
        }
        for (what, span) in [
            ("flag_profile", &op.flag_profile_span),
            ("tools", &op.tools_span),
        ] {
            if let Some(span) = span {
                r.push(
                    Diagnostic::new(
                        span.clone(),
                        format!("{what} of operation {:?} has no effect: it runs on the built-in agent {agent:?}", op.id),
                        "ignored by this agent",
                    )
                    .help("set agent to one defined under [agents.<name>] (or a role profile whose provider is one), or remove it"),
                );
            }
        }
    }
}
