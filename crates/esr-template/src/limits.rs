//! Resource limits of template execution.
//!
//! Arbitrary template text must never hang or exhaust memory. The executor counts
//! steps (nodes walked, commands evaluated, range iterations), the depth of
//! nested `template` calls and the output size, and fails with an error past the
//! limits. Functions that build values whose size depends on their arguments
//! (`repeat`, `until`, `randBytes`, …) must check [`MAX_VALUE_BYTES`] /
//! [`MAX_COLLECTION_LEN`] themselves and return a [`crate::func::FuncError`].

/// Maximum number of execution steps of one execution.
pub const MAX_STEPS: u64 = 1_000_000;
/// Maximum output size of one execution, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// Maximum nesting of `template`/`block` invocations.
pub const MAX_TEMPLATE_DEPTH: usize = 1_000;
/// Maximum nesting of parentheses/control structures accepted by the parser.
pub const MAX_PARSE_DEPTH: usize = 1_000;
/// Maximum nesting of lists/maps in a value returned by a function (deeper
/// values, and cyclic maps, are an execution error).
pub const MAX_NESTING: usize = 500;
/// Maximum size of a single string or byte value built by a function.
pub const MAX_VALUE_BYTES: usize = 16 * 1024 * 1024;
/// Maximum number of elements of a list or map built by a function.
pub const MAX_COLLECTION_LEN: usize = 1_000_000;

/// Tunable limits for one execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// See [`MAX_STEPS`].
    pub max_steps: u64,
    /// See [`MAX_OUTPUT_BYTES`].
    pub max_output_bytes: usize,
    /// See [`MAX_TEMPLATE_DEPTH`].
    pub max_template_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: MAX_STEPS,
            max_output_bytes: MAX_OUTPUT_BYTES,
            max_template_depth: MAX_TEMPLATE_DEPTH,
        }
    }
}
