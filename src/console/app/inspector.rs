//! What the node inspector folds away until it is shown in full: the
//! actions that toggle it ask here, the overlay draws by the same limits.

use super::App;

/// Names shown of a long list before it is collapsed.
pub const LIST_MAX: usize = 8;
/// Lines shown of a long text before it is collapsed.
pub const TEXT_MAX: usize = 12;

impl App {
    /// Whether the inspector of `ix` hides anything until shown in full.
    pub fn inspector_collapsible(&self, ix: u32) -> bool {
        let n = self.vm.node(ix);
        let long = |text: &str| text.lines().nth(TEXT_MAX).is_some();
        n.depends_on.len() > LIST_MAX
            || long(&n.op.instruction)
            || n.error.is_none()
                && n.result
                    .as_ref()
                    .is_some_and(|r| long(&serde_json::to_string_pretty(&**r).unwrap_or_default()))
    }
}
