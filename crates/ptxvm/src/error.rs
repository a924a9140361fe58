//! The crate's load-time error type: everything `Module::load` can reject, by cause.

/// Why a PTX module could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text is not well-formed PTX.
    #[error("PTX syntax error at line {line}:{col}: {msg}; fix the PTX text at that position")]
    Parse {
        /// 1-based source line.
        line: u32,
        /// 1-based source column.
        col: u32,
        /// What was expected or found.
        msg: String,
    },
    /// Well-formed PTX that this interpreter does not implement.
    #[error(
        "PTX line {line}: unsupported by ptxvm: {what}; run this module on an NVIDIA driver or avoid the construct"
    )]
    Unsupported {
        /// 1-based source line.
        line: u32,
        /// The construct that is not implemented.
        what: String,
    },
    /// Well-formed text that does not make sense (undefined register, label, type mismatch…).
    #[error("PTX line {line}: invalid program: {msg}")]
    Invalid {
        /// 1-based source line.
        line: u32,
        /// What is wrong.
        msg: String,
    },
    /// The sandbox (`sandbox::sandbox`) does not allow this construct in an untrusted module.
    #[error("PTX line {line}: refused by the sandbox: {what}")]
    Refused {
        /// 1-based source line (0 when not tied to one).
        line: u32,
        /// What was refused and what to change.
        what: String,
    },
    /// The input exceeds the size limits ptxvm accepts.
    #[error("PTX input too large ({bytes} bytes); split the module")]
    TooLarge {
        /// Size of the rejected input or structure.
        bytes: usize,
    },
    /// Linking: a module uses an `.extern` symbol that no module of the link defines.
    #[error(
        "Undefined reference to '{symbol}' in '{input}'; add the module that defines it (.visible) to the link"
    )]
    Undefined {
        /// The symbol.
        symbol: String,
        /// The module that uses it.
        input: String,
    },
    /// Linking: two modules define one symbol, or declare it as different things.
    #[error(
        "{what} of '{symbol}' in '{input}', first defined in '{first}'; keep one definition (make the others .weak or drop .visible)"
    )]
    Conflict {
        /// The symbol.
        symbol: String,
        /// The module being added.
        input: String,
        /// The module that defined or declared it first.
        first: String,
        /// What conflicts.
        what: String,
    },
    /// Linking: a module that cannot join the others (another `.address_size`).
    #[error("module '{input}' cannot be linked with the others: {what}")]
    Incompatible {
        /// The module being added.
        input: String,
        /// Why.
        what: String,
    },
}
