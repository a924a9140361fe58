//! The parameters the rewrite adds to functions and call blocks: the hidden values' names and
//! their `.param` declarations. The names are spelled out as static strings: formatting them
//! was an allocation per parameter of every function, prologue and call. [`spelled`] is that
//! lookup, for these names and the sandbox's registers (poll.rs) alike.

use super::HIDDEN_PARAMS;
use crate::ast::{Space, Str, VarDecl};

/// Internal parameters of device functions after the five hidden ones: the caller's shared
/// window `[slo, shi)` and local window `[llo, lhi)`.
pub(crate) const INTERNAL_PARAMS: [&str; 4] = ["slo", "shi", "llo", "lhi"];

/// The hidden values a non-lean function receives, in order (after `__gpuhost_sbx_`): the five
/// the host passes an entry, plus, for a device function, the caller's windows. A slice of one
/// static list: gathered into a new `Vec`, they were an allocation per function rewritten.
pub(crate) fn hidden_params(is_entry: bool) -> &'static [&'static str] {
    const ALL: [&str; HIDDEN_PARAMS.len() + INTERNAL_PARAMS.len()] = {
        let mut all = [""; HIDDEN_PARAMS.len() + INTERNAL_PARAMS.len()];
        let mut k = 0;
        while k < all.len() {
            all[k] = if k < HIDDEN_PARAMS.len() {
                HIDDEN_PARAMS[k]
            } else {
                INTERNAL_PARAMS[k - HIDDEN_PARAMS.len()]
            };
            k += 1;
        }
        all
    };
    if is_entry {
        &ALL[..HIDDEN_PARAMS.len()]
    } else {
        &ALL
    }
}

/// What the `.param` of a hidden value is named: this, then the value's name.
pub(crate) const HIDDEN_PARAM_PREFIX: &str = "__gpuhost_sbx_";

/// `__gpuhost_sbx_<h>`, the `.param` of hidden value `h` ([`hidden_params`]), spelled out:
/// formatting it was an allocation per parameter of every function and every prologue.
pub(crate) fn hidden_param(h: &str) -> Str<'static> {
    const NAMES: [&str; 9] = [
        "__gpuhost_sbx_base",
        "__gpuhost_sbx_size",
        "__gpuhost_sbx_globals",
        "__gpuhost_sbx_ctl",
        "__gpuhost_sbx_launch",
        "__gpuhost_sbx_slo",
        "__gpuhost_sbx_shi",
        "__gpuhost_sbx_llo",
        "__gpuhost_sbx_lhi",
    ];
    spelled(&NAMES, HIDDEN_PARAM_PREFIX, h)
}

/// `prefix` + `name`, borrowed from `names` (each spelled out in full, `prefix` first) when it
/// is one of them, else made.
pub(crate) fn spelled(names: &[&'static str], prefix: &str, name: &str) -> Str<'static> {
    let at = prefix.len();
    match names
        .iter()
        .find(|n| n.len() == at + name.len() && n.get(at..) == Some(name))
    {
        Some(n) => Str::borrowed(n),
        None => Str::owned([prefix, name].concat()),
    }
}

/// `__gpuhost_sbx_c<k>`, the call block's `.param` for the `k`th hidden value (`Fx::call`),
/// spelled out as [`hidden_param`] is.
pub(crate) fn call_param(k: usize) -> Str<'static> {
    const NAMES: [&str; 9] = [
        "__gpuhost_sbx_c0",
        "__gpuhost_sbx_c1",
        "__gpuhost_sbx_c2",
        "__gpuhost_sbx_c3",
        "__gpuhost_sbx_c4",
        "__gpuhost_sbx_c5",
        "__gpuhost_sbx_c6",
        "__gpuhost_sbx_c7",
        "__gpuhost_sbx_c8",
    ];
    NAMES.get(k).map_or_else(
        || format!("__gpuhost_sbx_c{k}").into(),
        |n| Str::borrowed(n),
    )
}

/// A `.param` declaration the rewrite adds (hidden and call-block parameters).
pub(crate) fn param_decl(name: Str<'static>, ty: &'static str, line: u32) -> VarDecl<'static> {
    VarDecl {
        space: Space::Param,
        name,
        ty: ty.into(),
        vec: 1,
        align: None,
        count: None,
        init: Vec::new(),
        is_extern: false,
        linkage: None,
        line,
    }
}

#[cfg(test)]
mod tests {
    use super::{HIDDEN_PARAMS, INTERNAL_PARAMS, call_param, hidden_param};

    #[test]
    fn spelled_out_names_are_the_prefix_and_the_name() {
        for h in HIDDEN_PARAMS
            .iter()
            .chain(&INTERNAL_PARAMS)
            .chain(&["other"])
        {
            assert_eq!(hidden_param(h), format!("__gpuhost_sbx_{h}"));
        }
        for k in 0..12 {
            assert_eq!(call_param(k), format!("__gpuhost_sbx_c{k}"));
        }
    }
}
