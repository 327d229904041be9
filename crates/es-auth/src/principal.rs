//! Principals and how a TLS client certificate becomes one.
//!
//! A [`Principal`] is Kafka's `KafkaPrincipal`: a type and a name, written
//! `User:alice`. ACLs, quotas and audit logs all key on it, so its text form and
//! parsing follow Kafka's `SecurityUtils.parseKafkaPrincipal`.
//!
//! A client that authenticates with a certificate is `User:` + the certificate's
//! subject distinguished name rewritten by `ssl.principal.mapping.rules`. For two
//! brokers to agree on who a client is, both steps must produce Kafka's bytes:
//!
//! - [`subject_dn`] renders the subject as Java's `X500Principal.getName()` does
//!   (RFC 2253 with Java's choices: RDNs last-first, keywords only for CN, C, L, ST,
//!   O, OU, STREET, DC and UID, `#`-hex DER for every other attribute and for values
//!   that are not one of Java's string types, `\` before `,=+<>#;"\` anywhere,
//!   `\00` for NUL, escaped leading and trailing spaces and CRs, values decoded as
//!   UTF-8 whatever their string tag). The expected strings in the tests were
//!   printed by Java 17.
//! - [`MappingRules`] is Kafka's `SslPrincipalMapper`: the same rule splitter and
//!   parser (as regular expressions with Java's semantics), the rule's pattern must
//!   match the whole DN, then `String.replaceAll` with Kafka's rewriting of
//!   references to missing groups into literals, then optional lower/upper case.
//!   Rule patterns are Java regular expressions; the `java` submodule translates
//!   them and refuses, at parse time, what the `regex` crate cannot express.
//!
//! Limits: rule sets, DNs and mapped names are bounded (`*_bytes_max` constants);
//! certificates larger than [`CERTIFICATE_BYTES_MAX`] are refused before parsing.
//! Nothing here panics on any input.

pub(crate) mod java;

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use x509_parser::prelude::FromDer;
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

/// Kafka's `KafkaPrincipal.USER_TYPE`.
pub const USER_TYPE: &str = "User";

/// A Kafka principal, `kind:name` (Kafka's `KafkaPrincipal`). Serialised as that
/// string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Principal {
    /// The principal type, `User` for every authenticated client.
    pub kind: String,
    /// The name within the type; may contain `:`.
    pub name: String,
}

impl Principal {
    /// A principal of any type.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Principal {
            kind: kind.into(),
            name: name.into(),
        }
    }

    /// `User:{name}`.
    pub fn user(name: impl Into<String>) -> Self {
        Self::new(USER_TYPE, name)
    }

    /// `User:ANONYMOUS`, Kafka's principal for unauthenticated connections.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// Whether this is `User:ANONYMOUS`.
    pub fn is_anonymous(&self) -> bool {
        self.kind == USER_TYPE && self.name == "ANONYMOUS"
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// A principal string that is not `Type:name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a string in format principalType:principalName but got {0}")]
pub struct PrincipalParseError(pub String);

impl FromStr for Principal {
    type Err = PrincipalParseError;

    /// Kafka's `SecurityUtils.parseKafkaPrincipal`: split at the first `:`; the name
    /// may be empty or contain more colons. Stricter than Kafka in one way: an empty
    /// type (`:alice`) is refused, where Kafka would build a principal of type "".
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((kind, name)) if !kind.is_empty() => Ok(Principal::new(kind, name)),
            _ => Err(PrincipalParseError(s.to_string())),
        }
    }
}

