//! The few pieces of the Java platform that Kafka's principal mapping leans on, so
//! that es maps a certificate to the same name a Kafka broker would:
//!
//! - [`translate_pattern`]: a `java.util.regex.Pattern` source translated to the
//!   `regex` crate's syntax with Java's meaning (`.` excludes Java's line
//!   terminators, `\d \s \w` are ASCII, `(?i)` is ASCII-only unless `u`, `\Q..\E`,
//!   octal and `\c` escapes, a leading `]` in a class is literal). Java constructs
//!   the `regex` crate cannot express (backreferences, lookaround, atomic groups,
//!   possessive quantifiers, `MULTILINE`, `UNICODE_CHARACTER_CLASS`, `\G \Z \R \X`,
//!   Unicode blocks, `java*` properties) are refused with a [`PatternError`], never
//!   approximated. Known residual differences, both for inputs that do not occur in
//!   distinguished names: `$` is end of input only (Java also matches before a
//!   final line terminator), and `\b` uses the `regex` crate's Unicode word
//!   definition (Java 17's `Character.isLetterOrDigit` plus `_`).
//! - [`find_iter`] and [`Replacement`]: `Matcher.find()` iteration (an empty match
//!   may follow a non-empty one, unlike the `regex` crate's iterators) and
//!   `Matcher.appendReplacement` syntax (`$n` takes as many digits as name an
//!   existing group, `${name}`, `\x` is a literal `x`), with Java's error texts.
//! - [`utf8_lossy`]: `new String(bytes, UTF_8)`, whose replacement of malformed
//!   input differs from `String::from_utf8_lossy` (an encoded surrogate is one
//!   U+FFFD in Java, three in Rust).
//!
//! Everything here works on untrusted or operator-supplied text and returns errors;
//! nothing panics.

use regex::{Captures, Regex};

/// Why a Java pattern was refused: Java's own syntax errors, or a construct the
/// `regex` crate cannot express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(pub String);

fn err<T>(message: impl Into<String>) -> Result<T, PatternError> {
    Err(PatternError(message.into()))
}

/// Java's `\s` (ASCII whitespace, which is also what `Pattern.COMMENTS` skips).
pub(crate) const JAVA_SPACE_CLASS: &str = r"[ \t\n\x0B\x0C\r]";
/// Java's `.` without `DOTALL`: anything but a line terminator.
pub(crate) const JAVA_DOT: &str = r"[^\n\r\x{85}\x{2028}\x{2029}]";

fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
}

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Inline flags we emulate; the rest are refused.
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    case_insensitive: bool,
    unicode_case: bool,
    dotall: bool,
    unix_lines: bool,
    comments: bool,
}

/// One element of a character class before it is written out.
enum ClassItem {
    Char(char),
    /// Already in `regex` syntax (a nested class such as `[0-9]` or `\p{L}`).
    Set(String),
}

/// Translates a Java regular expression to the `regex` crate's syntax, keeping
/// capturing groups one for one (so group numbers and names carry over).
pub fn translate_pattern(pattern: &str) -> Result<String, PatternError> {
    let mut t = Translator {
        chars: pattern.chars().collect(),
        pos: 0,
        out: String::with_capacity(pattern.len() * 2),
        flags: Flags::default(),
        groups: Vec::new(),
    };
    t.run()?;
    Ok(t.out)
}

struct Translator {
    chars: Vec<char>,
    pos: usize,
    out: String,
    flags: Flags,
    /// Flags to restore when each open group closes.
    groups: Vec<Flags>,
}

impl Translator {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// In `COMMENTS` mode Java skips whitespace and `#` comments (to the end of the
    /// line) everywhere, including inside classes.
    fn skip_comments(&mut self) {
        if !self.flags.comments {
            return;
        }
        while let Some(c) = self.peek() {
            if is_java_space(c) {
                self.pos += 1;
            } else if c == '#' {
                while let Some(c) = self.next() {
                    if is_line_terminator(c) {
                        break;
                    }
                }
            } else {
                break;
            }
        }
    }

