//! Reporting fenced accesses and stops. A fenced access only notes itself in the function's
//! `%__sbx_f` (one predicated move: a store per access would put an LDC, an LDC.64 and an STG
//! into every hot loop); the function stores its launch's tag in the control block's fault word
//! before every `ret` and `exit` when the note is set. The host reads the word after the
//! launch, so the later store changes nothing it sees.
//!
//! A thread that a poll finds stopped takes a stop path out of line: it stores its launch's tag
//! in the stopped word (if that is still 0) and, when noted, in the fault word, and then leaves:
//! through the function's one stop block after its body, which exits, or, stopped at a guarded
//! back-edge, through a block right after that back-edge, which falls into the code after the
//! loop (poll.rs, `Fx::backedge`). Inline, the stores made ptxas compile the loops around them
//! differently even where they never ran: with them in the slow copy of a versioned loop, its
//! fast copy in reduce_f64_dynamic reloaded its input pointer from the constant bank on every
//! trip (docs/ISOLATION.md, "Cost"). The tag they store is read again from the launch's
//! parameter rather than from `%__sbx_tag`: a register holding it across the function's loops
//! was the one ptxas gave up there.
//!
//! Every branch to a stop path goes forward, so the layout's branches but back-edges still all
//! go forward. The function's stop block never rejoins the body, so no warp waits to
//! reconverge with a thread there; in ptxvm such a thread, being ahead of the others, runs
//! (and exits) once those behind it have exited, reached it or wait at a barrier. A block past
//! a guarded back-edge rejoins at the loop's exit, which it falls into, as the back-edge's
//! not-taken path does.

use super::print::O;
use super::put::put;
use super::rewrite::Fx;
use crate::ast::{Stmt, Str};

/// The label of a function's stop block ([`Fx::stop_block`]); `$__sbx_` names are reserved.
pub(super) const STOP: &str = "$__sbx_stop";

impl<'m> Fx<'_, 'm> {
    /// Notes a fenced access in `%__sbx_f` (one predicated move); `report` stores it in the
    /// control block when the thread leaves the function, so a hot loop carries no store.
    pub(super) fn fault(&self, out: &mut Vec<O<'m>>, guard: Option<(Str<'m>, bool)>) {
        self.deferred.set(true);
        Self::text(out, guard.as_ref(), |t| put(t, "mov.u32 %__sbx_f, 1;\n"));
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

    /// The stop path of a thread stopped at a guarded back-edge, labelled `$__sbx_L<stop>`
    /// (from `Fx::backedge`), placed right after the back-edge's branch: it reports the stop,
    /// clears the count so that every later back-edge polls again, and goes on after the loop.
    /// With `falls_through`, the code before it may fall into it, and jumps over it instead.
    /// Its own label is text (a report follows it, so no block ends in it); the label after
    /// it is a statement, which a block's end sees (`Fx::stmts`).
    pub(super) fn leave_loop(&mut self, stop: u32, falls_through: bool, out: &mut Vec<O<'m>>) {
        let after = falls_through.then(|| self.label());
        Self::with_text(out, |t| {
            if let Some(after) = &after {
                put(t, "\tbra.uni ");
                put(t, after);
                put(t, ";\n");
            }
            stop_label(t, Some(stop));
            put(t, ":\n");
            report_stop(t);
            put(t, "\tmov.u32 %__sbx_cnt, 0;\n");
        });
        if let Some(after) = after {
            out.push(O::new(Stmt::Label(after.into(), self.line)));
        }
    }

    /// The function's stop block, after its body (and its prologue, whose poll may branch
    /// there too), when some poll branches to it: it reports the stop and exits. A `ret`
    /// before it keeps a body that ends without one from falling into it.
    pub(super) fn stop_block(&self, body: &mut Vec<O<'m>>) {
        if !self.stops.get() {
            return;
        }
        Self::with_text(body, |t| {
            put(t, "\tret;\n");
            put(t, STOP);
            put(t, ":\n");
            report_stop(t);
            put(t, "\texit;\n");
        });
    }
}

/// The label of a stop path: the function's stop block's, or `$__sbx_L<n>` ([`Fx::leave_loop`]).
pub(super) fn stop_label(t: &mut String, stop: Option<u32>) {
    match stop {
        None => put(t, STOP),
        Some(n) => {
            put(t, super::rewrite::LABEL);
            super::print::unsigned(t, n.into());
        }
    }
}

/// Stores the fault word if the function noted a fenced access (`Fx::fault`): its two lines.
pub(super) fn report(t: &mut String) {
    put(t, "\tsetp.ne.u32 %__sbx_p, %__sbx_f, 0;\n\t@%__sbx_p ");
    store_fault_tag(t);
}

/// `st.volatile.global.u32 [%__sbx_ctl+CTL_FAULT_TAG], %__sbx_tag;` and its line's end.
fn store_fault_tag(t: &mut String) {
    put(t, "st.volatile.global.u32 ");
    super::poll::ctl_word(t, super::CTL_FAULT_TAG);
    put(t, ", %__sbx_tag;\n");
}

/// A stopped thread's report: its launch's tag into the stopped word if that is still 0, so
/// the host can name the kernel that was running (a plain load and store, not an atomic: any
/// running kernel's tag is a right answer, and the word may be in host memory), and into the
/// fault word if the thread noted a fenced access. The tag is read from the launch's parameter
/// here (its high word, as the prologue derives `%__sbx_tag`: bits 32–47; the start counter
/// and LAUNCH_SKIPS_ENTRY_READ above are masked off), so that no register has to hold it across
/// the function. The same
/// lines everywhere: built once per process.
fn report_stop(t: &mut String) {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    put(
        t,
        TEXT.get_or_init(|| {
            let mut t = String::new();
            t.push_str("\tld.volatile.global.u32 %__sbx_t, ");
            super::poll::ctl_word(&mut t, super::CTL_STOPPED_TAG);
            t.push_str(";\n\tsetp.eq.u32 %__sbx_q, %__sbx_t, 0;\n\tld.param.u32 %__sbx_t, [");
            t.push_str(&super::params::hidden_param("launch"));
            t.push_str("+4];\n\tand.b32 %__sbx_t, %__sbx_t, ");
            super::print::unsigned(&mut t, super::poll::TAG_MASK.into());
            t.push_str(";\n\t@%__sbx_q st.volatile.global.u32 ");
            super::poll::ctl_word(&mut t, super::CTL_STOPPED_TAG);
            t.push_str(", %__sbx_t;\n\tsetp.ne.u32 %__sbx_q, %__sbx_f, 0;\n");
            t.push_str("\t@%__sbx_q st.volatile.global.u32 ");
            super::poll::ctl_word(&mut t, super::CTL_FAULT_TAG);
            t.push_str(", %__sbx_t;\n");
            t
        }),
    );
}
