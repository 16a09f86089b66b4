//! The executor of Go's `text/template`: walks the parsed trees over a [`Value`]
//! with Go's semantics and error texts
//! (`template: key:1:3: executing "key" at <.missing>: map has no entry for key "missing"`).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::fmt::{format_v, format_v_bytes, sprint_bytes, sprintf_bytes, sprintln_bytes};
use crate::func::{FuncDef, FuncError, FuncMap, Signature};
use crate::limits::{Limits, MAX_NESTING, RenderLimits, Stop};
use crate::parse::{Arg, Command, Node, Number, Pipe, Template, is_builtin};
use crate::value::{GoType, Kind, Value};

/// Options of one execution.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// `Option("missingkey=error")`: a missing map key is an error (ESO's
    /// `target.template` engine). Otherwise it yields `<no value>`.
    pub missingkey_error: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Keep values out of error messages: values that Go's texts embed print as
    /// `<redacted>`, and function errors marked [`FuncError::may_contain_data`]
    /// are withheld unless every argument of the call was a literal.
    pub redact: bool,
    /// Memory budget, deadline and cancellation of the execution, when it is
    /// not already part of a metered render (see [`crate::limits::RenderLimits`]).
    pub bounds: RenderLimits,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            missingkey_error: true,
            limits: Limits::default(),
            redact: false,
            bounds: RenderLimits::default(),
        }
    }
}

/// An execution error with Go's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecError {
    /// The error text as Go prints it (values replaced by `<redacted>` when the
    /// execution ran with [`ExecOptions::redact`]).
    pub message: String,
    /// Whether a resource limit was hit.
    pub limit: bool,
    /// Set when the render's memory budget, deadline or cancel flag stopped
    /// the execution (the message is then value-free).
    pub stop: Option<Stop>,
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExecError {}

enum Flow {
    Err(ExecError),
    Break,
    Continue,
}

type R<T> = Result<T, Flow>;

/// Below this much remaining stack, recursion continues on a new stack segment.
const STACK_RED_ZONE: usize = 128 * 1024;
/// Size of each new stack segment.
const STACK_GROW: usize = 4 * 1024 * 1024;

