//! The lexer of Go's `text/template` (default delimiters `{{` `}}`), producing the
//! same items, trim-marker handling and error texts as Go's `parse/lex.go`.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemType {
    Error,
    Bool,
    Char,
    CharConstant,
    Complex,
    Assign,
    Declare,
    Eof,
    Field,
    Identifier,
    LeftDelim,
    LeftParen,
    Number,
    Pipe,
    RawString,
    RightDelim,
    RightParen,
    Space,
    String,
    Text,
    Variable,
    // keywords
    Block,
    Break,
    Continue,
    Dot,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

impl ItemType {
    fn is_keyword(self) -> bool {
        matches!(
            self,
            ItemType::Block
                | ItemType::Break
                | ItemType::Continue
                | ItemType::Dot
                | ItemType::Define
                | ItemType::Else
                | ItemType::End
                | ItemType::If
                | ItemType::Nil
                | ItemType::Range
                | ItemType::Template
                | ItemType::With
        )
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub typ: ItemType,
    pub pos: usize,
    pub val: std::rc::Rc<str>,
    pub line: usize,
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.typ {
            ItemType::Eof => f.write_str("EOF"),
            ItemType::Error => f.write_str(&self.val),
            t if t.is_keyword() => write!(f, "<{}>", self.val),
            _ => {
                if self.val.chars().count() > 10 {
                    let head: String = self.val.chars().take(10).collect();
                    write!(f, "{}...", crate::fmt::quote(&head))
                } else {
                    f.write_str(&crate::fmt::quote(&self.val))
                }
            }
        }
    }
}

/// Go's default delimiters.
pub(crate) const LEFT_DELIM: &str = "{{";
/// Go's default delimiters.
pub(crate) const RIGHT_DELIM: &str = "}}";
const LEFT_COMMENT: &str = "/*";
const RIGHT_COMMENT: &str = "*/";
const TRIM_MARKER_LEN: usize = 2;

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric() && is_unicode_digit(c)
}

/// Go's `unicode.IsDigit` (decimal digits, category Nd).
fn is_unicode_digit(c: char) -> bool {
    if c.is_ascii_digit() {
        return true;
    }
    // Rust's is_numeric covers Nd, Nl, No; Go's IsDigit only Nd. Approximate Nd by
    // requiring a decimal digit value in any script: to_digit does not help for
    // non-ASCII, so accept is_numeric minus common Nl/No ranges.
    !matches!(c as u32, 0x00B2 | 0x00B3 | 0x00B9 | 0x00BC..=0x00BE | 0x2070..=0x2189 | 0x2460..=0x24FF
        | 0x2776..=0x2793 | 0x3007 | 0x3021..=0x3029 | 0x3038..=0x303A | 0x3192..=0x3195
        | 0x3220..=0x3229 | 0x3248..=0x324F | 0x3251..=0x325F | 0x3280..=0x3289 | 0x32B1..=0x32BF
        | 0x16EE..=0x16F0 | 0x10107..=0x10133 | 0x10140..=0x10178)
}

fn has_left_trim_marker(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && b[0] == b'-' && is_space(b[1] as char)
}

fn has_right_trim_marker(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && is_space(b[0] as char) && b[1] == b'-'
}

fn left_trim_length(s: &str) -> usize {
    s.len() - s.trim_start_matches(is_space).len()
}

fn right_trim_length(s: &str) -> usize {
    s.len() - s.trim_end_matches(is_space).len()
}

pub(crate) struct Lexer<'a> {
    left_delim: &'a str,
    right_delim: &'a str,
    input: &'a str,
    pos: usize,
    start: usize,
    items: Vec<Item>,
    paren_depth: i64,
    line: usize,
    start_line: usize,
    inside_action: bool,
}

enum State {
    Text,
    LeftDelim,
    Comment,
    RightDelim,
    InsideAction,
    Space,
    Identifier,
    Field,
    Variable,
    Char,
    Number,
    Quote,
    RawQuote,
    Done,
}

impl<'a> Lexer<'a> {
    /// Lexes the whole input with the default delimiters. The last item is `Eof`
    /// or `Error`.
    #[cfg(test)]
    pub(crate) fn lex(input: &'a str) -> Vec<Item> {
        Self::lex_delims(input, LEFT_DELIM, RIGHT_DELIM)
    }