impl TryFrom<String> for Principal {
    type Error = PrincipalParseError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Principal> for String {
    fn from(p: Principal) -> String {
        p.to_string()
    }
}

/// The default of `ssl.principal.mapping.rules`.
pub const DEFAULT_MAPPING_RULES: &str = "DEFAULT";
/// Longest `ssl.principal.mapping.rules` accepted.
pub const MAPPING_RULES_BYTES_MAX: usize = 64 * 1024;
/// Longest distinguished name the rules are applied to.
pub const DN_BYTES_MAX: usize = 64 * 1024;
/// Longest name a rule may produce (a replacement can repeat groups).
pub const MAPPED_NAME_BYTES_MAX: usize = 64 * 1024;
/// Largest DER certificate [`subject_dn`] parses.
pub const CERTIFICATE_BYTES_MAX: usize = 1024 * 1024;

/// Why rules did not parse, or did not map a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// Kafka's own parse errors, e.g. "Invalid rule: `x`, unmatched substring: `x`".
    #[error("{0}")]
    InvalidRule(String),
    /// A rule's pattern is not a Java regular expression es can run.
    #[error("Invalid rule `{rule}`: invalid pattern: {reason}")]
    InvalidPattern { rule: String, reason: String },
    /// Over [`MAPPING_RULES_BYTES_MAX`] or [`DN_BYTES_MAX`].
    #[error("{what} is {len} bytes, more than the {max} es accepts")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// No rule matched; Kafka's `NoMatchingRule`.
    #[error("No rules apply to {dn}, rules {rules}")]
    NoMatchingRule { dn: String, rules: String },
    /// The matching rule's replacement failed as it does in Kafka (a reference to a
    /// missing group, a bad escape, a group number that overflows an int) or the
    /// result exceeded [`MAPPED_NAME_BYTES_MAX`].
    #[error("Rule {rule} failed on {dn}: {reason}")]
    Replacement {
        rule: String,
        dn: String,
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Map(Box<MapRule>),
}

#[derive(Debug, Clone)]
struct MapRule {
    /// Java source of the pattern and replacement, as written (for messages).
    pattern: String,
    replacement: String,
    case: Case,
    /// `\A(?:pattern)\z`: Kafka requires `Matcher.matches()`.
    whole: Regex,
    /// The pattern itself, for `replaceAll`, which replaces every `find()` match
    /// (not necessarily the whole DN: `^CN=(.*?),OU=(.*?)` replaces a prefix).
    find: Regex,
    /// Kafka parses the replacement only when the rule matches, so an invalid one
    /// is an error at that moment, not when the rules are loaded.
    expansion: Result<java::Replacement, String>,
}

impl fmt::Display for Rule {
    /// Kafka's `Rule.toString()`: `DEFAULT` or `RULE:pattern/replacement[/L|/U]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Default => f.write_str("DEFAULT"),
            Rule::Map(rule) => {
                write!(f, "RULE:{}/{}", rule.pattern, rule.replacement)?;
                match rule.case {
                    Case::Lower => f.write_str("/L"),
                    Case::Upper => f.write_str("/U"),
                    Case::Keep => Ok(()),
                }
            }
        }
    }
}

/// `ssl.principal.mapping.rules`, parsed: Kafka's `SslPrincipalMapper`.
#[derive(Debug, Clone)]
pub struct MappingRules {
    rules: Vec<Rule>,
}

impl Default for MappingRules {
    /// `DEFAULT`: the DN is the principal name.
    fn default() -> Self {
        MappingRules {
            rules: vec![Rule::Default],
        }
    }
}

impl fmt::Display for MappingRules {
    /// The rule list as Kafka prints it in `NoMatchingRule`: `[RULE:..., DEFAULT]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, rule) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{rule}")?;
        }
        f.write_str("]")
    }
}

impl FromStr for MappingRules {
    type Err = MappingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MappingRules::parse(s)
    }
}

/// Kafka's `RULE_PATTERN` with Java's `.` (no line terminators):
/// groups 1 `DEFAULT`, 2 pattern, 4 replacement, 6 `L`/`U`, 7 anything else.
fn rule_pattern() -> String {
    let dot = java::JAVA_DOT;
    format!(r"(DEFAULT)|RULE:((\\{dot}|[^\\/])*)/((\\{dot}|[^\\/])*)/([LU]?){dot}*?|({dot}*?)")
}

type StaticRegex = OnceLock<Result<Regex, String>>;

fn static_regex(
    cell: &'static StaticRegex,
    source: fn() -> String,
) -> Result<&'static Regex, MappingError> {
    cell.get_or_init(|| Regex::new(&source()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| MappingError::InvalidRule(format!("internal error in the rule grammar: {e}")))
}

/// Kafka's `RULE_SPLITTER`: `\s*(RULE_PATTERN)\s*(,\s*|$)`.
fn splitter() -> Result<&'static Regex, MappingError> {
    static CELL: StaticRegex = OnceLock::new();
    static_regex(&CELL, || {
        let sp = java::JAVA_SPACE_CLASS;
        format!(r"{sp}*({}){sp}*(,{sp}*|$)", rule_pattern())
    })
}