    fn run(&mut self) -> Result<(), PatternError> {
        loop {
            self.skip_comments();
            let Some(c) = self.next() else { break };
            match c {
                '\\' => self.escape_outside()?,
                '.' => self.dot(),
                '^' => self.out.push('^'),
                '$' => self.out.push('$'),
                '(' => self.open_group()?,
                ')' => {
                    let Some(saved) = self.groups.pop() else {
                        return err(format!("Unmatched closing ')' near index {}", self.pos - 1));
                    };
                    self.flags = saved;
                    self.out.push(')');
                }
                '[' => {
                    let class = self.class(false)?;
                    self.out.push_str(&class);
                }
                '*' | '+' | '?' => {
                    self.out.push(c);
                    self.quantifier_suffix()?;
                }
                '{' => self.counted()?,
                '|' => self.out.push('|'),
                _ => self.literal(c),
            }
        }
        if !self.groups.is_empty() {
            return err("Unclosed group");
        }
        Ok(())
    }

    fn dot(&mut self) {
        if self.flags.dotall {
            self.out.push_str("(?s:.)");
        } else if self.flags.unix_lines {
            self.out.push_str(r"[^\n]");
        } else {
            self.out.push_str(JAVA_DOT);
        }
    }

    fn literal(&mut self, c: char) {
        let escaped = regex::escape(c.encode_utf8(&mut [0; 4]));
        if self.flags.case_insensitive && self.flags.unicode_case {
            self.out.push_str("(?i:");
            self.out.push_str(&escaped);
            self.out.push(')');
        } else if self.flags.case_insensitive && c.is_ascii_alphabetic() {
            self.out.push('[');
            self.out.push(c.to_ascii_lowercase());
            self.out.push(c.to_ascii_uppercase());
            self.out.push(']');
        } else {
            self.out.push_str(&escaped);
        }
    }

    /// After `*`, `+`, `?` or `{..}`: a lazy `?` is kept, a possessive `+` refused.
    fn quantifier_suffix(&mut self) -> Result<(), PatternError> {
        match self.peek() {
            Some('?') => {
                self.pos += 1;
                self.out.push('?');
                Ok(())
            }
            Some('+') => err("possessive quantifiers are not supported"),
            _ => Ok(()),
        }
    }

    fn counted(&mut self) -> Result<(), PatternError> {
        let start = self.pos - 1;
        let mut body = String::from("{");
        let mut digits = 0usize;
        while let Some(c) = self.peek().filter(char::is_ascii_digit) {
            body.push(c);
            digits += 1;
            self.pos += 1;
        }
        if digits == 0 {
            return err(format!("Illegal repetition near index {start}"));
        }
        if self.peek() == Some(',') {
            body.push(',');
            self.pos += 1;
            while let Some(c) = self.peek().filter(char::is_ascii_digit) {
                body.push(c);
                self.pos += 1;
            }
        }
        if self.next() != Some('}') {
            return err(format!("Unclosed counted closure near index {}", self.pos));
        }
        body.push('}');
        self.out.push_str(&body);
        self.quantifier_suffix()
    }

    fn open_group(&mut self) -> Result<(), PatternError> {
        if self.peek() != Some('?') {
            self.groups.push(self.flags);
            self.out.push('(');
            return Ok(());
        }
        self.pos += 1;
        match self.next() {
            Some(':') => {
                self.groups.push(self.flags);
                self.out.push_str("(?:");
            }
            Some('<') => match self.peek() {
                Some('=') | Some('!') => return err("lookbehind is not supported"),
                _ => {
                    let mut name = String::new();
                    loop {
                        match self.next() {
                            Some('>') => break,
                            Some(c) if c.is_ascii_alphabetic() => name.push(c),
                            Some(c) if c.is_ascii_digit() && !name.is_empty() => name.push(c),
                            _ => return err("named capturing group is missing trailing '>'"),
                        }
                    }
                    if name.is_empty() {
                        return err("capturing group name does not start with a Latin letter");
                    }
                    self.groups.push(self.flags);
                    self.out.push_str("(?P<");
                    self.out.push_str(&name);
                    self.out.push('>');
                }
            },
            Some('=') | Some('!') => return err("lookahead is not supported"),
            Some('>') => return err("atomic groups are not supported"),
            Some(c) if c == '-' || c.is_ascii_alphabetic() => {
                self.pos -= 1;
                let mut flags = self.flags;
                let mut on = true;
                loop {
                    match self.next() {
                        Some('-') => on = false,
                        Some('i') => flags.case_insensitive = on,
                        Some('u') => flags.unicode_case = on,
                        Some('s') => flags.dotall = on,
                        Some('d') => flags.unix_lines = on,
                        Some('x') => flags.comments = on,
                        Some('m') => return err("the MULTILINE flag (?m) is not supported"),
                        Some('U') => {
                            return err("the UNICODE_CHARACTER_CLASS flag (?U) is not supported")
                        }
                        Some(')') => {
                            // Applies until the end of the enclosing group.
                            self.flags = flags;
                            return Ok(());
                        }
                        Some(':') => {
                            self.groups.push(self.flags);
                            self.flags = flags;
                            self.out.push_str("(?:");
                            return Ok(());
                        }
                        _ => return err("Unknown inline modifier"),
                    }
                }
            }
            _ => return err("Unknown inline modifier"),
        }
        Ok(())
    }

