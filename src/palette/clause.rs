//! ADR-0036 D5: one authoritative delegation clause in the prompt, between
//! stable markers, so a new clause replaces the old one instead of
//! appending contradictory prose. The clause explains the rules;
//! enforcement stays in the router and admission.
//!
//! Spawn authority is not granted or revoked while a run goes on: a role's
//! disposition is what the play declares, the checkpoint keeps the
//! declaration, and a resume with a changed one is a conflict. So each
//! turn's clause is rendered from that fixed disposition (a leaf clause
//! for terminal roles, the grant for emission-capable ones); there is no
//! runtime revocation to render.

use super::model::Disposition;

pub const CLAUSE_BEGIN: &str = "<!-- playdeck:delegation:begin -->";
pub const CLAUSE_END: &str = "<!-- playdeck:delegation:end -->";

/// Renders the clause for one role at turn construction.
pub fn render_delegation_clause(
    role: &str,
    disposition: Disposition,
    allowed_assignees: &[&str],
    may_expand_palette: bool,
    remaining_new_roles: u32,
    remaining_spawns: usize,
) -> String {
    let body = match disposition {
        Disposition::Terminal => format!(
            "Delegation: you act as `{role}` and cannot create graph work. Do not emit spawn \
             requests; they are refused. You may still report your ordinary results, and emit \
             {{\"escalation\": {{\"reason\": \"...\"}}}} when a person or a stronger decision is needed."
        ),
        Disposition::EmissionCapable => {
            let expansion = if may_expand_palette {
                format!(
                    "Palette expansion is available: you may name a catalog role outside this list; \
                     {remaining_new_roles} new role(s) remain."
                )
            } else {
                "Palette expansion is not available to you: requests for roles outside this list \
                 are refused."
                    .to_string()
            };
            format!(
                "Delegation: you act as `{role}` and may request new operations by emitting \
                 {{\"spawn_request\": {{\"instruction\": \"...\", \"assignee\": \"<role>\"}}}} \
                 (optional: \"independent\": true, \"reason\", \"operation\": operate, chat, \
                 communicate or ReAct).\n\
                 Allowed assignees now: {} (omit \"assignee\" to use your own role).\n\
                 {expansion}\n\
                 Budgets when this turn was built: {remaining_new_roles} new role(s) and \
                 {remaining_spawns} spawn(s) remain; the run's state is authoritative, and refused \
                 requests appear in the run ledger with their reason.",
                allowed_assignees.join(", ")
            )
        }
    };
    format!("{CLAUSE_BEGIN}\n{body}\n{CLAUSE_END}")
}

/// Installs `clause` in `instruction`, replacing any earlier clause.
pub fn install_clause(instruction: &str, clause: &str) -> String {
    if let Some(start) = instruction.find(CLAUSE_BEGIN)
        && let Some(end_rel) = instruction[start..].find(CLAUSE_END)
    {
        let end = start + end_rel + CLAUSE_END.len();
        return format!("{}{clause}{}", &instruction[..start], &instruction[end..]);
    }
    if instruction.is_empty() {
        clause.to_string()
    } else {
        format!("{}\n\n{clause}", instruction.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> String {
        render_delegation_clause(
            "orchestrator",
            Disposition::EmissionCapable,
            &["tester", "implementer"],
            true,
            2,
            7,
        )
    }

    #[test]
    fn a_grant_names_permission_assignees_expansion_and_both_budgets() {
        let c = grant();
        assert!(c.starts_with(CLAUSE_BEGIN) && c.ends_with(CLAUSE_END));
        assert!(c.contains("may request new operations"));
        assert!(c.contains("Allowed assignees now: tester, implementer"));
        assert!(c.contains("Palette expansion is available"));
        assert!(c.contains("2 new role(s) and 7 spawn(s) remain"));
        assert!(c.contains("run ledger"));
    }

    #[test]
    fn a_terminal_role_gets_the_leaf_clause() {
        let c = render_delegation_clause("tester", Disposition::Terminal, &["x"], true, 3, 3);
        assert!(c.contains("cannot create graph work"));
        assert!(c.contains("escalation"));
        assert!(!c.contains("Allowed assignees"));
    }

    #[test]
    fn installing_replaces_the_clause_grant_or_leaf() {
        let base = "Write the tests.";
        let once = install_clause(base, &grant());
        let twice = install_clause(&once, &grant());
        assert_eq!(once, twice, "one clause, never two");
        assert_eq!(twice.matches(CLAUSE_BEGIN).count(), 1);
        let leaf =
            render_delegation_clause("orchestrator", Disposition::Terminal, &[], false, 0, 0);
        let leafed = install_clause(&twice, &leaf);
        assert_eq!(leafed.matches(CLAUSE_BEGIN).count(), 1);
        assert!(leafed.starts_with("Write the tests.\n\n"));
        assert!(leafed.contains("cannot create graph work"));
        assert!(!leafed.contains("may request new operations"));
        let after = "tail text";
        let with_tail = format!("{once}\n{after}");
        let replaced = install_clause(
            &with_tail,
            &render_delegation_clause("x", Disposition::Terminal, &[], false, 0, 0),
        );
        assert!(replaced.ends_with("\ntail text"));
    }
}