/// Kafka's `RULE_PARSER` used with `lookingAt()`.
fn rule_parser() -> Result<&'static Regex, MappingError> {
    static CELL: StaticRegex = OnceLock::new();
    static_regex(&CELL, || format!(r"\A(?:{})", rule_pattern()))
}

impl MappingRules {
    /// Parses `ssl.principal.mapping.rules` as Kafka does: rules separated by commas
    /// (a comma inside a rule's pattern or replacement is part of it), each
    /// `DEFAULT` or `RULE:pattern/replacement/` with an optional `L` or `U`; empty
    /// entries are ignored; anything else is "Invalid rule". An empty string gives no
    /// rules at all, so every DN fails to map.
    pub fn parse(rules: &str) -> Result<Self, MappingError> {
        if rules.len() > MAPPING_RULES_BYTES_MAX {
            return Err(MappingError::TooLong {
                what: "ssl.principal.mapping.rules",
                len: rules.len(),
                max: MAPPING_RULES_BYTES_MAX,
            });
        }
        // Java's String.trim() strips every char <= ' '. Java's `$` also matches
        // before a final line terminator, which after trim() can only be one of
        // these three; nothing else in the splitter can consume it, so Kafka drops
        // it.
        let trimmed = rules.trim_matches(|c: char| c <= ' ');
        let trimmed = trimmed
            .strip_suffix(['\u{85}', '\u{2028}', '\u{2029}'])
            .unwrap_or(trimmed);
        let splitter = splitter()?;
        let parser = rule_parser()?;
        let mut parsed = Vec::new();
        for caps in java::find_iter(splitter, trimmed) {
            let rule = caps.get(1).map_or("", |m| m.as_str());
            let Some(found) = parser.captures(rule) else {
                return Err(MappingError::InvalidRule(format!("Invalid rule: {rule}")));
            };
            let end = found.get(0).map_or(0, |m| m.end());
            if end != rule.len() {
                return Err(MappingError::InvalidRule(format!(
                    "Invalid rule: `{rule}`, unmatched substring: `{}`",
                    &rule[end..]
                )));
            }
            if found.get(1).is_some() {
                parsed.push(Rule::Default);
            } else if let Some(pattern) = found.get(2) {
                let replacement = found.get(4).map_or("", |m| m.as_str());
                let case = match found.get(6).map(|m| m.as_str()) {
                    Some("L") => Case::Lower,
                    Some("U") => Case::Upper,
                    _ => Case::Keep,
                };
                parsed.push(Rule::Map(Box::new(MapRule::new(
                    rule,
                    pattern.as_str(),
                    replacement,
                    case,
                )?)));
            }
            // else: an empty rule, ignored as in Kafka.
        }
        Ok(MappingRules { rules: parsed })
    }

    /// Kafka's `SslPrincipalMapper.getName`: the first rule whose pattern matches
    /// the whole DN gives the name; `DEFAULT` gives the DN unchanged.
    pub fn apply(&self, dn: &str) -> Result<String, MappingError> {
        if dn.len() > DN_BYTES_MAX {
            return Err(MappingError::TooLong {
                what: "distinguished name",
                len: dn.len(),
                max: DN_BYTES_MAX,
            });
        }
        for rule in &self.rules {
            let map = match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Map(map) => map,
            };
            if !map.whole.is_match(dn) {
                continue;
            }
            let failed = |reason: String| MappingError::Replacement {
                rule: rule.to_string(),
                dn: dn.to_string(),
                reason,
            };
            let expansion = map.expansion.as_ref().map_err(|e| failed(e.clone()))?;
            let replaced = expansion
                .replace_all(&map.find, dn, MAPPED_NAME_BYTES_MAX)
                .ok_or_else(|| {
                    failed(format!(
                        "the result is longer than {MAPPED_NAME_BYTES_MAX} bytes"
                    ))
                })?;
            // Java's toLowerCase/toUpperCase(Locale.ENGLISH): full Unicode mappings.
            return Ok(match map.case {
                Case::Keep => replaced,
                Case::Lower => replaced.to_lowercase(),
                Case::Upper => replaced.to_uppercase(),
            });
        }
        Err(MappingError::NoMatchingRule {
            dn: dn.to_string(),
            rules: self.to_string(),
        })
    }
}

