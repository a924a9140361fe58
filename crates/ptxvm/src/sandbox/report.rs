//! Reporting fenced accesses. A fenced access only notes itself in the function's `%__sbx_f`
//! (one predicated move: a store per access would put an LDC, an LDC.64 and an STG into every
//! hot loop); the function stores its launch's tag in the control block's fault word before
//! every `ret` and `exit` when the note is set, and a thread stopped by a poll does so before
//! it exits (poll.rs). The host reads the word after the launch, so the later store changes
//! nothing it sees.

use super::print::O;
use super::rewrite::Fx;
use crate::ast::Str;
use crate::isa::Opcode;

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

    /// Stores the fault word if this function noted a fenced access (`fault`).
    fn report(&self, out: &mut Vec<O<'m>>) {
        Self::text(out, None, |t| {
            t.push_str("setp.ne.u32 %__sbx_p, %__sbx_f, 0;\n")
        });
        self.fault_now(out, Some(("%__sbx_p".into(), false)));
    }

    /// With fenced accesses noted in the body, reports them before every `ret` and `exit` and
    /// at the end of the body (an entry may end without `ret`).
    pub(super) fn add_reports(&self, body: &mut Vec<O<'m>>) {
        if !self.deferred.get() {
            return;
        }
        fn walk<'m>(fx: &Fx<'_, 'm>, body: &mut Vec<O<'m>>) {
            // Nested blocks in place; this level rebuilt only around its returns, in runs
            // moved whole: rebuilding it one statement at a time cost more than finding them.
            let mut rets = Vec::new();
            for (k, o) in body.iter_mut().enumerate() {
                match o {
                    O::Inst(i) if matches!(i.op, Some(Opcode::Ret | Opcode::Exit)) => rets.push(k),
                    O::Block(b) => walk(fx, b),
                    _ => {}
                }
            }
            around(fx, body, rets);
        }
        /// Puts a report before each of `rets`, positions of `body`'s returns in order.
        fn around<'m>(fx: &Fx<'_, 'm>, body: &mut Vec<O<'m>>, rets: Vec<usize>) {
            if rets.is_empty() {
                return;
            }
            let len = body.len();
            // One more for the report at the body's end (`add_reports`): growing the body for
            // it copied the whole of it.
            let old = std::mem::replace(body, Vec::with_capacity(len + rets.len() + 1));
            let mut old = old.into_iter();
            let mut at = 0;
            for k in rets {
                body.extend(old.by_ref().take(k - at));
                fx.report(body);
                at = k;
            }
            body.extend(old);
        }
        walk(self, body);
        self.report(body);
    }
}

/// `st.volatile.global.u32 [%__sbx_ctl+CTL_FAULT_TAG], %__sbx_tag;` and its line's end.
fn store_fault_tag(t: &mut String) {
    t.push_str("st.volatile.global.u32 ");
    super::poll::ctl_word(t, super::CTL_FAULT_TAG);
    t.push_str(", %__sbx_tag;\n");
}