    fn escape_outside(&mut self) -> Result<(), PatternError> {
        let Some(c) = self.peek() else {
            return err("Unexpected internal error: trailing backslash");
        };
        match c {
            'b' | 'B' => {
                self.pos += 1;
                self.out.push('\\');
                self.out.push(c);
            }
            'A' => {
                self.pos += 1;
                self.out.push_str(r"\A");
            }
            'z' => {
                self.pos += 1;
                self.out.push_str(r"\z");
            }
            'Q' => {
                self.pos += 1;
                for c in self.quoted() {
                    self.literal(c);
                }
            }
            _ => match self.escape_item(false)? {
                ClassItem::Char(c) => self.literal(c),
                ClassItem::Set(set) => self.out.push_str(&set),
            },
        }
        Ok(())
    }

    /// The text of a `\Q...\E` quote (the `\Q` already consumed).
    fn quoted(&mut self) -> Vec<char> {
        let mut text = Vec::new();
        while let Some(c) = self.next() {
            if c == '\\' && self.peek() == Some('E') {
                self.pos += 1;
                break;
            }
            text.push(c);
        }
        text
    }

    /// An escape that denotes a character or a set, valid inside and outside classes
    /// (the backslash already consumed).
    fn escape_item(&mut self, in_class: bool) -> Result<ClassItem, PatternError> {
        let Some(c) = self.next() else {
            return err("Unexpected internal error: trailing backslash");
        };
        let set = |s: &str| Ok(ClassItem::Set(s.to_string()));
        match c {
            '0' => self.octal().map(ClassItem::Char),
            '1'..='9' | 'k' => err("backreferences are not supported"),
            'a' => Ok(ClassItem::Char('\x07')),
            'e' => Ok(ClassItem::Char('\x1B')),
            't' => Ok(ClassItem::Char('\t')),
            'n' => Ok(ClassItem::Char('\n')),
            'r' => Ok(ClassItem::Char('\r')),
            'f' => Ok(ClassItem::Char('\x0C')),
            'c' => match self.next() {
                Some(x) => char::from_u32(u32::from(x) ^ 64)
                    .map(ClassItem::Char)
                    .ok_or_else(|| PatternError("Illegal control escape sequence".into())),
                None => err("Illegal control escape sequence"),
            },
            'x' => self.hex_escape().map(ClassItem::Char),
            'u' => self.unicode_escape().map(ClassItem::Char),
            'd' => set("[0-9]"),
            'D' => set("[^0-9]"),
            's' => set(JAVA_SPACE_CLASS),
            'S' => set(r"[^ \t\n\x0B\x0C\r]"),
            'w' => set("[a-zA-Z_0-9]"),
            'W' => set("[^a-zA-Z_0-9]"),
            'h' => set(r"[ \t\xA0\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}]"),
            'H' => set(r"[^ \t\xA0\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}]"),
            'v' => set(r"[\n\x0B\x0C\r\x{85}\x{2028}\x{2029}]"),
            'V' => set(r"[^\n\x0B\x0C\r\x{85}\x{2028}\x{2029}]"),
            'p' | 'P' => self.property(c == 'P').map(ClassItem::Set),
            'b' | 'B' | 'A' | 'z' if in_class => err(format!(
                "Illegal/unsupported escape \\{c} in a character class"
            )),
            c if c.is_ascii_alphabetic() => {
                err(format!("Illegal/unsupported escape sequence \\{c}"))
            }
            // Java: a backslash before any non-alphabetic character makes it literal.
            c => Ok(ClassItem::Char(c)),
        }
    }