    /// Lexes the whole input with the given delimiters (empty means default).
    pub(crate) fn lex_delims(input: &'a str, left: &'a str, right: &'a str) -> Vec<Item> {
        let mut l = Lexer {
            left_delim: if left.is_empty() { LEFT_DELIM } else { left },
            right_delim: if right.is_empty() { RIGHT_DELIM } else { right },
            input,
            pos: 0,
            start: 0,
            items: Vec::new(),
            paren_depth: 0,
            line: 1,
            start_line: 1,
            inside_action: false,
        };
        let mut state = State::Text;
        loop {
            state = match state {
                State::Text => l.lex_text(),
                State::LeftDelim => l.lex_left_delim(),
                State::Comment => l.lex_comment(),
                State::RightDelim => l.lex_right_delim(),
                State::InsideAction => l.lex_inside_action(),
                State::Space => l.lex_space(),
                State::Identifier => l.lex_identifier(),
                State::Field => l.lex_field_or_variable(ItemType::Field),
                State::Variable => l.lex_field_or_variable(ItemType::Variable),
                State::Char => l.lex_char(),
                State::Number => l.lex_number(),
                State::Quote => l.lex_quote(),
                State::RawQuote => l.lex_raw_quote(),
                State::Done => break,
            };
        }
        l.items
    }

    fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    fn next(&mut self) -> Option<char> {
        let c = self.rest().chars().next()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn backup(&mut self, c: Option<char>) {
        if let Some(c) = c {
            self.pos -= c.len_utf8();
            if c == '\n' {
                self.line -= 1;
            }
        }
    }

    fn emit(&mut self, t: ItemType) {
        let val = self.input[self.start..self.pos].to_string();
        self.items.push(Item {
            typ: t,
            pos: self.start,
            val: val.into(),
            line: self.start_line,
        });
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn ignore(&mut self) {
        self.line += self.input[self.start..self.pos].matches('\n').count();
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn errorf(&mut self, msg: String) -> State {
        self.items.push(Item {
            typ: ItemType::Error,
            pos: self.start,
            val: msg.into(),
            line: self.start_line,
        });
        self.start = 0;
        self.pos = 0;
        self.input = "";
        State::Done
    }

    fn accept(&mut self, valid: &str) -> bool {
        if let Some(c) = self.peek()
            && valid.contains(c)
        {
            self.next();
            return true;
        }
        false
    }

    fn accept_run(&mut self, valid: &str) {
        while let Some(c) = self.peek() {
            if !valid.contains(c) {
                break;
            }
            self.next();
        }
    }

    fn lex_text(&mut self) -> State {
        if let Some(x) = self.rest().find(self.left_delim) {
            if x > 0 {
                let mut trim_len = 0;
                let delim_at = self.pos + x;
                if has_left_trim_marker(&self.input[delim_at + self.left_delim.len()..]) {
                    trim_len = right_trim_length(&self.input[self.start..delim_at]);
                }
                let text_end = delim_at - trim_len;
                self.line += self.input[self.pos..text_end].matches('\n').count();
                self.pos = text_end;
                if self.pos > self.start {
                    self.emit(ItemType::Text);
                }
                self.pos += trim_len;
                self.ignore();
            }
            return State::LeftDelim;
        }
        self.line += self.rest().matches('\n').count();
        self.pos = self.input.len();
        if self.pos > self.start {
            self.emit(ItemType::Text);
        }
        self.items.push(Item {
            typ: ItemType::Eof,
            pos: self.pos,
            val: "".into(),
            line: self.line,
        });
        State::Done
    }

    fn at_right_delim(&self) -> (bool, bool) {
        let r = self.rest();
        if has_right_trim_marker(r) && r[TRIM_MARKER_LEN..].starts_with(self.right_delim) {
            return (true, true);
        }
        if r.starts_with(self.right_delim) {
            return (true, false);
        }
        (false, false)
    }

    fn lex_left_delim(&mut self) -> State {
        self.pos += self.left_delim.len();
        let trim = has_left_trim_marker(self.rest());
        let after = if trim { TRIM_MARKER_LEN } else { 0 };
        if self.input[self.pos + after..].starts_with(LEFT_COMMENT) {
            self.pos += after;
            self.ignore();
            return State::Comment;
        }
        self.emit(ItemType::LeftDelim);
        self.inside_action = true;
        self.pos += after;
        self.ignore();
        self.paren_depth = 0;
        State::InsideAction
    }

    fn lex_comment(&mut self) -> State {
        self.pos += LEFT_COMMENT.len();
        let Some(x) = self.rest().find(RIGHT_COMMENT) else {
            return self.errorf("unclosed comment".into());
        };
        self.pos += x + RIGHT_COMMENT.len();
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.errorf("comment ends before closing delimiter".into());
        }
        if trim {
            self.pos += TRIM_MARKER_LEN;
        }
        self.pos += self.right_delim.len();
        if trim {
            self.pos += left_trim_length(self.rest());
        }
        self.ignore();
        State::Text
    }

    fn lex_right_delim(&mut self) -> State {
        let (_, trim) = self.at_right_delim();
        if trim {
            self.pos += TRIM_MARKER_LEN;
            self.ignore();
        }
        self.pos += self.right_delim.len();
        self.emit(ItemType::RightDelim);
        if trim {
            self.pos += left_trim_length(self.rest());
            self.ignore();
        }
        self.inside_action = false;
        State::Text
    }

    fn lex_inside_action(&mut self) -> State {
        let (delim, _) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return State::RightDelim;
            }
            return self.errorf("unclosed left paren".into());
        }
        let Some(r) = self.next() else {
            return self.errorf("unclosed action".into());
        };
        match r {
            c if is_space(c) => {
                self.backup(Some(c));
                return State::Space;
            }
            '=' => self.emit(ItemType::Assign),
            ':' => {
                if self.next() != Some('=') {
                    return self.errorf("expected :=".into());
                }
                self.emit(ItemType::Declare);
            }
            '|' => self.emit(ItemType::Pipe),
            '"' => return State::Quote,
            '`' => return State::RawQuote,
            '$' => return State::Variable,
            '\'' => return State::Char,
            '.' => {
                if let Some(n) = self.peek()
                    && !n.is_ascii_digit()
                {
                    return State::Field;
                }
                if self.peek().is_none() {
                    return State::Field;
                }
                self.backup(Some(r));
                return State::Number;
            }
            '+' | '-' | '0'..='9' => {
                self.backup(Some(r));
                return State::Number;
            }
            c if is_alnum(c) => {
                self.backup(Some(c));
                return State::Identifier;
            }
            '(' => {
                self.emit(ItemType::LeftParen);
                self.paren_depth += 1;
            }
            ')' => {
                self.emit(ItemType::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    // Go's lexer replaces the pending right-paren item by the error.
                    self.items.pop();
                    return self.errorf("unexpected right paren".into());
                }
            }
            c if c.is_ascii() && crate::fmt::is_print(c) => self.emit(ItemType::Char),
            c => {
                return self.errorf(format!("unrecognized character in action: {}", sharp_u(c)));
            }
        }
        State::InsideAction
    }

