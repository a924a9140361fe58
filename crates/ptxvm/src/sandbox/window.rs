//! Shared- and local-memory window checks for the memory-access rewrites (fence.rs): an
//! access through a register to the shared or local space runs only inside the kernel's shared
//! window or the thread's local window, checked with one 32-bit compare; out of the window it
//! is skipped (or, for a shared atomic or a run of shared loads, redirected in-window) and the
//! fault word is set.

use super::fence::Src;
use super::print::O;
use super::put::put;
use super::rewrite::{Fx, R, imm};
use crate::ast::{Inst, Operand, Str};

impl<'m> Fx<'_, 'm> {
    /// Checks `%__sbx_a` (aligned down, cut to 32 bits) against `[lo, hi)`; returns the guard
    /// under which the access may run.
    pub(super) fn window_check(
        &self,
        out: &mut Vec<O<'m>>,
        w: u64,
        guard: Option<&(Str<'m>, bool)>,
        lo: &str,
        hi: &str,
    ) -> Option<(Str<'m>, bool)> {
        self.window_into(out, "a", "q", w, w, guard, (lo, hi))
    }

    /// Checks `%__sbx_<dst>` (aligned down to `w`, cut to 32 bits) and the `span` bytes from
    /// it against the window `[lo, hi)`; sets `%__sbx_<q>` to whether the access may run and
    /// returns it as a guard. One 32-bit compare: `(a - lo) mod 2^32 < n`, where the prologue
    /// set `n` = the count of in-window start offsets for this span (`hi - lo - span + 1`, or 0
    /// when the window is smaller); windows lie below 4 GiB (shared and local addresses are
    /// 32-bit), so an address below `lo` wraps past every `n`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn window_into(
        &self,
        out: &mut Vec<O<'m>>,
        dst: &str,
        q: &str,
        w: u64,
        span: u64,
        guard: Option<&(Str<'m>, bool)>,
        (lo, _hi): (&str, &str),
    ) -> Option<(Str<'m>, bool)> {
        // Borrowed for the fixed `%__sbx_q` (a single access's check): built once otherwise.
        let qname = super::poll::sreg_name(q);
        let shared = lo == "slo";
        // A window of one static variable has a known size, so the count is an immediate (a
        // count in a register per span stays live through the whole kernel).
        let count = self
            .static_window(shared)
            .map(|size| ((size + 1).max(span) - span) as i64);
        self.spans
            .borrow_mut()
            .insert((shared, if count.is_some() { 0 } else { span }));
        Self::text(out, None, |t| {
            put(t, "and.b64 %__sbx_");
            put(t, dst);
            put(t, ", %__sbx_");
            put(t, dst);
            put(t, ", ");
            super::print::int(t, (1i64 << 32) - w as i64);
            put(t, ";\n\tcvt.u32.u64 %__sbx_o, %__sbx_");
            put(t, dst);
            put(
                t,
                if shared {
                    ";\n\tsub.u32 %__sbx_o, %__sbx_o, %__sbx_sl;\n\t"
                } else {
                    ";\n\tsub.u32 %__sbx_o, %__sbx_o, %__sbx_ll;\n\t"
                },
            );
            put(
                t,
                if guard.is_some() {
                    "setp.lt.and.u32 "
                } else {
                    "setp.lt.u32 "
                },
            );
            put(t, &qname);
            put(t, ", %__sbx_o, ");
            match count {
                Some(n) => super::print::int(t, n),
                None => {
                    put(t, if shared { "%__sbx_sn" } else { "%__sbx_ln" });
                    super::print::unsigned(t, span);
                }
            }
            super::fence::guard_operand(t, guard);
            put(t, ";\n");
        });
        // Fault iff the access would have run (guard) but is out of the window.
        match guard {
            None => self.fault(out, Some((qname.clone(), true))),
            Some((g, neg)) => {
                Self::text(out, None, |t| {
                    put(t, "xor.pred %__sbx_p, ");
                    put(t, &qname);
                    put(t, ", ");
                    put(t, g);
                    put(t, ";\n");
                    if *neg {
                        put(t, "\tnot.pred %__sbx_p, %__sbx_p;\n");
                    }
                });
                self.fault(out, Some(("%__sbx_p".into(), false)));
            }
        }
        Some((qname, false))
    }

    /// A shared or local access through a register (or an unchecked variable offset).
    pub(super) fn windowed(
        &self,
        out: &mut Vec<O<'m>>,
        i: &Inst<'m>,
        at: usize,
        src: &Src<'_>,
        w: u64,
        sp: &'static str,
    ) -> R<()> {
        self.load(out, src, i.line)?;
        let (lo, hi) = if sp == "shared" {
            ("slo", "shi")
        } else {
            ("llo", "lhi")
        };
        let g = self.window_check(out, w, i.guard.as_ref(), lo, hi);
        // A skipped shared atomic becomes a branch around it in SASS (ptxas does not predicate
        // ATOMS): out of the window it goes, like a fenced global access, to a fixed in-window
        // address instead (`%__sbx_st<w>`, in the kernel's largest static shared variable), where
        // that variable holds the access (`redirect_fits`). (Runs of loads do the same,
        // group.rs; a single load stays predicated: a select would cost what it saves.)
        let redirect = sp == "shared"
            && matches!(i.opcode.as_ref(), "atom" | "red")
            && self.redirect_fits(w, w);
        match g {
            Some((q, _)) if redirect => {
                self.redirect(out, "a", w, q);
                self.access(out, i, at, sp, i.guard.clone());
            }
            g => self.access(out, i, at, sp, g),
        }
        Ok(())
    }

    /// `%__sbx_<reg>` := itself where `q` holds, else `%__sbx_st<w>` (see
    /// [`Self::redirect_targets`]).
    pub(super) fn redirect(&self, out: &mut Vec<O<'m>>, reg: &str, w: u64, q: Str<'m>) {
        self.targets.borrow_mut().insert(w);
        Self::text(out, None, |t| {
            put(t, "selp.b64 %__sbx_");
            put(t, reg);
            put(t, ", %__sbx_");
            put(t, reg);
            put(t, ", %__sbx_st");
            super::print::unsigned(t, w);
            put(t, ", ");
            put(t, &q);
            put(t, ";\n");
        });
    }

    /// The size of an entry's shared (or local) window when it is one variable of static size:
    /// the window is then exactly that variable.
    fn static_window(&self, shared: bool) -> Option<u64> {
        if !self.f.is_entry {
            return None;
        }
        let vars: Vec<Option<u64>> = if shared {
            let tree = self.info.tree_shared(self.f.name.as_ref());
            let own = self.shared_fn.values().map(|s| Some(*s));
            tree.iter().map(|(_, s)| *s).chain(own).collect()
        } else {
            self.locals.values().map(|s| Some(*s)).collect()
        };
        match vars.as_slice() {
            [Some(size)] => Some(*size),
            _ => None,
        }
    }

    /// The kernel's largest static shared variable (name, size, declared alignment; ties go to
    /// the first name), which every redirect reads inside: `None` in a device function, whose
    /// window is its caller's.
    fn floor_var(&self) -> Option<(&'m str, u64, u64)> {
        if !self.f.is_entry {
            return None;
        }
        let tree = self.info.tree_shared(self.f.name.as_ref());
        let named = tree.iter().filter_map(|&(n, s)| Some((n, s?)));
        let own = self.shared_fn.iter().map(|(&n, &s)| (n, s));
        named
            .chain(own)
            .min_by_key(|&(n, s)| (std::cmp::Reverse(s), n))
            .and_then(|(n, _)| self.static_var(n).map(|(_, size, align)| (n, size, align)))
    }

    /// Where `%__sbx_st<w>` points: the floor variable, and the bytes its start may be moved up
    /// to align it to `w` (0 when it is declared aligned to `w`). `None` without one.
    fn redirect_target(&self, w: u64) -> Option<(&'m str, u64, u64)> {
        let (var, size, align) = self.floor_var()?;
        Some((var, size, if align >= w { 0 } else { w - 1 }))
    }

    /// Whether `span` bytes read from `%__sbx_st<w>` stay inside the floor variable.
    pub(super) fn redirect_fits(&self, w: u64, span: u64) -> bool {
        self.redirect_target(w)
            .is_some_and(|(_, size, slack)| size >= span.saturating_add(slack))
    }

    /// The prologue's definition of `%__sbx_st<w>` for each redirect width used: the floor
    /// variable's own address where its declared alignment covers `w`. ptxas lays out shared
    /// memory itself, so it knows that address and merges a redirected run of loads into vector
    /// loads as it does the kernel's own (matmul_tiled's row read: 4 `LDS.128`); through an
    /// `add`/`and` aligning it up (the fallback, for a variable declared less aligned than its
    /// accesses) it did not, on the H200 (bench/h200-runs/2026-12-04-s30/).
    pub(super) fn redirect_targets(&self, out: &mut Vec<O<'m>>) {
        for w in self.targets.borrow().iter().copied() {
            let Some((var, _, slack)) = self.redirect_target(w) else {
                return;
            };
            let st = super::poll::st_reg(w);
            let var = Operand::Name(var.into());
            if slack == 0 {
                self.emit(out, None, "mov", &["u64"], &[st, var]);
            } else {
                self.emit(
                    out,
                    None,
                    "add",
                    &["u64"],
                    &[st.clone(), var, imm(slack as i64)],
                );
                self.emit(
                    out,
                    None,
                    "and",
                    &["b64"],
                    &[st.clone(), st, imm(-(w as i64))],
                );
            }
        }
    }
}