    fn octal(&mut self) -> Result<char, PatternError> {
        let digit = |c: Option<char>| c.and_then(|c| c.to_digit(8));
        let Some(first) = digit(self.peek()) else {
            return err("Illegal octal escape sequence");
        };
        self.pos += 1;
        let mut value = first;
        if let Some(second) = digit(self.peek()) {
            self.pos += 1;
            value = value * 8 + second;
            if first <= 3 {
                if let Some(third) = digit(self.peek()) {
                    self.pos += 1;
                    value = value * 8 + third;
                }
            }
        }
        char::from_u32(value).ok_or_else(|| PatternError("Illegal octal escape sequence".into()))
    }

    fn hex_digits(&mut self, count: usize) -> Option<u32> {
        let mut value = 0u32;
        for _ in 0..count {
            value = value * 16 + self.next()?.to_digit(16)?;
        }
        Some(value)
    }

    fn hex_escape(&mut self) -> Result<char, PatternError> {
        let value = if self.peek() == Some('{') {
            self.pos += 1;
            let mut value = 0u32;
            let mut digits = 0;
            loop {
                match self.next() {
                    Some('}') if digits > 0 => break,
                    Some(c) if c.is_ascii_hexdigit() && digits < 8 => {
                        value = value * 16 + c.to_digit(16).unwrap_or(0);
                        digits += 1;
                    }
                    _ => return err("Unclosed hexadecimal escape sequence"),
                }
            }
            value
        } else {
            match self.hex_digits(2) {
                Some(v) => v,
                None => return err("Illegal hexadecimal escape sequence"),
            }
        };
        char::from_u32(value).ok_or_else(|| PatternError("Hexadecimal codepoint is too big".into()))
    }

    fn unicode_escape(&mut self) -> Result<char, PatternError> {
        let Some(high) = self.hex_digits(4) else {
            return err("Illegal Unicode escape sequence");
        };
        if (0xD800..0xDC00).contains(&high)
            && self.peek() == Some('\\')
            && self.peek_at(1) == Some('u')
        {
            let save = self.pos;
            self.pos += 2;
            match self.hex_digits(4) {
                Some(low) if (0xDC00..0xE000).contains(&low) => {
                    let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    return char::from_u32(c)
                        .ok_or_else(|| PatternError("Illegal Unicode escape sequence".into()));
                }
                _ => self.pos = save,
            }
        }
        char::from_u32(high)
            .ok_or_else(|| PatternError("unpaired surrogates are not supported".into()))
    }