impl MapRule {
    fn new(rule: &str, pattern: &str, replacement: &str, case: Case) -> Result<Self, MappingError> {
        let invalid = |reason: String| MappingError::InvalidPattern {
            rule: rule.to_string(),
            reason,
        };
        let translated = java::translate_pattern(pattern).map_err(|e| invalid(e.0))?;
        let find = Regex::new(&translated).map_err(|e| invalid(e.to_string()))?;
        let whole =
            Regex::new(&format!(r"\A(?:{translated})\z")).map_err(|e| invalid(e.to_string()))?;
        let group_count = find.captures_len().saturating_sub(1);
        let expansion = escape_literal_back_references(replacement, group_count)
            .and_then(|escaped| java::Replacement::parse(&escaped, group_count, &find));
        Ok(MapRule {
            pattern: pattern.to_string(),
            replacement: replacement.to_string(),
            case,
            whole,
            find,
            expansion,
        })
    }
}

/// Kafka's `Rule.escapeLiteralBackReferences` (taken from Apache NiFi): `$N` naming
/// a group the pattern lacks is shortened digit by digit (`$12` with 1 group is
/// `$1` then `2`), and if still too large becomes a literal `\$N`. Reproduced with
/// its quirk: insertion offsets come from the original string, so after the first
/// insertion later backslashes land one place early per earlier insertion. Works on
/// UTF-16 units, as Java does.
fn escape_literal_back_references(unescaped: &str, groups: usize) -> Result<String, String> {
    if groups == 0 {
        return Ok(unescaped.to_string());
    }
    let is_digit = |u: u16| (u16::from(b'0')..=u16::from(b'9')).contains(&u);
    let original: Vec<u16> = unescaped.encode_utf16().collect();
    let mut value = original.clone();
    let mut i = 0;
    while i < original.len() {
        if original[i] != u16::from(b'$') {
            i += 1;
            continue;
        }
        let digits_start = i + 1;
        let mut j = digits_start;
        while j < original.len() && is_digit(original[j]) {
            j += 1;
        }
        if j == digits_start {
            i += 1;
            continue;
        }
        i = j;
        let digits = String::from_utf16_lossy(&original[digits_start..j]);
        if digits.starts_with('0') {
            continue;
        }
        // Integer.parseInt: more than an int holds is a NumberFormatException.
        let parsed: i32 = digits
            .parse()
            .map_err(|_| format!("For input string: \"{digits}\""))?;
        let mut index = usize::try_from(parsed).unwrap_or(usize::MAX);
        while index > groups && index >= 10 {
            index /= 10;
        }
        if index > groups {
            let at = digits_start - 1;
            if at > value.len() {
                return Err(format!("String index out of range: {at}"));
            }
            value.insert(at, u16::from(b'\\'));
        }
    }
    String::from_utf16(&value).map_err(|_| "the replacement splits a surrogate pair".to_string())
}

/// Why a certificate's subject could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    #[error("certificate is {len} bytes, more than the {max} es accepts")]
    TooLarge { len: usize, max: usize },
    #[error("invalid certificate: {0}")]
    Parse(String),
    #[error("invalid distinguished name: {0}")]
    Name(String),
    #[error(transparent)]
    Mapping(#[from] MappingError),
}

/// The certificate's subject DN as Java's `X500Principal.getName()` prints it, which
/// is what Kafka feeds `ssl.principal.mapping.rules`.
pub fn subject_dn(cert_der: &[u8]) -> Result<String, CertificateError> {
    if cert_der.len() > CERTIFICATE_BYTES_MAX {
        return Err(CertificateError::TooLarge {
            len: cert_der.len(),
            max: CERTIFICATE_BYTES_MAX,
        });
    }
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|e| CertificateError::Parse(e.to_string()))?;
    rfc2253(cert.subject())
}

/// A DER-encoded X.501 `Name` rendered as Java's `X500Principal.getName()`.
pub fn name_rfc2253(name_der: &[u8]) -> Result<String, CertificateError> {
    if name_der.len() > CERTIFICATE_BYTES_MAX {
        return Err(CertificateError::TooLarge {
            len: name_der.len(),
            max: CERTIFICATE_BYTES_MAX,
        });
    }
    let (_, name) =
        X509Name::from_der(name_der).map_err(|e| CertificateError::Name(e.to_string()))?;
    rfc2253(&name)
}