    fn lex_space(&mut self) -> State {
        let mut num = 0;
        while let Some(c) = self.peek() {
            if !is_space(c) {
                break;
            }
            self.next();
            num += 1;
        }
        if self.pos > 0
            && has_right_trim_marker(&self.input[self.pos - 1..])
            && self.input[self.pos - 1 + TRIM_MARKER_LEN..].starts_with(self.right_delim)
        {
            // back up before the space
            let c = self.input[..self.pos].chars().next_back();
            self.backup(c);
            if num == 1 {
                return State::InsideAction;
            }
        }
        self.emit(ItemType::Space);
        State::InsideAction
    }

    fn at_terminator(&self) -> bool {
        match self.peek() {
            None => true,
            Some(c) if is_space(c) => true,
            Some('.' | ',' | '|' | ':' | ')' | '(') => true,
            _ => self.rest().starts_with(self.right_delim),
        }
    }

    fn lex_identifier(&mut self) -> State {
        loop {
            let r = self.next();
            match r {
                Some(c) if is_alnum(c) => {}
                _ => {
                    self.backup(r);
                    let word = &self.input[self.start..self.pos];
                    if !self.at_terminator() {
                        let c = self.peek().unwrap_or('\u{FFFD}');
                        return self.errorf(format!("bad character {}", sharp_u(c)));
                    }
                    let t = match word {
                        "block" => ItemType::Block,
                        "break" => ItemType::Break,
                        "continue" => ItemType::Continue,
                        "define" => ItemType::Define,
                        "else" => ItemType::Else,
                        "end" => ItemType::End,
                        "if" => ItemType::If,
                        "range" => ItemType::Range,
                        "nil" => ItemType::Nil,
                        "template" => ItemType::Template,
                        "with" => ItemType::With,
                        "true" | "false" => ItemType::Bool,
                        w if w.starts_with('.') => ItemType::Field,
                        _ => ItemType::Identifier,
                    };
                    self.emit(t);
                    return State::InsideAction;
                }
            }
        }
    }