    /// `\p{..}` / `\P{..}` / `\pL`: Java's POSIX names are ASCII; Unicode categories,
    /// scripts (`Is`/`script=`) and binary properties map to the `regex` crate's.
    fn property(&mut self, negated: bool) -> Result<String, PatternError> {
        let name: String = match self.next() {
            Some('{') => {
                let mut name = String::new();
                loop {
                    match self.next() {
                        Some('}') => break,
                        Some(c) if name.len() < 64 => name.push(c),
                        _ => return err("Unclosed character family"),
                    }
                }
                name
            }
            Some(c) if c.is_ascii_alphabetic() => c.to_string(),
            _ => return err("Illegal character family"),
        };
        let posix = match name.as_str() {
            "Lower" => Some("a-z"),
            "Upper" => Some("A-Z"),
            "ASCII" => Some(r"\x00-\x7F"),
            "Alpha" => Some("a-zA-Z"),
            "Digit" => Some("0-9"),
            "Alnum" => Some("a-zA-Z0-9"),
            "Punct" => Some(r"!-/:-@\[-`\{-~"),
            "Graph" => Some(r"!-~"),
            "Print" => Some(r" -~"),
            "Blank" => Some(r" \t"),
            "Cntrl" => Some(r"\x00-\x1F\x7F"),
            "XDigit" => Some("0-9a-fA-F"),
            "Space" => Some(r" \t\n\x0B\x0C\r"),
            "L1" => Some(r"\x00-\xFF"),
            _ => None,
        };
        if let Some(ranges) = posix {
            let caret = if negated { "^" } else { "" };
            return Ok(format!("[{caret}{ranges}]"));
        }
        let unicode = if let Some(rest) = name.strip_prefix("Is") {
            rest.to_string()
        } else if name.starts_with("In")
            || name.starts_with("java")
            || name.starts_with("block=")
            || name.starts_with("blk=")
        {
            return err(format!("the character family {name} is not supported"));
        } else if name.starts_with("script=")
            || name.starts_with("sc=")
            || name.starts_with("general_category=")
            || name.starts_with("gc=")
            || (name.len() <= 2 && name.chars().all(|c| c.is_ascii_alphabetic()))
        {
            name.clone()
        } else {
            return err(format!("Unknown character property name {{{name}}}"));
        };
        if !unicode
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '=')
        {
            return err(format!("Unknown character property name {{{name}}}"));
        }
        let letter = if negated { 'P' } else { 'p' };
        // Checked here so a bad name is reported as the property, not as the whole
        // translated pattern.
        let translated = format!("\\{letter}{{{unicode}}}");
        if Regex::new(&translated).is_err() {
            return err(format!("Unknown character property name {{{name}}}"));
        }
        Ok(translated)
    }

    /// A character class (the `[` already consumed), written out as a `regex` class.
    fn class(&mut self, nested: bool) -> Result<String, PatternError> {
        let mut out = String::from("[");
        if self.peek() == Some('^') {
            self.pos += 1;
            out.push('^');
        }
        // Whether the current operand of `&&` has any item yet.
        let mut operand_items = 0usize;
        let mut any_items = false;
        loop {
            self.skip_comments();
            let Some(c) = self.next() else {
                return err("Unclosed character class");
            };
            let item = match c {
                ']' if any_items => break,
                '[' => ClassItem::Set(self.class(true)?),
                '&' if self.peek() == Some('&') => {
                    self.pos += 1;
                    if operand_items == 0 {
                        return err("an empty operand of '&&' is not supported");
                    }
                    out.push_str("&&");
                    operand_items = 0;
                    continue;
                }
                '\\' if self.peek() == Some('Q') => {
                    self.pos += 1;
                    for c in self.quoted() {
                        self.push_class_char(&mut out, c, c);
                        operand_items += 1;
                        any_items = true;
                    }
                    continue;
                }
                '\\' => self.escape_item(true)?,
                c => ClassItem::Char(c),
            };
            operand_items += 1;
            any_items = true;
            match item {
                ClassItem::Set(set) => out.push_str(&set),
                ClassItem::Char(lo) => {
                    let is_range =
                        self.peek() == Some('-') && !matches!(self.peek_at(1), Some(']') | None);
                    if !is_range {
                        self.push_class_char(&mut out, lo, lo);
                        continue;
                    }
                    self.pos += 1;
                    let hi = match self.next() {
                        Some('[') => return err("Illegal character range"),
                        Some('\\') => match self.escape_item(true)? {
                            ClassItem::Char(c) => c,
                            ClassItem::Set(_) => return err("Illegal character range"),
                        },
                        Some(c) => c,
                        None => return err("Unclosed character class"),
                    };
                    if hi < lo {
                        return err("Illegal character range");
                    }
                    self.push_class_char(&mut out, lo, hi);
                }
            }
        }
        if operand_items == 0 {
            return err("an empty operand of '&&' is not supported");
        }
        out.push(']');
        if !nested && self.flags.case_insensitive && self.flags.unicode_case {
            // Nested classes are covered by the outermost one's flag group.
            return Ok(format!("(?i:{out})"));
        }
        Ok(out)
    }

    /// Adds `lo-hi` (or the single `lo`) and, under ASCII case-insensitivity, the
    /// other case of its ASCII letters, as Java's case-insensitive class does.
    fn push_class_char(&self, out: &mut String, lo: char, hi: char) {
        let push_range = |out: &mut String, lo: char, hi: char| {
            out.push_str(&regex::escape(lo.encode_utf8(&mut [0; 4])));
            if hi != lo {
                out.push('-');
                out.push_str(&regex::escape(hi.encode_utf8(&mut [0; 4])));
            }
        };
        push_range(out, lo, hi);
        if self.flags.case_insensitive && !self.flags.unicode_case {
            for (from, to, shift_up) in [('a', 'z', false), ('A', 'Z', true)] {
                let a = lo.max(from);
                let b = hi.min(to);
                if a <= b {
                    let (a, b) = if shift_up {
                        (a.to_ascii_lowercase(), b.to_ascii_lowercase())
                    } else {
                        (a.to_ascii_uppercase(), b.to_ascii_uppercase())
                    };
                    push_range(out, a, b);
                }
            }
        }
    }
}