/// `User:` + the mapped subject DN: Kafka's `DefaultKafkaPrincipalBuilder` for SSL.
pub fn principal_from_certificate(
    cert_der: &[u8],
    rules: &MappingRules,
) -> Result<Principal, CertificateError> {
    let dn = subject_dn(cert_der)?;
    Ok(Principal::user(rules.apply(&dn)?))
}

fn rfc2253(name: &X509Name<'_>) -> Result<String, CertificateError> {
    let rdns: Vec<_> = name.iter().collect();
    let mut out = String::new();
    // Java's X500Name.getRFC2253Name: the last RDN of the encoding first.
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Multi-valued RDNs keep their encoded order (only the canonical form sorts).
        for (j, ava) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            append_ava(&mut out, ava)?;
        }
    }
    Ok(out)
}

/// Java's `AVA.toRFC2253String`.
fn append_ava(out: &mut String, ava: &AttributeTypeAndValue<'_>) -> Result<(), CertificateError> {
    let oid = oid_string(ava.attr_type().as_bytes())?;
    let keyword = match oid.as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        other => other,
    };
    out.push_str(keyword);
    out.push('=');
    let value = ava.attr_value();
    let tag = value.header.tag().0;
    if tag >= 31 {
        // Java's DerValue has single-byte tags only; it refuses the certificate.
        return Err(CertificateError::Name(format!(
            "unsupported tag number {tag}"
        )));
    }
    let constructed = if value.header.constructed() { 0x20 } else { 0 };
    let identifier = ((value.header.class() as u8) << 6) | constructed | tag as u8;
    // Java's AVA.isDerString(value, false): PrintableString, T61String, IA5String,
    // GeneralString, BMPString, UTF8String (by full identifier byte).
    let is_string = matches!(identifier, 0x13 | 0x14 | 0x16 | 0x1B | 0x1E | 0x0C);
    if keyword.starts_with(|c: char| c.is_ascii_digit()) || !is_string {
        // '#' and the lowercase hex of the value re-encoded in DER (Java re-encodes,
        // so a non-minimal length comes out minimal).
        out.push('#');
        let mut der = vec![identifier];
        push_der_length(&mut der, value.data.len());
        for byte in der.iter().chain(value.data) {
            out.push_str(&format!("{byte:02x}"));
        }
        return Ok(());
    }
    // Java decodes the value bytes as UTF-8 whatever the string type.
    let text: Vec<char> = java::utf8_lossy(value.data).chars().collect();
    let mut escaped = Vec::with_capacity(text.len() + 8);
    for c in text {
        if ",=+<>#;\"\\".contains(c) {
            escaped.push('\\');
            escaped.push(c);
        } else if c == '\0' {
            escaped.extend(['\\', '0', '0']);
        } else {
            escaped.push(c);
        }
    }
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = escaped.iter().take_while(|c| blank(c)).count();
    let trail = escaped.len() - escaped.iter().rev().take_while(|c| blank(c)).count();
    for (i, c) in escaped.iter().enumerate() {
        if i < lead || i >= trail {
            out.push('\\');
        }
        out.push(*c);
    }
    Ok(())
}

fn push_der_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push(0x80 | (bytes.len() - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// Dotted decimal of a DER OID body (Java's `ObjectIdentifier.toString()`).
fn oid_string(body: &[u8]) -> Result<String, CertificateError> {
    let bad = || CertificateError::Name("invalid object identifier".into());
    if body.is_empty() || body.last().is_some_and(|b| b & 0x80 != 0) {
        return Err(bad());
    }
    let mut out = String::new();
    let mut arc: u128 = 0;
    let mut first = true;
    for &byte in body {
        arc = arc
            .checked_mul(128)
            .and_then(|a| a.checked_add(u128::from(byte & 0x7F)))
            .ok_or_else(bad)?;
        if byte & 0x80 != 0 {
            continue;
        }
        if first {
            let (a, b) = match arc {
                0..=39 => (0, arc),
                40..=79 => (1, arc - 40),
                _ => (2, arc - 80),
            };
            out.push_str(&format!("{a}.{b}"));
            first = false;
        } else {
            out.push_str(&format!(".{arc}"));
        }
        arc = 0;
    }
    Ok(out)
}

#[cfg(test)]
#[path = "principal_tests.rs"]
mod tests;
