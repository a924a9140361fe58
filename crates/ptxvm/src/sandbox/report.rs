//! Reporting fenced accesses. A fenced access only notes itself in the function's `%__sbx_f`
//! (one predicated move: a store per access would put an LDC, an LDC.64 and an STG into every
//! hot loop); the function stores its launch's tag in the control block's fault word before
//! every `ret` and `exit` when the note is set, and a thread stopped by a poll does so before
//! it exits (poll.rs). The host reads the word after the launch, so the later store changes
//! nothing it sees.

use super::print::O;
use super::rewrite::Fx;
use crate::ast::Str;

impl<'m> Fx<'_, 'm> {
    /// Notes a fenced access in `%__sbx_f` (one predicated move); `report` stores it in the
    /// control block when the thread leaves the function, so a hot loop carries no store.
    pub(super) fn fault(&self, out: &mut Vec<O<'m>>, guard: Option<(Str<'m>, bool)>) {
        self.deferred.set(true);
        Self::text(out, guard.as_ref(), |t| {
            t.push_str("mov.u32 %__sbx_f, 1;\n")
        });
    }

    /// Sets the control block's fault word to this launch's tag now.
    pub(super) fn fault_now(&self, out: &mut Vec<O<'m>>, guard: Option<(Str<'m>, bool)>) {
        Self::text(out, guard.as_ref(), store_fault_tag);
    }

    /// With fenced accesses noted in the body, reports them before every `ret` and `exit`
    /// (the `O::Report` that `plain` put before each, printed once this turns them on) and at
    /// the end of the body (an entry may end without `ret`). Marking the returns as they are
    /// rewritten saves a walk over the rewritten body, and rebuilding it around them.
    pub(super) fn add_reports(&self, body: &mut Vec<O<'m>>) {
        if !self.deferred.get() {
            return;
        }
        self.reports.set(true);
        Self::with_text(body, report);
    }
}

/// Stores the fault word if the function noted a fenced access (`Fx::fault`): its two lines.
pub(super) fn report(t: &mut String) {
    t.push_str("\tsetp.ne.u32 %__sbx_p, %__sbx_f, 0;\n\t@%__sbx_p ");
    store_fault_tag(t);
}

/// `st.volatile.global.u32 [%__sbx_ctl+CTL_FAULT_TAG], %__sbx_tag;` and its line's end.
fn store_fault_tag(t: &mut String) {
    t.push_str("st.volatile.global.u32 ");
    super::poll::ctl_word(t, super::CTL_FAULT_TAG);
    t.push_str(", %__sbx_tag;\n");
}
