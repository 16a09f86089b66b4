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

// ---------------------------------------------------------------------------
// Per-render bounds: memory budget, deadline, cancellation.
// ---------------------------------------------------------------------------

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::value::Value;

/// Default memory budget of one render, in bytes (see [`RenderLimits::max_bytes`]).
pub const MAX_RENDER_BYTES: usize = 256 * 1024 * 1024;

/// The bounds of one render (one [`crate::render_secret_with`] call, or one
/// execution when the executor is called directly).
///
/// * `max_bytes`: the memory budget. Every value the render builds is charged
///   to it: each function result (its deep size; a result that is one of the
///   function's arguments, such as the map `set` returns, costs the size of the
///   other arguments), each string copied into a function's arguments, and the
///   output. The total is cumulative over the whole render (every template of
///   the Secret), so a loop that keeps rebuilding large values fails even when
///   each value is small enough.
/// * `deadline`: a wall-clock instant after which the render stops.
/// * `cancel`: a flag another thread sets to stop the render (shutdown, or a
///   supervisor enforcing the deadline).
///
/// The executor checks the deadline and the flag at every step; functions that
/// loop or build large values check them too. A function that is a single
/// non-interruptible computation (one `bcrypt` hash, one RSA key generation)
/// finishes before the check.
#[derive(Clone, Debug)]
pub struct RenderLimits {
    /// The memory budget of the render, in bytes.
    pub max_bytes: usize,
    /// Stop once this instant has passed.
    pub deadline: Option<Instant>,
    /// Stop once this flag is set.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            max_bytes: MAX_RENDER_BYTES,
            deadline: None,
            cancel: None,
        }
    }
}

/// Why a render was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The memory budget ran out.
    Budget,
    /// The deadline passed.
    Deadline,
    /// The cancel flag was set.
    Cancelled,
}

impl Stop {
    /// The value-free text of the stop.
    pub fn message(self) -> &'static str {
        match self {
            Stop::Budget => "template stopped: memory budget of the render exceeded",
            Stop::Deadline => "template stopped: deadline exceeded",
            Stop::Cancelled => "template stopped: render cancelled",
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl From<Stop> for crate::func::FuncError {
    fn from(s: Stop) -> Self {
        crate::func::FuncError::public(s.message())
    }
}

struct Meter {
    limits: RenderLimits,
    used: usize,
    stopped: Option<Stop>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// The meter of a render, active on this thread until dropped (the previous
/// one, if any, is restored).
#[must_use = "the bounds apply while the guard lives"]
pub struct MeterGuard {
    prev: Option<Meter>,
}

impl Drop for MeterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        METER.with(|m| *m.borrow_mut() = prev);
    }
}

/// Starts metering a render on this thread with `limits`.
pub fn enter(limits: RenderLimits) -> MeterGuard {
    let meter = Meter {
        limits,
        used: 0,
        stopped: None,
    };
    let prev = METER.with(|m| m.borrow_mut().replace(meter));
    MeterGuard { prev }
}

/// [`enter`] unless a render is already metered on this thread.
pub(crate) fn enter_if_none(limits: &RenderLimits) -> Option<MeterGuard> {
    if METER.with(|m| m.borrow().is_some()) {
        None
    } else {
        Some(enter(limits.clone()))
    }
}

fn with_meter<T>(f: impl FnOnce(&mut Meter) -> Result<T, Stop>, none: T) -> Result<T, Stop> {
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(meter) => {
            if let Some(s) = meter.stopped {
                return Err(s);
            }
            let r = f(meter);
            if let Err(s) = &r {
                meter.stopped = Some(*s);
            }
            r
        }
        None => Ok(none),
    })
}

/// Checks the cancel flag and the deadline of the current render.
pub fn checkpoint() -> Result<(), Stop> {
    with_meter(
        |m| {
            if let Some(c) = &m.limits.cancel
                && c.load(Ordering::Relaxed)
            {
                return Err(Stop::Cancelled);
            }
            if let Some(d) = m.limits.deadline
                && Instant::now() >= d
            {
                return Err(Stop::Deadline);
            }
            Ok(())
        },
        (),
    )
}