/// `Matcher.find()` over the whole input: the next search starts where the last
/// match ended, one character further after an empty match. (The `regex` crate's
/// iterators skip an empty match right after a non-empty one; Java does not, so
/// `"abc".replaceAll("b*", "X")` is `XaXXcX`.)
pub fn find_iter<'r, 'h>(
    re: &'r Regex,
    haystack: &'h str,
) -> impl Iterator<Item = Captures<'h>> + 'r
where
    'h: 'r,
{
    let mut next_start = Some(0usize);
    std::iter::from_fn(move || {
        let start = next_start?;
        let caps = re.captures_at(haystack, start)?;
        let whole = caps.get(0)?;
        next_start = if whole.start() == whole.end() {
            haystack[whole.end()..]
                .chars()
                .next()
                .map(|c| whole.end() + c.len_utf8())
        } else {
            Some(whole.end())
        };
        Some(caps)
    })
}

/// A parsed `Matcher.appendReplacement` replacement string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement(Vec<Piece>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Group(usize),
}

impl Replacement {
    /// Parses `replacement` against a pattern with `group_count` groups and the
    /// given named groups, with Java's error messages.
    pub fn parse(replacement: &str, group_count: usize, re: &Regex) -> Result<Self, String> {
        let chars: Vec<char> = replacement.chars().collect();
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\\' {
                i += 1;
                let Some(&escaped) = chars.get(i) else {
                    return Err("character to be escaped is missing".into());
                };
                text.push(escaped);
                i += 1;
            } else if c == '$' {
                i += 1;
                let Some(&next) = chars.get(i) else {
                    return Err("Illegal group reference: group index is missing".into());
                };
                let group = if next == '{' {
                    i += 1;
                    let mut name = String::new();
                    while let Some(&c) = chars.get(i).filter(|c| c.is_ascii_alphanumeric()) {
                        name.push(c);
                        i += 1;
                    }
                    if name.is_empty() {
                        return Err("named capturing group has 0 length name".into());
                    }
                    if chars.get(i) != Some(&'}') {
                        return Err("named capturing group is missing trailing '}'".into());
                    }
                    if name.starts_with(|c: char| c.is_ascii_digit()) {
                        return Err(format!(
                            "capturing group name {{{name}}} starts with digit character"
                        ));
                    }
                    i += 1;
                    let index = re.capture_names().position(|n| n == Some(name.as_str()));
                    match index {
                        Some(index) => index,
                        None => return Err(format!("No group with name {{{name}}}")),
                    }
                } else {
                    let Some(first) = next.to_digit(10) else {
                        return Err("Illegal group reference".into());
                    };
                    i += 1;
                    let mut group = first as usize;
                    while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
                        let longer = group.saturating_mul(10).saturating_add(d as usize);
                        if longer > group_count {
                            break;
                        }
                        group = longer;
                        i += 1;
                    }
                    if group > group_count {
                        return Err(format!("No group {group}"));
                    }
                    group
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Group(group));
            } else {
                text.push(c);
                i += 1;
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Replacement(pieces))
    }

    fn append(&self, caps: &Captures<'_>, out: &mut String) {
        for piece in &self.0 {
            match piece {
                Piece::Text(text) => out.push_str(text),
                // A group that did not participate appends nothing, as in Java.
                Piece::Group(g) => out.push_str(caps.get(*g).map_or("", |m| m.as_str())),
            }
        }
    }

    /// `String.replaceAll`: every `find()` match replaced; `None` if the result
    /// would exceed `output_bytes_max`.
    pub fn replace_all(
        &self,
        re: &Regex,
        haystack: &str,
        output_bytes_max: usize,
    ) -> Option<String> {
        let mut out = String::new();
        let mut last = 0;
        for caps in find_iter(re, haystack) {
            let whole = caps.get(0)?;
            out.push_str(&haystack[last..whole.start()]);
            self.append(&caps, &mut out);
            last = whole.end();
            if out.len() > output_bytes_max {
                return None;
            }
        }
        out.push_str(&haystack[last..]);
        (out.len() <= output_bytes_max).then_some(out)
    }
}