    fn lex_field_or_variable(&mut self, typ: ItemType) -> State {
        if self.at_terminator() {
            if typ == ItemType::Variable {
                self.emit(ItemType::Variable);
            } else {
                self.emit(ItemType::Dot);
            }
            return State::InsideAction;
        }
        loop {
            let r = self.next();
            match r {
                Some(c) if is_alnum(c) => {}
                _ => {
                    self.backup(r);
                    break;
                }
            }
        }
        if !self.at_terminator() {
            let c = self.peek().unwrap_or('\u{FFFD}');
            return self.errorf(format!("bad character {}", sharp_u(c)));
        }
        self.emit(typ);
        State::InsideAction
    }

    fn lex_char(&mut self) -> State {
        loop {
            match self.next() {
                Some('\\') => match self.next() {
                    Some(c) if c != '\n' => {}
                    _ => return self.errorf("unterminated character constant".into()),
                },
                None | Some('\n') => return self.errorf("unterminated character constant".into()),
                Some('\'') => break,
                _ => {}
            }
        }
        self.emit(ItemType::CharConstant);
        State::InsideAction
    }

    fn scan_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 23 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if let Some(c) = self.peek()
            && is_alnum(c)
        {
            self.next();
            return false;
        }
        true
    }

    fn lex_number(&mut self) -> State {
        if !self.scan_number() {
            let s = self.input[self.start..self.pos].to_string();
            return self.errorf(format!("bad number syntax: {}", crate::fmt::quote(&s)));
        }
        if let Some(sign) = self.peek()
            && (sign == '+' || sign == '-')
        {
            if !self.scan_number() || !self.input[..self.pos].ends_with('i') {
                let s = self.input[self.start..self.pos].to_string();
                return self.errorf(format!("bad number syntax: {}", crate::fmt::quote(&s)));
            }
            self.emit(ItemType::Complex);
            return State::InsideAction;
        }
        self.emit(ItemType::Number);
        State::InsideAction
    }

    fn lex_quote(&mut self) -> State {
        loop {
            match self.next() {
                Some('\\') => match self.next() {
                    Some(c) if c != '\n' => {}
                    _ => return self.errorf("unterminated quoted string".into()),
                },
                None | Some('\n') => return self.errorf("unterminated quoted string".into()),
                Some('"') => break,
                _ => {}
            }
        }
        self.emit(ItemType::String);
        State::InsideAction
    }

    fn lex_raw_quote(&mut self) -> State {
        loop {
            match self.next() {
                None => return self.errorf("unterminated raw quoted string".into()),
                Some('`') => break,
                _ => {}
            }
        }
        self.emit(ItemType::RawString);
        State::InsideAction
    }
}

/// Go's `%#U`: `U+0023 '#'`.
pub(crate) fn sharp_u(c: char) -> String {
    let u = c as u32;
    if crate::fmt::is_print(c) {
        format!("U+{u:04X} '{c}'")
    } else {
        format!("U+{u:04X}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(s: &str) -> Vec<ItemType> {
        Lexer::lex(s).into_iter().map(|i| i.typ).collect()
    }

    #[test]
    fn basic() {
        use ItemType::*;
        assert_eq!(
            types("a{{.x}}b"),
            vec![Text, LeftDelim, Field, RightDelim, Text, Eof]
        );
        assert_eq!(
            types("{{ $x := 1 }}"),
            vec![
                LeftDelim, Space, Variable, Space, Declare, Space, Number, Space, RightDelim, Eof
            ]
        );
        assert_eq!(types("{{/* c */}}"), vec![Eof]);
        assert_eq!(types("{{ .my-key }}").last(), Some(&Error));
        assert_eq!(types("{{ 1+2i }}")[2], Complex);
    }

    #[test]
    fn trim() {
        let items = Lexer::lex("a  {{- .x -}}  b");
        assert_eq!(&*items[0].val, "a");
        assert_eq!(&*items[items.len() - 2].val, "b");
        let items = Lexer::lex("x {{- /* c */ -}} y");
        assert_eq!(items.iter().map(|i| &*i.val).collect::<String>(), "xy");
    }

    #[test]
    fn errors() {
        let e = |s: &str| {
            Lexer::lex(s)
                .pop()
                .map(|i| i.val.to_string())
                .unwrap_or_default()
        };
        assert_eq!(e("{{ .user"), "unclosed action");
        assert_eq!(e("{{/* x }}"), "unclosed comment");
        assert_eq!(e("{{ \"abc }}"), "unterminated quoted string");
        assert_eq!(e("{{ 'a }}"), "unterminated character constant");
        assert_eq!(e("{{ 1x }}"), "bad number syntax: \"1x\"");
        assert_eq!(e("{{ ) }}"), "unexpected right paren");
        assert_eq!(e("{{ ( }}"), "unclosed left paren");
    }
}