#[derive(Clone, Copy)]
enum Cur<'t> {
    None,
    Node(&'t Node),
    Pipe(&'t Pipe),
    Arg(&'t Arg),
    Cmd(&'t Command),
}

impl Cur<'_> {
    fn pos_and_text(&self) -> Option<(usize, String)> {
        match self {
            Cur::None => None,
            Cur::Node(n) => Some((n.pos(), n.to_string())),
            Cur::Pipe(p) => Some((p.pos, p.to_string())),
            Cur::Arg(a) => Some((a.pos(), a.to_string())),
            Cur::Cmd(c) => Some((c.pos, c.to_string())),
        }
    }
}

/// Overrides for the values of the root data map (binary values).
type RawData = (Rc<BTreeMap<String, String>>, Rc<BTreeMap<String, Value>>);

struct State<'t> {
    tmpl: &'t Template,
    funcs: &'t FuncMap,
    opts: &'t ExecOptions,
    out: Vec<u8>,
    vars: Vec<(String, Value)>,
    depth: usize,
    steps: u64,
    name: &'t str,
    node: Cur<'t>,
    raw: Option<RawData>,
    /// The last field of the chain being evaluated was a missing map key (without
    /// `missingkey=error`): Go's invalid value, not a nil interface.
    missed: bool,
}

enum Callee<'a> {
    Func(std::sync::Arc<FuncDef>),
    Builtin(&'static str),
    Method(&'a Rc<dyn crate::value::GoObject>, Signature),
}

fn builtin_sig(name: &str) -> Signature {
    use GoType::{Interface as I, ReflectValue as RV, String as S};
    match name {
        "and" | "or" | "index" | "slice" | "eq" | "call" => Signature::variadic(vec![RV], RV),
        "not" | "len" => Signature::fixed(vec![RV]),
        "ne" | "lt" | "le" | "gt" | "ge" => Signature::fixed(vec![RV, RV]),
        "printf" => Signature::variadic(vec![S], I),
        _ => Signature::variadic(vec![], I), // html js urlquery print println
    }
}

impl<'t> State<'t> {
    fn errorf(&self, msg: impl std::fmt::Display) -> Flow {
        Flow::Err(self.make_err(msg.to_string(), false))
    }

    fn make_err(&self, msg: String, limit: bool) -> ExecError {
        self.make_err_stop(msg, limit, None)
    }

    fn make_err_stop(&self, msg: String, limit: bool, stop: Option<Stop>) -> ExecError {
        let message = match self.node.pos_and_text() {
            None => format!("template: {}: {}", self.name, msg),
            Some((pos, context)) => {
                let text = &self.tmpl.text[..pos.min(self.tmpl.text.len())];
                let line = 1 + text.matches('\n').count();
                let col = match text.rfind('\n') {
                    Some(i) => pos - (i + 1),
                    None => pos,
                };
                format!(
                    "template: {}:{}:{}: executing {} at <{}>: {}",
                    self.tmpl.name,
                    line,
                    col,
                    crate::fmt::quote(self.name),
                    context,
                    msg
                )
            }
        };
        ExecError {
            message,
            limit,
            stop,
        }
    }

    fn limit_err(&self, msg: &str) -> Flow {
        Flow::Err(self.make_err(msg.to_string(), true))
    }

    /// A value as error texts embed it (`%v`), or `<redacted>`.
    fn shown(&self, v: &Value) -> String {
        if self.opts.redact {
            "<redacted>".to_string()
        } else {
            format_v(v)
        }
    }

    /// The error of a render stopped by its bounds (value-free).
    fn stop_err(&self, stop: Stop) -> Flow {
        Flow::Err(self.make_err_stop(stop.message().to_string(), true, Some(stop)))
    }

    /// Charges `bytes` to the render's memory budget.
    fn charge(&self, bytes: usize) -> R<()> {
        crate::limits::charge(bytes).map_err(|s| self.stop_err(s))
    }

    fn step(&mut self) -> R<()> {
        if let Err(s) = crate::limits::checkpoint() {
            return Err(self.stop_err(s));
        }
        self.steps += 1;
        if self.steps > self.opts.limits.max_steps {
            return Err(self.limit_err(&format!(
                "execution stopped: more than {} steps (limit)",
                self.opts.limits.max_steps
            )));
        }
        Ok(())
    }

    fn write(&mut self, b: &[u8]) -> R<()> {
        if self.out.len() + b.len() > self.opts.limits.max_output_bytes {
            return Err(self.limit_err(&format!(
                "execution stopped: output larger than {} bytes (limit)",
                self.opts.limits.max_output_bytes
            )));
        }
        self.charge(b.len())?;
        self.out.extend_from_slice(b);
        Ok(())
    }

    /// Values nested deeper than [`MAX_NESTING`] are refused (their drop and
    /// printing recurse); the check's work counts as execution steps.
    fn check_nesting(&mut self, v: &Value) -> R<()> {
        if !matches!(v, Value::List(_) | Value::Slice(_) | Value::Map(_)) {
            return Ok(());
        }
        let mut budget = self.opts.limits.max_steps.saturating_sub(self.steps);
        let before = budget;
        let r = nesting_exceeds(v, MAX_NESTING, &mut budget);
        self.steps += before - budget;
        match r {
            Ok(false) => Ok(()),
            Ok(true) => Err(self.limit_err(&format!(
                "value nested deeper than {MAX_NESTING} levels (limit)"
            ))),
            Err(()) => Err(self.limit_err(&format!(
                "execution stopped: more than {} steps (limit)",
                self.opts.limits.max_steps
            ))),
        }
    }

    fn mark(&self) -> usize {
        self.vars.len()
    }

    fn pop(&mut self, mark: usize) {
        self.vars.truncate(mark);
    }

    fn set_var(&mut self, name: &str, v: Value) -> R<()> {
        for (n, val) in self.vars.iter_mut().rev() {
            if n == name {
                *val = v;
                return Ok(());
            }
        }
        Err(self.errorf(format!("undefined variable: {name}")))
    }

    fn var_value(&self, name: &str) -> R<Value> {
        for (n, val) in self.vars.iter().rev() {
            if n == name {
                return Ok(val.clone());
            }
        }
        Err(self.errorf(format!("undefined variable: {name}")))
    }

    fn set_top_var(&mut self, n: usize, v: Value) {
        let len = self.vars.len();
        if n <= len {
            self.vars[len - n].1 = v;
        }
    }

    // ---- walking -----------------------------------------------------------------

    fn walk_list(&mut self, dot: &Value, list: &'t [Node]) -> R<()> {
        for n in list {
            self.walk(dot, n)?;
        }
        Ok(())
    }

    fn walk(&mut self, dot: &Value, node: &'t Node) -> R<()> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROW, || self.walk_node(dot, node))
    }

    fn walk_node(&mut self, dot: &Value, node: &'t Node) -> R<()> {
        self.step()?;
        self.node = Cur::Node(node);
        match node {
            Node::Text(t) => self.write(t.as_bytes()),
            Node::Action { pipe, .. } => {
                let val = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.print_value(node, &val)?;
                }
                Ok(())
            }
            Node::If(c) => {
                self.walk_if_or_with(false, dot, &c.pipe, &c.list, c.else_list.as_deref())
            }
            Node::With(c) => {
                self.walk_if_or_with(true, dot, &c.pipe, &c.list, c.else_list.as_deref())
            }
            Node::Range(c) => self.walk_range(dot, node, c),
            Node::Template { name, pipe, .. } => self.walk_template(dot, node, name, pipe.as_ref()),
            Node::Break { .. } => Err(Flow::Break),
            Node::Continue { .. } => Err(Flow::Continue),
        }
    }

    fn walk_if_or_with(
        &mut self,
        with: bool,
        dot: &Value,
        pipe: &'t Pipe,
        list: &'t [Node],
        else_list: Option<&'t [Node]>,
    ) -> R<()> {
        let mark = self.mark();
        let r = (|| {
            let val = self.eval_pipeline(dot, pipe)?;
            if val.is_true() {
                if with {
                    self.walk_list(&val, list)
                } else {
                    self.walk_list(dot, list)
                }
            } else if let Some(e) = else_list {
                self.walk_list(dot, e)
            } else {
                Ok(())
            }
        })();
        self.pop(mark);
        r
    }

    fn walk_range(&mut self, dot: &Value, node: &'t Node, r: &'t crate::parse::Control) -> R<()> {
        self.node = Cur::Node(node);
        let outer = self.mark();
        let res = self.walk_range_inner(dot, r);
        self.pop(outer);
        match res {
            Err(Flow::Break) => Ok(()),
            other => other,
        }
    }

    fn one_iteration(
        &mut self,
        r: &'t crate::parse::Control,
        mark: usize,
        index: Value,
        elem: Value,
    ) -> R<()> {
        self.step()?;
        let decl = &r.pipe.decl;
        if !decl.is_empty() {
            if r.pipe.is_assign {
                if decl.len() > 1 {
                    self.set_var(&decl[0], index.clone())?;
                } else {
                    self.set_var(&decl[0], elem.clone())?;
                }
            } else {
                self.set_top_var(1, elem.clone());
            }
        }
        if decl.len() > 1 {
            if r.pipe.is_assign {
                self.set_var(&decl[1], elem.clone())?;
            } else {
                self.set_top_var(2, index);
            }
        }
        let res = self.walk_list(&elem, &r.list);
        self.pop(mark);
        match res {
            Err(Flow::Continue) => Ok(()),
            other => other,
        }
    }

    fn walk_range_inner(&mut self, dot: &Value, r: &'t crate::parse::Control) -> R<()> {
        let val = self.eval_pipeline(dot, &r.pipe)?;
        let mark = self.mark();
        let ran = match &val {
            v if v.kind().is_int() || v.kind().is_uint() => {
                if r.pipe.decl.len() > 1 {
                    // Go reports at the node evaluated last (not the range node)
                    return Err(self.errorf(format!(
                        "can't use {} to iterate over more than one variable",
                        self.shown(&val)
                    )));
                }
                let n: i64 = match v.int_bits() {
                    Some(i) => i,
                    None => i64::try_from(v.uint_bits().unwrap_or(0)).unwrap_or(i64::MAX),
                };
                let mut i = 0i64;
                while i < n {
                    let elem = same_int_type(v, i);
                    self.one_iteration(r, mark, Value::Nil, elem)?;
                    i += 1;
                }
                n > 0
            }
            Value::List(items) => {
                for (i, e) in items.iter().enumerate() {
                    self.one_iteration(r, mark, Value::Int(i as i64), e.clone())?;
                }
                !items.is_empty()
            }
            Value::Slice(s) => {
                for (i, e) in s.items.iter().enumerate() {
                    self.one_iteration(r, mark, Value::Int(i as i64), e.clone())?;
                }
                !s.items.is_empty()
            }
            Value::Bytes(b) => {
                for (i, e) in b.iter().enumerate() {
                    self.one_iteration(r, mark, Value::Int(i as i64), Value::Uint8(*e))?;
                }
                !b.is_empty()
            }
            Value::Map(m) => {
                let entries = m.entries();
                for (k, e) in entries.iter() {
                    self.one_iteration(r, mark, Value::String(k.clone()), e.clone())?;
                }
                !entries.is_empty()
            }
            Value::StringMap(m) => {
                for k in m.keys() {
                    let e = self.string_map_get(m, k).unwrap_or_default();
                    self.one_iteration(r, mark, Value::String(k.clone()), e)?;
                }
                !m.is_empty()
            }
            Value::Nil => false,
            _ => {
                return Err(self.errorf(format!("range can't iterate over {}", self.shown(&val))));
            }
        };
        if !ran && let Some(e) = &r.else_list {
            self.walk_list(dot, e)?;
        }
        Ok(())
    }

    fn walk_template(
        &mut self,
        dot: &Value,
        node: &'t Node,
        name: &'t str,
        pipe: Option<&'t Pipe>,
    ) -> R<()> {
        self.node = Cur::Node(node);
        let Some(root) = self.tmpl.trees.get(name) else {
            return Err(self.errorf(format!("template {} not defined", crate::fmt::quote(name))));
        };
        if self.depth >= self.opts.limits.max_template_depth {
            return Err(self.limit_err(&format!(
                "exceeded maximum template depth ({})",
                self.opts.limits.max_template_depth
            )));
        }
        let new_dot = match pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => Value::Nil,
        };
        let saved_vars =
            std::mem::replace(&mut self.vars, vec![("$".to_string(), new_dot.clone())]);
        let saved_name = std::mem::replace(&mut self.name, name);
        self.depth += 1;
        let r = self.walk_list(&new_dot, root);
        self.depth -= 1;
        self.name = saved_name;
        self.vars = saved_vars;
        r
    }

    fn print_value(&mut self, node: &'t Node, v: &Value) -> R<()> {
        self.node = Cur::Node(node);
        match v {
            Value::Nil => self.write(b"<no value>"),
            Value::Func(_) => {
                Err(self.errorf(format!("can't print {node} of type {}", v.type_name())))
            }
            Value::String(s) => self.write(s.as_bytes()),
            Value::BinaryString(b) => self.write(b),
            _ => {
                let b = format_v_bytes(v);
                self.write(&b)
            }
        }
    }

    // ---- evaluation ----------------------------------------------------------------

    fn eval_pipeline(&mut self, dot: &Value, pipe: &'t Pipe) -> R<Value> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROW, || {
            self.eval_pipeline_inner(dot, pipe)
        })
    }

    fn eval_pipeline_inner(&mut self, dot: &Value, pipe: &'t Pipe) -> R<Value> {
        self.node = Cur::Pipe(pipe);
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_command(dot, cmd, value)?);
        }
        let value = value.unwrap_or_default();
        for v in &pipe.decl {
            if pipe.is_assign {
                self.set_var(v, value.clone())?;
            } else {
                self.vars.push((v.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, args: &[Arg], final_: &Option<Value>) -> R<()> {
        if args.len() > 1 || final_.is_some() {
            return Err(self.errorf(format!("can't give argument to non-function {}", args[0])));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &Value, cmd: &'t Command, final_: Option<Value>) -> R<Value> {
        self.step()?;
        let first = &cmd.args[0];
        match first {
            Arg::Field { .. } => return self.eval_field_node(dot, first, &cmd.args, final_),
            Arg::Chain { .. } => return self.eval_chain_node(dot, first, &cmd.args, final_),
            Arg::Identifier { name, .. } => {
                return self.eval_function(dot, first, name, Cur::Cmd(cmd), &cmd.args, final_);
            }
            Arg::Pipe(p) => {
                self.not_a_function(&cmd.args, &final_)?;
                return self.eval_pipeline(dot, p);
            }
            Arg::Variable { .. } => return self.eval_variable_node(dot, first, &cmd.args, final_),
            _ => {}
        }
        self.node = Cur::Arg(first);
        self.not_a_function(&cmd.args, &final_)?;
        match first {
            Arg::Bool { val, .. } => Ok(Value::Bool(*val)),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Nil { .. } => Err(self.errorf("nil is not a command")),
            Arg::Number { num, .. } => self.ideal_constant(first, num),
            Arg::Str { text, .. } => Ok(Value::String(text.clone())),
            _ => Err(self.errorf(format!(
                "can't evaluate command {}",
                crate::fmt::quote(&first.to_string())
            ))),
        }
    }

    fn ideal_constant(&mut self, arg: &'t Arg, n: &Number) -> R<Value> {
        self.node = Cur::Arg(arg);
        let t = &n.text;
        let is_hex_int = t.len() > 2
            && t.starts_with('0')
            && (t.as_bytes()[1] | 0x20) == b'x'
            && !t.contains(['p', 'P']);
        let is_rune = t.starts_with('\'');
        if n.is_complex {
            return Ok(Value::Complex128(n.complex.0, n.complex.1));
        }
        if n.is_float && !is_hex_int && !is_rune && t.contains(['.', 'e', 'E', 'p', 'P']) {
            return Ok(Value::Float64(n.float64));
        }
        if n.is_int {
            return Ok(Value::Int(n.int64));
        }
        if n.is_uint {
            return Err(self.errorf(format!("{t} overflows int")));
        }
        Ok(Value::Nil)
    }

    fn eval_field_node(
        &mut self,
        dot: &Value,
        field: &'t Arg,
        args: &'t [Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        self.node = Cur::Arg(field);
        let Arg::Field { idents, .. } = field else {
            return Ok(Value::Nil);
        };
        self.eval_field_chain(dot, dot.clone(), field, idents, args, final_)
    }

    fn eval_chain_node(
        &mut self,
        dot: &Value,
        chain: &'t Arg,
        args: &'t [Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        self.node = Cur::Arg(chain);
        let Arg::Chain { node, fields, .. } = chain else {
            return Ok(Value::Nil);
        };
        if let Arg::Nil { .. } = node.as_ref() {
            return Err(self.errorf(format!("indirection through explicit nil in {chain}")));
        }
        let pipe = self.eval_arg(dot, None, node)?;
        self.eval_field_chain(dot, pipe, chain, fields, args, final_)
    }

    fn eval_variable_node(
        &mut self,
        dot: &Value,
        var: &'t Arg,
        args: &'t [Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        self.node = Cur::Arg(var);
        let Arg::Variable { idents, .. } = var else {
            return Ok(Value::Nil);
        };
        let value = self.var_value(&idents[0])?;
        if idents.len() == 1 {
            self.not_a_function(args, &final_)?;
            return Ok(value);
        }
        self.eval_field_chain(dot, value, var, &idents[1..], args, final_)
    }

    fn eval_field_chain(
        &mut self,
        dot: &Value,
        receiver: Value,
        node: &'t Arg,
        idents: &'t [String],
        args: &'t [Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        let n = idents.len();
        let mut receiver = receiver;
        self.missed = false;
        for (i, ident) in idents.iter().enumerate().take(n - 1) {
            receiver = self.eval_field(dot, ident, node, &[], None, receiver, i > 0)?;
        }
        self.eval_field(dot, &idents[n - 1], node, args, final_, receiver, n > 1)
    }

    fn string_map_get(&self, m: &Rc<BTreeMap<String, String>>, key: &str) -> Option<Value> {
        if let Some((root, over)) = &self.raw
            && Rc::ptr_eq(root, m)
            && let Some(v) = over.get(key)
        {
            return Some(v.clone());
        }
        m.get(key).map(|s| Value::String(s.clone()))
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field(
        &mut self,
        dot: &Value,
        field_name: &str,
        node: &'t Arg,
        args: &'t [Arg],
        final_: Option<Value>,
        receiver: Value,
        from_field: bool,
    ) -> R<Value> {
        // Like Go's evalField, this does not move the error position: errors
        // report the node evaluated last.
        if receiver.is_nil() {
            // A missing map key yields Go's invalid value, and a field of an invalid
            // value is again invalid (`<no value>`); only a nil interface errors.
            if from_field && self.missed {
                return Ok(Value::Nil);
            }
            if from_field {
                return Err(self.errorf(format!(
                    "nil pointer evaluating interface {{}}.{field_name}"
                )));
            }
            if self.opts.missingkey_error {
                return Err(self.errorf(format!(
                    "nil data; no entry for key {}",
                    crate::fmt::quote(field_name)
                )));
            }
            return Ok(Value::Nil);
        }
        let has_args = args.len() > 1 || final_.is_some();
        match &receiver {
            Value::Object(o) => {
                if let Some(sig) = o.method(field_name) {
                    let o = o.clone();
                    return self.eval_call(
                        dot,
                        Callee::Method(&o, sig),
                        Cur::Arg(node),
                        field_name,
                        args,
                        final_,
                    );
                }
                if let Some(v) = o.field(field_name) {
                    if has_args {
                        return Err(self.errorf(format!(
                            "{field_name} has arguments but cannot be invoked as function"
                        )));
                    }
                    return Ok(v);
                }
            }
            Value::Map(m) => {
                if has_args {
                    return Err(
                        self.errorf(format!("{field_name} is not a method but has arguments"))
                    );
                }
                return match m.get(field_name) {
                    Some(v) => Ok(v),
                    None => self.missing_key(field_name),
                };
            }
            Value::StringMap(m) => {
                if has_args {
                    return Err(
                        self.errorf(format!("{field_name} is not a method but has arguments"))
                    );
                }
                return match self.string_map_get(m, field_name) {
                    Some(v) => Ok(v),
                    None => self.missing_key(field_name),
                };
            }
            _ => {}
        }
        Err(self.errorf(format!(
            "can't evaluate field {field_name} in type {}",
            receiver.type_name()
        )))
    }

    fn missing_key(&mut self, field_name: &str) -> R<Value> {
        if self.opts.missingkey_error {
            return Err(self.errorf(format!(
                "map has no entry for key {}",
                crate::fmt::quote(field_name)
            )));
        }
        self.missed = true;
        Ok(Value::Nil)
    }

    fn eval_function(
        &mut self,
        dot: &Value,
        ident: &'t Arg,
        name: &'t str,
        cmd: Cur<'t>,
        args: &'t [Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        self.node = Cur::Arg(ident);
        let callee = if let Some(f) = self.funcs.get(name) {
            Callee::Func(f.clone())
        } else if is_builtin(name) {
            Callee::Builtin(builtin_name(name))
        } else {
            return Err(self.errorf(format!(
                "{} is not a defined function",
                crate::fmt::quote(name)
            )));
        };
        self.eval_call(dot, callee, cmd, name, args, final_)
    }

    fn eval_call(
        &mut self,
        dot: &Value,
        callee: Callee<'_>,
        node: Cur<'t>,
        name: &str,
        args: &'t [Arg],
        final_: Option<Value>,
    ) -> R<Value> {
        let args: &'t [Arg] = if args.is_empty() { args } else { &args[1..] };
        let sig = match &callee {
            Callee::Func(f) => f.sig.clone(),
            Callee::Builtin(b) => builtin_sig(b),
            Callee::Method(_, s) => s.clone(),
        };
        let num_in = args.len() + usize::from(final_.is_some());
        let num_fixed;
        if sig.variadic.is_some() {
            num_fixed = sig.params.len();
            if num_in < num_fixed {
                return Err(self.errorf(format!(
                    "wrong number of args for {name}: want at least {} got {}",
                    sig.params.len(),
                    args.len()
                )));
            }
        } else {
            num_fixed = args.len();
            if num_in != sig.params.len() {
                return Err(self.errorf(format!(
                    "wrong number of args for {name}: want {} got {num_in}",
                    sig.params.len()
                )));
            }
        }
        let is_builtin = matches!(callee, Callee::Builtin(_));
        // A call whose arguments are all literals cannot see template data, so its
        // error text is shown even when redacting (`{{ fail "key x is required" }}`).
        let literal_only = final_.is_none()
            && !matches!(callee, Callee::Method(..))
            && args.iter().all(|a| {
                matches!(
                    a,
                    Arg::Str { .. } | Arg::Number { .. } | Arg::Bool { .. } | Arg::Nil { .. }
                )
            });
        if is_builtin && (name == "and" || name == "or") {
            let mut v = Value::Nil;
            for a in args {
                v = self.eval_arg(dot, Some(&GoType::ReflectValue), a)?;
                if v.is_true() == (name == "or") {
                    return Ok(v);
                }
            }
            if let Some(f) = final_ {
                v = self.validate_type(f, Some(&GoType::ReflectValue))?;
            }
            return Ok(v);
        }
        let mut argv: Vec<Value> = Vec::with_capacity(num_in);
        let mut i = 0;
        while i < num_fixed && i < args.len() {
            let t = sig.params.get(i).cloned().unwrap_or(GoType::Interface);
            argv.push(self.eval_arg(dot, Some(&t), &args[i])?);
            i += 1;
        }
        if let Some(vt) = &sig.variadic {
            while i < args.len() {
                argv.push(self.eval_arg(dot, Some(vt), &args[i])?);
                i += 1;
            }
        }
        if let Some(f) = final_ {
            let t = if let Some(vt) = &sig.variadic {
                if num_in - 1 < num_fixed {
                    sig.params[num_in - 1].clone()
                } else {
                    vt.clone()
                }
            } else {
                sig.params.last().cloned().unwrap_or(GoType::Interface)
            };
            argv.push(self.validate_type(f, Some(&t))?);
        }
        self.charge(crate::limits::arg_copy_bytes(&argv))?;
        let result = match &callee {
            Callee::Func(f) => f.call(&argv),
            Callee::Method(o, _) => o.call_method(name, &argv),
            Callee::Builtin(b) => {
                let callee_name = if *b == "call" {
                    if args.is_empty() {
                        String::new()
                    } else {
                        args[0].to_string()
                    }
                } else {
                    String::new()
                };
                self.call_builtin(b, &argv, &callee_name)
            }
        };
        match result {
            Ok(v) => {
                if !is_builtin {
                    self.check_nesting(&v)?;
                }
                let cap = crate::limits::remaining();
                self.charge(crate::limits::result_bytes(&v, &argv, cap))?;
                Ok(v)
            }
            Err(e) => {
                self.node = node;
                if let Some(s) = crate::limits::stopped() {
                    return Err(self.stop_err(s));
                }
                let msg = if self.opts.redact && e.may_contain_data && !literal_only {
                    "<error text withheld: it may contain secret data>".to_string()
                } else {
                    e.message
                };
                Err(self.errorf(format!("error calling {name}: {msg}")))
            }
        }
    }

    fn validate_type(&self, value: Value, typ: Option<&GoType>) -> R<Value> {
        let Some(typ) = typ else { return Ok(value) };
        if value.is_nil() {
            if matches!(typ, GoType::Interface | GoType::ReflectValue) {
                return Ok(Value::Nil);
            }
            if typ.can_be_nil() {
                return Ok(typ.zero());
            }
            return Err(self.errorf(format!("invalid value; expected {}", typ.name())));
        }
        if value.assignable_to(typ) {
            return Ok(value);
        }
        Err(self.errorf(format!(
            "wrong type for value; expected {}; got {}",
            typ.name(),
            value.type_name()
        )))
    }

    fn eval_arg(&mut self, dot: &Value, typ: Option<&GoType>, n: &'t Arg) -> R<Value> {
        self.node = Cur::Arg(n);
        match n {
            Arg::Dot { .. } => return self.validate_type(dot.clone(), typ),
            Arg::Nil { .. } => {
                let t = typ.cloned().unwrap_or(GoType::Interface);
                if t.can_be_nil() {
                    return Ok(t.zero());
                }
                return Err(self.errorf(format!("cannot assign nil to {}", t.name())));
            }
            Arg::Field { .. } => {
                let v = self.eval_field_node(dot, n, std::slice::from_ref(n), None)?;
                return self.validate_type(v, typ);
            }
            Arg::Variable { .. } => {
                let v = self.eval_variable_node(dot, n, &[], None)?;
                return self.validate_type(v, typ);
            }
            Arg::Pipe(p) => {
                let v = self.eval_pipeline(dot, p)?;
                return self.validate_type(v, typ);
            }
            Arg::Identifier { name, .. } => {
                let v = self.eval_function(dot, n, name, Cur::Arg(n), &[], None)?;
                return self.validate_type(v, typ);
            }
            Arg::Chain { .. } => {
                let v = self.eval_chain_node(dot, n, &[], None)?;
                return self.validate_type(v, typ);
            }
            _ => {}
        }
        let t = typ.cloned().unwrap_or(GoType::Interface);
        let k = t.kind();
        match (&t, n) {
            (GoType::Interface | GoType::ReflectValue, _) => self.eval_empty_interface(dot, n),
            (GoType::Bool, Arg::Bool { val, .. }) => Ok(Value::Bool(*val)),
            (GoType::Bool, _) => Err(self.errorf(format!("expected bool; found {n}"))),
            (GoType::Complex128, Arg::Number { num, .. }) if num.is_complex => {
                Ok(Value::Complex128(num.complex.0, num.complex.1))
            }
            (GoType::Complex128, _) => Err(self.errorf(format!("expected complex; found {n}"))),
            (GoType::Float32 | GoType::Float64, Arg::Number { num, .. }) if num.is_float => {
                Ok(if t == GoType::Float32 {
                    Value::Float32(num.float64 as f32)
                } else {
                    Value::Float64(num.float64)
                })
            }
            (GoType::Float32 | GoType::Float64, _) => {
                Err(self.errorf(format!("expected float; found {n}")))
            }
            (_, Arg::Number { num, .. }) if k.is_int() && num.is_int => Ok(set_int(&t, num.int64)),
            _ if k.is_int() => Err(self.errorf(format!("expected integer; found {n}"))),
            (_, Arg::Number { num, .. }) if k.is_uint() && num.is_uint => {
                Ok(set_uint(&t, num.uint64))
            }
            _ if k.is_uint() => Err(self.errorf(format!("expected unsigned integer; found {n}"))),
            (GoType::String, Arg::Str { text, .. }) => Ok(Value::String(text.clone())),
            (GoType::String, _) => Err(self.errorf(format!("expected string; found {n}"))),
            _ => Err(self.errorf(format!("can't handle {n} for arg of type {}", t.name()))),
        }
    }

    fn eval_empty_interface(&mut self, dot: &Value, n: &'t Arg) -> R<Value> {
        self.node = Cur::Arg(n);
        match n {
            Arg::Bool { val, .. } => Ok(Value::Bool(*val)),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Number { num, .. } => self.ideal_constant(n, num),
            Arg::Str { text, .. } => Ok(Value::String(text.clone())),
            _ => Err(self.errorf(format!(
                "can't handle assignment of {n} to empty interface argument"
            ))),
        }
    }

    // ---- builtins -----------------------------------------------------------------

    fn call_builtin(
        &mut self,
        name: &str,
        a: &[Value],
        callee_name: &str,
    ) -> Result<Value, FuncError> {
        match name {
            "not" => Ok(Value::Bool(!a[0].is_true())),
            "print" => Ok(Value::from_go_bytes(sprint_bytes(a))),
            "println" => Ok(Value::from_go_bytes(sprintln_bytes(a))),
            "printf" => {
                let f = a[0]
                    .go_str_bytes()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                Ok(Value::from_go_bytes(sprintf_bytes(&f, &a[1..])))
            }
            "html" => Ok(Value::from_go_bytes(html_escape(&eval_args(a)))),
            "js" => Ok(Value::from_go_bytes(js_escape(&eval_args(a)))),
            "urlquery" => Ok(Value::String(query_escape(&eval_args(a)))),
            "len" => builtin_len(&a[0]).map(|n| Value::Int(n as i64)),
            "index" => self.builtin_index(&a[0], &a[1..]),
            "slice" => builtin_slice(&a[0], &a[1..]),
            "eq" => builtin_eq(&a[0], &a[1..], self.opts.redact).map(Value::Bool),
            "ne" => builtin_eq(&a[0], &a[1..2], self.opts.redact).map(|b| Value::Bool(!b)),
            "lt" => builtin_lt(&a[0], &a[1]).map(Value::Bool),
            "le" => builtin_le(&a[0], &a[1], self.opts.redact).map(Value::Bool),
            "gt" => builtin_le(&a[0], &a[1], self.opts.redact).map(|b| Value::Bool(!b)),
            "ge" => builtin_lt(&a[0], &a[1]).map(|b| Value::Bool(!b)),
            "call" => builtin_call(callee_name, &a[0], &a[1..]),
            _ => Err(FuncError::public(format!("unknown builtin {name}"))),
        }
    }

    fn builtin_index(&self, item: &Value, indexes: &[Value]) -> Result<Value, FuncError> {
        if item.is_nil() {
            return Err(FuncError::public("index of untyped nil"));
        }
        let mut item = item.clone();
        for (n, index) in indexes.iter().enumerate() {
            if item.is_nil() && n > 0 {
                return Err(FuncError::public("index of nil pointer"));
            }
            item = match &item {
                Value::List(_)
                | Value::Slice(_)
                | Value::String(_)
                | Value::BinaryString(_)
                | Value::Bytes(_) => {
                    let len = item.len().unwrap_or(0);
                    let x = index_arg(index, len)?;
                    match &item {
                        Value::List(l) => l.get(x).cloned(),
                        Value::Slice(s) => s.items.get(x).cloned(),
                        Value::Bytes(b) => b.get(x).map(|c| Value::Uint8(*c)),
                        _ => item
                            .go_str_bytes()
                            .and_then(|b| b.get(x))
                            .map(|c| Value::Uint8(*c)),
                    }
                    .ok_or_else(|| {
                        FuncError::public(
                            if matches!(item, Value::String(_) | Value::BinaryString(_)) {
                                "reflect: string index out of range"
                            } else {
                                "reflect: slice index out of range"
                            },
                        )
                    })?
                }
                Value::Map(m) => {
                    let k = map_key(index)?;
                    m.get(&k).unwrap_or(Value::Nil)
                }
                Value::StringMap(m) => {
                    let k = map_key(index)?;
                    self.string_map_get(m, &k)
                        .unwrap_or_else(|| Value::String(String::new()))
                }
                other => {
                    return Err(FuncError::public(format!(
                        "can't index item of type {}",
                        other.type_name()
                    )));
                }
            };
        }
        Ok(item)
    }
}

fn builtin_name(name: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf",
        "println", "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
    ];
    NAMES
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("print")
}

fn same_int_type(v: &Value, i: i64) -> Value {
    match v {
        Value::Int(_) => Value::Int(i),
        Value::Int8(_) => Value::Int8(i as i8),
        Value::Int16(_) => Value::Int16(i as i16),
        Value::Int32(_) => Value::Int32(i as i32),
        Value::Int64(_) => Value::Int64(i),
        Value::Duration(_) => Value::Duration(i),
        Value::Uint(_) => Value::Uint(i as u64),
        Value::Uint8(_) => Value::Uint8(i as u8),
        Value::Uint16(_) => Value::Uint16(i as u16),
        Value::Uint32(_) => Value::Uint32(i as u32),
        _ => Value::Uint64(i as u64),
    }
}

fn set_int(t: &GoType, v: i64) -> Value {
    match t {
        GoType::Int8 => Value::Int8(v as i8),
        GoType::Int16 => Value::Int16(v as i16),
        GoType::Int32 => Value::Int32(v as i32),
        GoType::Int64 => Value::Int64(v),
        GoType::Duration => Value::Duration(v),
        _ => Value::Int(v),
    }
}

fn set_uint(t: &GoType, v: u64) -> Value {
    match t {
        GoType::Uint8 => Value::Uint8(v as u8),
        GoType::Uint16 => Value::Uint16(v as u16),
        GoType::Uint32 => Value::Uint32(v as u32),
        GoType::Uint => Value::Uint(v),
        _ => Value::Uint64(v),
    }
}

fn map_key(index: &Value) -> Result<String, FuncError> {
    match index {
        Value::Nil => Err(FuncError::public("value is nil; should be of type string")),
        Value::String(s) => Ok(s.clone()),
        Value::BinaryString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        other => Err(FuncError::public(format!(
            "value has type {}; should be string",
            other.type_name()
        ))),
    }
}

fn index_arg(index: &Value, cap: usize) -> Result<usize, FuncError> {
    let x: i64 = if let Some(i) = index.int_bits() {
        i
    } else if let Some(u) = index.uint_bits() {
        u as i64
    } else if index.is_nil() {
        return Err(FuncError::public("cannot index slice/array with nil"));
    } else {
        return Err(FuncError::public(format!(
            "cannot index slice/array with type {}",
            index.type_name()
        )));
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(FuncError::public(format!("index out of range: {x}")));
    }
    Ok(x as usize)
}

fn builtin_slice(item: &Value, indexes: &[Value]) -> Result<Value, FuncError> {
    if item.is_nil() {
        return Err(FuncError::public("slice of untyped nil"));
    }
    if indexes.len() > 3 {
        return Err(FuncError::public(format!(
            "too many slice indexes: {}",
            indexes.len()
        )));
    }
    let is_str = matches!(item, Value::String(_) | Value::BinaryString(_));
    let len = match item {
        Value::String(_) | Value::BinaryString(_) => {
            if indexes.len() == 3 {
                return Err(FuncError::public("cannot 3-index slice a string"));
            }
            item.len().unwrap_or(0)
        }
        Value::List(_) | Value::Slice(_) | Value::Bytes(_) => item.len().unwrap_or(0),
        other => {
            return Err(FuncError::public(format!(
                "can't slice item of type {}",
                other.type_name()
            )));
        }
    };
    let mut idx = [0usize, len, len];
    for (i, index) in indexes.iter().enumerate() {
        idx[i] = index_arg(index, len)?;
    }
    if idx[0] > idx[1] {
        return Err(FuncError::public(format!(
            "invalid slice index: {} > {}",
            idx[0], idx[1]
        )));
    }
    if indexes.len() == 3 && idx[1] > idx[2] {
        return Err(FuncError::public(format!(
            "invalid slice index: {} > {}",
            idx[1], idx[2]
        )));
    }
    let (a, b) = (idx[0], idx[1]);
    Ok(match item {
        Value::List(l) => Value::list(l[a..b].to_vec()),
        Value::Slice(s) => Value::typed_slice(s.elem.clone(), s.items[a..b].to_vec()),
        Value::Bytes(v) => Value::bytes(v[a..b].to_vec()),
        _ if is_str => Value::from_go_bytes(
            item.go_str_bytes()
                .map(|x| x[a..b].to_vec())
                .unwrap_or_default(),
        ),
        _ => Value::Nil,
    })
}

fn builtin_len(item: &Value) -> Result<usize, FuncError> {
    match item {
        Value::Nil => Err(FuncError::public(
            "reflect: call of reflect.Value.Type on zero Value",
        )),
        v => v
            .len()
            .ok_or_else(|| FuncError::public(format!("len of type {}", v.type_name()))),
    }
}

fn builtin_call(name: &str, f: &Value, args: &[Value]) -> Result<Value, FuncError> {
    let def = match f {
        Value::Nil => return Err(FuncError::public("call of nil")),
        Value::Func(d) => d.clone(),
        other => {
            return Err(FuncError::public(format!(
                "non-function {name} of type {}",
                other.type_name()
            )));
        }
    };
    let n = def.sig.num_in();
    if def.sig.variadic.is_some() {
        if args.len() < n - 1 {
            return Err(FuncError::public(format!(
                "wrong number of args for {name}: got {} want at least {}",
                args.len(),
                n - 1
            )));
        }
    } else if args.len() != n {
        return Err(FuncError::public(format!(
            "wrong number of args for {name}: got {} want {n}",
            args.len()
        )));
    }
    let mut argv = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        let t = def.sig.arg_type(i).cloned().unwrap_or(GoType::Interface);
        if a.is_nil() {
            if !t.can_be_nil() {
                return Err(FuncError::public(format!(
                    "arg {i}: value is nil; should be of type {}",
                    t.name()
                )));
            }
            argv.push(t.zero());
            continue;
        }
        if !a.assignable_to(&t) {
            return Err(FuncError::public(format!(
                "arg {i}: value has type {}; should be {}",
                a.type_name(),
                t.name()
            )));
        }
        argv.push(a.clone());
    }
    def.call(&argv)
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
enum BasicKind {
    Invalid,
    Bool,
    Complex,
    Int,
    Float,
    String,
    Uint,
}

fn basic_kind(v: &Value) -> BasicKind {
    let k = v.kind();
    match k {
        Kind::Bool => BasicKind::Bool,
        k if k.is_int() => BasicKind::Int,
        k if k.is_uint() => BasicKind::Uint,
        k if k.is_float() => BasicKind::Float,
        Kind::Complex128 => BasicKind::Complex,
        Kind::String => BasicKind::String,
        _ => BasicKind::Invalid,
    }
}

fn complex_of(v: &Value) -> (f64, f64) {
    match v {
        Value::Complex128(a, b) => (*a, *b),
        _ => (0.0, 0.0),
    }
}

fn builtin_eq(arg1: &Value, arg2: &[Value], redact: bool) -> Result<bool, FuncError> {
    if arg2.is_empty() {
        return Err(FuncError::public("missing argument for comparison"));
    }
    let k1 = basic_kind(arg1);
    for arg in arg2 {
        let k2 = basic_kind(arg);
        let truth = if k1 != k2 {
            match (k1, k2) {
                (BasicKind::Int, BasicKind::Uint) => {
                    let a = arg1.int_bits().unwrap_or(0);
                    a >= 0 && a as u64 == arg.uint_bits().unwrap_or(0)
                }
                (BasicKind::Uint, BasicKind::Int) => {
                    let b = arg.int_bits().unwrap_or(0);
                    b >= 0 && arg1.uint_bits().unwrap_or(0) == b as u64
                }
                _ => {
                    if !arg1.is_nil() && !arg.is_nil() {
                        return Err(FuncError::public(format!(
                            "incompatible types for comparison: {} and {}",
                            arg1.type_name(),
                            arg.type_name()
                        )));
                    }
                    false
                }
            }
        } else {
            match k1 {
                BasicKind::Bool => {
                    matches!((arg1, arg), (Value::Bool(a), Value::Bool(b)) if a == b)
                }
                BasicKind::Complex => complex_of(arg1) == complex_of(arg),
                BasicKind::Float => arg1.float_bits() == arg.float_bits(),
                BasicKind::Int => arg1.int_bits() == arg.int_bits(),
                BasicKind::String => arg1.go_str_bytes() == arg.go_str_bytes(),
                BasicKind::Uint => arg1.uint_bits() == arg.uint_bits(),
                BasicKind::Invalid => {
                    let (ka, kb) = (arg1.kind(), arg.kind());
                    let can_compare = ka == kb || ka == Kind::Invalid || kb == Kind::Invalid;
                    let shown = |v: &Value| {
                        if redact {
                            "<redacted>".to_string()
                        } else {
                            format_v(v)
                        }
                    };
                    if !can_compare {
                        return Err(FuncError::new(format!(
                            "non-comparable types {}: {}, {}: {}",
                            shown(arg1),
                            arg1.type_name(),
                            arg.type_name(),
                            shown(arg)
                        )));
                    }
                    if arg1.is_nil() || arg.is_nil() {
                        arg1.is_nil() == arg.is_nil()
                    } else {
                        match (arg1, arg) {
                            (Value::Object(a), Value::Object(b)) => match a.go_eq(b.as_ref()) {
                                Some(t) => a.type_name() == b.type_name() && t,
                                None => {
                                    return Err(FuncError::new(format!(
                                        "non-comparable type {}: {}",
                                        shown(arg),
                                        arg.type_name()
                                    )));
                                }
                            },
                            _ => {
                                return Err(FuncError::new(format!(
                                    "non-comparable type {}: {}",
                                    shown(arg),
                                    arg.type_name()
                                )));
                            }
                        }
                    }
                }
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

fn builtin_lt(arg1: &Value, arg2: &Value) -> Result<bool, FuncError> {
    let k1 = basic_kind(arg1);
    if k1 == BasicKind::Invalid {
        return Err(FuncError::public("invalid type for comparison"));
    }
    let k2 = basic_kind(arg2);
    if k2 == BasicKind::Invalid {
        return Err(FuncError::public("invalid type for comparison"));
    }
    if k1 != k2 {
        return match (k1, k2) {
            (BasicKind::Int, BasicKind::Uint) => {
                let a = arg1.int_bits().unwrap_or(0);
                Ok(a < 0 || (a as u64) < arg2.uint_bits().unwrap_or(0))
            }
            (BasicKind::Uint, BasicKind::Int) => {
                let b = arg2.int_bits().unwrap_or(0);
                Ok(b >= 0 && arg1.uint_bits().unwrap_or(0) < b as u64)
            }
            _ => Err(FuncError::public(format!(
                "incompatible types for comparison: {} and {}",
                arg1.type_name(),
                arg2.type_name()
            ))),
        };
    }
    Ok(match k1 {
        BasicKind::Bool | BasicKind::Complex | BasicKind::Invalid => {
            return Err(FuncError::public("invalid type for comparison"));
        }
        BasicKind::Float => arg1.float_bits() < arg2.float_bits(),
        BasicKind::Int => arg1.int_bits() < arg2.int_bits(),
        BasicKind::String => arg1.go_str_bytes() < arg2.go_str_bytes(),
        BasicKind::Uint => arg1.uint_bits() < arg2.uint_bits(),
    })
}

fn builtin_le(a: &Value, b: &Value, redact: bool) -> Result<bool, FuncError> {
    if builtin_lt(a, b)? {
        return Ok(true);
    }
    builtin_eq(a, std::slice::from_ref(b), redact)
}

/// `evalArgs`: a single string as is, otherwise `fmt.Sprint` with nil printed as
/// `<no value>`.
fn eval_args(a: &[Value]) -> Vec<u8> {
    if a.len() == 1
        && let Some(b) = a[0].go_str_bytes()
    {
        return b.to_vec();
    }
    let args: Vec<Value> = a
        .iter()
        .map(|v| {
            if v.is_nil() {
                Value::String("<no value>".into())
            } else {
                v.clone()
            }
        })
        .collect();
    sprint_bytes(&args)
}

/// Go's `template.HTMLEscapeString`.
pub fn html_escape(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    for &c in b {
        match c {
            0 => out.extend_from_slice("\u{FFFD}".as_bytes()),
            b'"' => out.extend_from_slice(b"&#34;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`.
pub fn js_escape(b: &[u8]) -> Vec<u8> {
    const HEX: &[u8] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.extend_from_slice(b"\\\\"),
                '\'' => out.extend_from_slice(b"\\'"),
                '"' => out.extend_from_slice(b"\\\""),
                '<' => out.extend_from_slice(b"\\u003C"),
                '>' => out.extend_from_slice(b"\\u003E"),
                '&' => out.extend_from_slice(b"\\u0026"),
                '=' => out.extend_from_slice(b"\\u003D"),
                c if (c as u32) < 0x20 => {
                    let v = c as u8;
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[(v >> 4) as usize]);
                    out.push(HEX[(v & 0xF) as usize]);
                }
                c if (c as u32) < 0x80 => out.push(c as u8),
                c => {
                    if crate::fmt::is_print(c) {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    } else {
                        out.extend_from_slice(format!("\\u{:04X}", c as u32).as_bytes());
                    }
                }
            }
        }
        for _ in chunk.invalid() {
            // utf8.DecodeRune yields RuneError (printable) for each invalid byte
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }
    out
}

/// Go's `url.QueryEscape`.
pub fn query_escape(b: &[u8]) -> String {
    const HEX: &[u8] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(c as char)
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push(HEX[(c >> 4) as usize] as char);
                out.push(HEX[(c & 0xF) as usize] as char);
            }
        }
    }
    out
}

/// Executes the template `tmpl` (its main tree) on `data`.
pub(crate) fn execute(
    tmpl: &Template,
    funcs: &FuncMap,
    data: &Value,
    raw: Option<RawData>,
    opts: &ExecOptions,
) -> Result<Vec<u8>, ExecError> {
    let mut st = State {
        tmpl,
        funcs,
        opts,
        out: Vec::new(),
        vars: vec![("$".to_string(), data.clone())],
        depth: 0,
        steps: 0,
        name: &tmpl.name,
        node: Cur::None,
        raw,
        missed: false,
    };
    let Some(root) = tmpl.trees.get(&tmpl.name) else {
        return Err(ExecError {
            message: format!(
                "template: {}: {} is an incomplete or empty template",
                tmpl.name,
                crate::fmt::quote(&tmpl.name)
            ),
            limit: false,
            stop: None,
        });
    };
    let _meter = crate::limits::enter_if_none(&opts.bounds);
    match st.walk_list(data, root) {
        Ok(()) => Ok(st.out),
        Err(Flow::Err(e)) => Err(e),
        Err(Flow::Break | Flow::Continue) => Ok(st.out),
    }
}

/// Whether `v` nests containers deeper than `cap` levels. Every container visited
/// costs one unit of `budget`; `Err` when the budget runs out.
fn nesting_exceeds(v: &Value, cap: usize, budget: &mut u64) -> Result<bool, ()> {
    let children_exceed =
        |items: &mut dyn Iterator<Item = &Value>, budget: &mut u64| -> Result<bool, ()> {
            for it in items {
                if matches!(it, Value::List(_) | Value::Slice(_) | Value::Map(_))
                    && nesting_exceeds(it, cap - 1, budget)?
                {
                    return Ok(true);
                }
            }
            Ok(false)
        };
    let container = matches!(v, Value::List(_) | Value::Slice(_) | Value::Map(_));
    if !container {
        return Ok(false);
    }
    if *budget == 0 {
        return Err(());
    }
    *budget -= 1;
    if cap == 0 {
        return Ok(true);
    }
    match v {
        Value::List(l) => children_exceed(&mut l.iter(), budget),
        Value::Slice(s) => {
            if matches!(
                s.elem,
                GoType::Interface | GoType::Slice(_) | GoType::MapStringInterface
            ) {
                children_exceed(&mut s.items.iter(), budget)
            } else {
                Ok(false)
            }
        }
        Value::Map(m) => {
            // no copy of the entries: growing a map with `set` in a loop stays linear
            let mut r = Ok(false);
            m.for_each_until(|_, it| {
                if matches!(it, Value::List(_) | Value::Slice(_) | Value::Map(_)) {
                    r = nesting_exceeds(it, cap - 1, budget);
                }
                matches!(r, Ok(false))
            });
            r
        }
        _ => Ok(false),
    }
}