/// `new String(bytes, StandardCharsets.UTF_8)` of Java 17 (String.decodeUTF8_UTF16):
/// malformed input becomes U+FFFD with Java's grouping of bytes.
pub fn utf8_lossy(src: &[u8]) -> String {
    const REPL: char = '\u{FFFD}';
    let cont = |b: u8| b & 0xC0 == 0x80;
    let mut out = String::with_capacity(src.len());
    let mut sp = 0;
    let sl = src.len();
    while sp < sl {
        let b1 = src[sp];
        sp += 1;
        if b1 < 0x80 {
            out.push(char::from(b1));
        } else if (0xC2..=0xDF).contains(&b1) {
            if sp < sl {
                let b2 = src[sp];
                if cont(b2) {
                    sp += 1;
                    let c = (u32::from(b1 & 0x1F) << 6) | u32::from(b2 & 0x3F);
                    out.push(char::from_u32(c).unwrap_or(REPL));
                } else {
                    out.push(REPL);
                }
                continue;
            }
            out.push(REPL);
            break;
        } else if (0xE0..=0xEF).contains(&b1) {
            let malformed3_2 = |b2: u8| (b1 == 0xE0 && b2 & 0xE0 == 0x80) || !cont(b2);
            if sp + 1 < sl {
                let (b2, b3) = (src[sp], src[sp + 1]);
                if malformed3_2(b2) || !cont(b3) {
                    out.push(REPL);
                    // Java's malformed3: one byte if b2 is bad, else two.
                    sp += if malformed3_2(b2) { 0 } else { 1 };
                } else {
                    sp += 2;
                    let c = (u32::from(b1 & 0x0F) << 12)
                        | (u32::from(b2 & 0x3F) << 6)
                        | u32::from(b3 & 0x3F);
                    // A surrogate (ED A0..BF ..) is one malformed unit of three bytes.
                    out.push(char::from_u32(c).unwrap_or(REPL));
                }
                continue;
            }
            if sp < sl && malformed3_2(src[sp]) {
                out.push(REPL);
                continue;
            }
            out.push(REPL);
            break;
        } else if (0xF0..=0xF7).contains(&b1) {
            let malformed4_2 = |b2: u8| {
                b1 > 0xF4
                    || (b1 == 0xF0 && !(0x90..=0xBF).contains(&b2))
                    || (b1 == 0xF4 && b2 & 0xF0 != 0x80)
                    || !cont(b2)
            };
            if sp + 2 < sl {
                let (b2, b3, b4) = (src[sp], src[sp + 1], src[sp + 2]);
                let uc = (u32::from(b1 & 0x07) << 18)
                    | (u32::from(b2 & 0x3F) << 12)
                    | (u32::from(b3 & 0x3F) << 6)
                    | u32::from(b4 & 0x3F);
                let well_formed =
                    cont(b2) && cont(b3) && cont(b4) && (0x10000..=0x10FFFF).contains(&uc);
                if well_formed {
                    sp += 3;
                    out.push(char::from_u32(uc).unwrap_or(REPL));
                } else {
                    out.push(REPL);
                    // Java's malformed4: 1, 2 or 3 bytes in all.
                    sp += if malformed4_2(b2) {
                        0
                    } else if !cont(b3) {
                        1
                    } else {
                        2
                    };
                }
                continue;
            }
            if b1 > 0xF4 || (sp < sl && malformed4_2(src[sp])) {
                out.push(REPL);
                continue;
            }
            sp += 1;
            out.push(REPL);
            if sp < sl && !cont(src[sp]) {
                continue;
            }
            break;
        } else {
            out.push(REPL);
        }
    }
    out
}