/// Charges `bytes` to the budget of the current render.
pub fn charge(bytes: usize) -> Result<(), Stop> {
    with_meter(
        |m| {
            m.used = m.used.saturating_add(bytes);
            if m.used > m.limits.max_bytes {
                return Err(Stop::Budget);
            }
            Ok(())
        },
        (),
    )
}

/// Fails (and stops the render) when `bytes` more would exceed the budget,
/// without charging them: the pre-flight check of a function about to build a
/// value of that size (the executor charges the result).
pub fn fits(bytes: usize) -> Result<(), Stop> {
    with_meter(
        |m| {
            if m.used.saturating_add(bytes) > m.limits.max_bytes {
                return Err(Stop::Budget);
            }
            Ok(())
        },
        (),
    )
}

/// The budget left in the current render (`usize::MAX` when not metered).
pub fn remaining() -> usize {
    METER.with(|m| match m.borrow().as_ref() {
        Some(meter) => meter.limits.max_bytes.saturating_sub(meter.used),
        None => usize::MAX,
    })
}

/// Why the current render stopped, if it did.
pub fn stopped() -> Option<Stop> {
    METER.with(|m| m.borrow().as_ref().and_then(|meter| meter.stopped))
}

/// The memory a value occupies, counted as its deep size (shared parts are
/// counted once per reference), capped: returns a value above `cap` as soon as
/// the count exceeds it.
pub fn value_bytes(v: &Value, cap: usize) -> usize {
    let mut total = 0usize;
    add_value_bytes(v, cap, &mut total);
    total
}

const VALUE_SIZE: usize = std::mem::size_of::<Value>();

fn add_value_bytes(v: &Value, cap: usize, total: &mut usize) {
    *total = total.saturating_add(VALUE_SIZE);
    if *total > cap {
        return;
    }
    match v {
        Value::String(s) => *total = total.saturating_add(s.len()),
        Value::BinaryString(b) | Value::Bytes(b) => *total = total.saturating_add(b.len()),
        Value::List(l) => {
            for it in l.iter() {
                add_value_bytes(it, cap, total);
                if *total > cap {
                    return;
                }
            }
        }
        Value::Slice(s) => {
            for it in &s.items {
                add_value_bytes(it, cap, total);
                if *total > cap {
                    return;
                }
            }
        }
        Value::Map(m) => m.for_each_until(|k, v| {
            *total = total.saturating_add(k.len() + VALUE_SIZE);
            add_value_bytes(v, cap, total);
            *total <= cap
        }),
        Value::StringMap(m) => {
            for (k, v) in m.iter() {
                *total = total.saturating_add(k.len() + v.len() + VALUE_SIZE);
                if *total > cap {
                    return;
                }
            }
        }
        _ => {}
    }
}

/// The bytes to charge for a function result: nothing new when the result is
/// one of the arguments (`default $l ""`), the size of the other arguments when
/// it is an argument mutated in place (the map `set` returns), else its deep
/// size. Capped like [`value_bytes`].
pub(crate) fn result_bytes(result: &Value, args: &[Value], cap: usize) -> usize {
    match args.iter().position(|a| a.shares_storage(result)) {
        Some(i) => {
            if !matches!(result, Value::Map(_)) {
                return 0;
            }
            let mut total = 0usize;
            for (j, a) in args.iter().enumerate() {
                if j != i {
                    add_value_bytes(a, cap, &mut total);
                    if total > cap {
                        break;
                    }
                }
            }
            total
        }
        None => value_bytes(result, cap),
    }
}

/// The bytes of the strings copied into a function's arguments (other values
/// are shared, not copied).
pub(crate) fn arg_copy_bytes(args: &[Value]) -> usize {
    args.iter()
        .map(|a| match a {
            Value::String(s) => s.len(),
            _ => 0,
        })
        .fold(0usize, usize::saturating_add)
}
