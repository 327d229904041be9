//! Tests of [`super`]: principal strings, Kafka's SslPrincipalMapperTest cases, and
//! subject DNs whose expected strings were printed by Java 17's
//! `X500Principal.getName()` (from the same DER bytes, see the comments).

use super::*;
use proptest::prelude::*;

fn rules(s: &str) -> MappingRules {
    MappingRules::parse(s).expect("rules parse")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn principal_text_form() {
    let p: Principal = "User:alice".parse().expect("parse");
    assert_eq!(p, Principal::user("alice"));
    assert_eq!(p.to_string(), "User:alice");
    let p: Principal = "User:CN=a:b,O=c".parse().expect("parse");
    assert_eq!(p.name, "CN=a:b,O=c");
    assert_eq!(
        "Group:".parse::<Principal>().expect("parse"),
        Principal::new("Group", "")
    );
    for bad in ["", "alice", ":alice"] {
        let e = bad.parse::<Principal>().expect_err(bad);
        assert_eq!(
            e.to_string(),
            format!("expected a string in format principalType:principalName but got {bad}")
        );
    }
    assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
    assert!(Principal::anonymous().is_anonymous());
    let json = serde_json::to_string(&Principal::user("bob")).expect("ser");
    assert_eq!(json, "\"User:bob\"");
    let back: Principal = serde_json::from_str(&json).expect("de");
    assert_eq!(back, Principal::user("bob"));
    assert!(serde_json::from_str::<Principal>("\"nocolon\"").is_err());
}

// Kafka's SslPrincipalMapperTest.testValidRules / testInvalidRules.
#[test]
fn kafka_valid_and_invalid_rules() {
    for ok in [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ] {
        MappingRules::parse(ok).expect(ok);
    }
    for bad in [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ] {
        assert!(MappingRules::parse(bad).is_err(), "{bad}");
    }
    let e = MappingRules::parse("DEFAULT/L").expect_err("invalid");
    assert_eq!(
        e.to_string(),
        "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"
    );
    let e = MappingRules::parse("default").expect_err("invalid");
    assert_eq!(
        e.to_string(),
        "Invalid rule: `default`, unmatched substring: `default`"
    );
}

// Kafka's SslPrincipalMapperTest.testSslPrincipalMapper.
#[test]
fn kafka_mapper_examples() {
    let mapper = rules(
        &[
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
            "DEFAULT",
        ]
        .join(", "),
    );
    let get = |dn: &str| mapper.apply(dn).expect(dn);
    assert_eq!(get("CN=Duke,OU=ServiceUsers,O=Org,C=US"), "duke");
    assert_eq!(get("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"), "duke@sme");
    assert_eq!(get("cn=duke,ou=sme,dc=mycp,dc=com"), "DUKE@SME");
    assert_eq!(get("cN=duke,OU=JavaSoft,O=Sun Microsystems"), "DUKE");
    assert_eq!(
        get("OU=JavaSoft,O=Sun Microsystems,C=US"),
        "OU=JavaSoft,O=Sun Microsystems,C=US"
    );
}

// Kafka's SslPrincipalMapperTest.testRulesSplitting ("seeing is believing").
#[test]
fn kafka_rules_splitting() {
    let cases = [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        (
            "[RULE:   /     , DEFAULT]",
            "  RULE:   /     / ,  DEFAULT  ",
        ),
        (
            "[RULE:  /     /U, DEFAULT]",
            "  RULE:  /     /U   ,DEFAULT  ",
        ),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        (
            "[RULE: /   , DEFAULT]",
            ",  , RULE: /   /    ,,,   DEFAULT, ,   ",
        ),
        (
            "[RULE:   /  /U, DEFAULT]",
            "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,",
        ),
        (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
        (
            r"[RULE:\**\/+/*/L, RULE:\/*\**/**]",
            r"RULE:\**\/+/*/L,RULE:\/*\**/**/",
        ),
        (
            r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ];
    for (expected, input) in cases {
        assert_eq!(rules(input).to_string(), expected, "{input}");
    }
}

// Kafka's SslPrincipalMapperTest.testCommaWithWhitespace.
#[test]
fn kafka_comma_with_whitespace() {
    let mapper = rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT");
    assert_eq!(
        mapper
            .apply(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz")
            .expect("map"),
        r"Tkac\, Adam"
    );
}

#[test]
fn no_rule_matches() {
    let mapper = rules("RULE:^CN=(.*)$/$1/L");
    let e = mapper.apply("O=x").expect_err("no match");
    assert_eq!(
        e.to_string(),
        "No rules apply to O=x, rules [RULE:^CN=(.*)$/$1/L]"
    );
    let e = rules("").apply("CN=a").expect_err("no rules");
    assert_eq!(e.to_string(), "No rules apply to CN=a, rules []");
    assert_eq!(
        MappingRules::default().apply("CN=a").expect("default"),
        "CN=a"
    );
    assert_eq!(rules(DEFAULT_MAPPING_RULES).to_string(), "[DEFAULT]");
}

// Expected values computed with Java 17: `dn.replaceAll(pattern, replacement)`
// after Kafka's escapeLiteralBackReferences.
#[test]
fn replacement_semantics_follow_java() {
    // Not anchored at the end: replaceAll replaces the lazy prefix only.
    assert_eq!(
        rules("RULE:^CN=(.*?),OU=(.*?)/$1@$2/")
            .apply("CN=x,OU=y,O=z")
            .expect("map"),
        "x@y,O=z"
    );
    // `$12` with one group is group 1 then a literal '2'.
    assert_eq!(rules("RULE:CN=(.*)/$12/").apply("CN=a").expect("map"), "a2");
    // `$3` with one group becomes a literal "$3" (Kafka's escaping).
    assert_eq!(
        rules("RULE:CN=(.*)/$1-$3/").apply("CN=a").expect("map"),
        "a-$3"
    );
    // A pattern without groups: `$1` is left to Java, which fails ("No group 1").
    let e = rules("RULE:CN=a/$1/").apply("CN=a").expect_err("no group");
    assert!(e.to_string().ends_with("No group 1"), "{e}");
    // Kafka's offset quirk: with 2 groups "$3$4" becomes "\$\3$4", so $4 fails.
    let e = rules("RULE:(C)N=(a)/$3$4/")
        .apply("CN=a")
        .expect_err("quirk");
    assert!(e.to_string().ends_with("No group 4"), "{e}");
    // Named groups and escapes.
    assert_eq!(
        rules(r"RULE:CN=(?<user>[a-z]+)/${user}\$/U")
            .apply("CN=bob")
            .expect("map"),
        "BOB$"
    );
    // An empty match may follow a non-empty one (Java find semantics).
    assert_eq!(rules("RULE:[a-z]*/X/").apply("abc").expect("map"), "XX");
    // Int overflow in a group number is Java's NumberFormatException.
    let e = rules("RULE:(a)/$99999999999/")
        .apply("a")
        .expect_err("overflow");
    assert!(
        e.to_string().ends_with("For input string: \"99999999999\""),
        "{e}"
    );
    // A group that did not participate is empty.
    assert_eq!(rules("RULE:(a)(b)?/[$2]/").apply("a").expect("map"), "[]");
    // Case mapping is Java's (Locale.ENGLISH), including final sigma and ß.
    let lower = rules("RULE:CN=(.*)/$1/L");
    assert_eq!(lower.apply("CN=ΟΔΟΣ").expect("map"), "οδος");
    assert_eq!(lower.apply("CN=İSTANBUL").expect("map"), "i\u{307}stanbul");
    assert_eq!(
        rules("RULE:CN=(.*)/$1/U").apply("CN=straße").expect("map"),
        "STRASSE"
    );
    // A final line terminator after the last rule is dropped, as Java's `$` allows.
    assert_eq!(rules("RULE:x/y/ \u{2028}").apply("x").expect("map"), "y");
    let e = MappingRules::parse(r"RULE:a/\/").expect_err("unterminated");
    assert_eq!(
        e.to_string(),
        r"Invalid rule: `RULE:a/\/`, unmatched substring: `RULE:a/\/`"
    );
}

#[test]
fn java_regex_semantics() {
    // `\w` and `\d` are ASCII in Java.
    assert!(rules(r"RULE:CN=(\w+)/$1/").apply("CN=é").is_err());
    assert_eq!(
        rules(r"RULE:CN=(\p{L}+)/$1/").apply("CN=é").expect("map"),
        "é"
    );
    // `.` does not match CR in Java.
    assert!(rules("RULE:CN=(.*)/$1/").apply("CN=a\rb").is_err());
    assert_eq!(
        rules("RULE:(?s)CN=(.*)/$1/").apply("CN=a\rb").expect("map"),
        "a\rb"
    );
    // (?i) is ASCII-only unless (?u): the Kelvin sign is not 'k'.
    assert!(rules("RULE:(?i)CN=k/x/").apply("CN=\u{212A}").is_err());
    assert_eq!(
        rules("RULE:(?iu)CN=k/x/")
            .apply("CN=\u{212A}")
            .expect("map"),
        "x"
    );
    assert_eq!(
        rules("RULE:(?i)cn=([a-c]+)/$1/")
            .apply("CN=aBc")
            .expect("map"),
        "aBc"
    );
    assert!(rules("RULE:(?i)[^a]/x/").apply("A").is_err());
    // A leading ']' in a class is literal; \Q..\E quotes.
    assert_eq!(rules(r"RULE:[]a]+/x/").apply("]a]").expect("map"), "x");
    assert_eq!(rules(r"RULE:\Qa.b\E/x/").apply("a.b").expect("map"), "x");
    assert!(rules(r"RULE:\Qa.b\E/x/").apply("aXb").is_err());
    // Octal and control escapes.
    assert_eq!(rules(r"RULE:\0101\cJ/x/").apply("A\n").expect("map"), "x");
}

#[test]
fn unsupported_java_regex_is_a_parse_error() {
    for pattern in [
        r"(a)\1",
        r"(?<n>a)\k<n>",
        "(?=a)a",
        "(?!b)a",
        "(?<=a)b",
        "(?<!a)b",
        "(?>a)",
        "a*+",
        "(?m)^a$",
        r"(?U)\w",
        r"\Ga",
        r"a\Z",
        r"\R",
        r"\p{InGreek}",
        r"\p{javaLowerCase}",
        "[a",
        "(a",
        "a)",
        "a{",
        r"\y",
    ] {
        let e = MappingRules::parse(&format!("RULE:{pattern}/x/")).expect_err(pattern);
        assert!(
            matches!(e, MappingError::InvalidPattern { .. }),
            "{pattern}: {e}"
        );
    }
}

#[test]
fn limits() {
    let long = "x".repeat(MAPPING_RULES_BYTES_MAX + 1);
    assert!(matches!(
        MappingRules::parse(&long),
        Err(MappingError::TooLong { .. })
    ));
    let dn = "x".repeat(DN_BYTES_MAX + 1);
    assert!(matches!(
        MappingRules::default().apply(&dn),
        Err(MappingError::TooLong { .. })
    ));
    // A replacement that repeats the whole match many times is cut off.
    let mapper = rules(&format!("RULE:(.*)/{}/", "$1".repeat(100)));
    let dn = "x".repeat(DN_BYTES_MAX);
    assert!(matches!(
        mapper.apply(&dn),
        Err(MappingError::Replacement { .. })
    ));
    assert!(subject_dn(&vec![0u8; CERTIFICATE_BYTES_MAX + 1]).is_err());
    assert!(subject_dn(b"not a certificate").is_err());
}

/// (DER of an X.501 Name, what Java 17's `new X500Principal(der).getName()` printed).
const JAVA_NAMES: &[(&str, &str)] = &[
    ("3010310e300c06035504030c05706c61696e", "CN=plain"),
    ("3010310e300c06035504030c05206c656164", r"CN=\ lead"),
    ("3011310f300d06035504030c06747261696c20", r"CN=trail\ "),
    ("300d310b300906035504030c022020", r"CN=\ \ "),
    ("300e310c300a06035504030c030d780d", "CN=\\\rx\\\r"),
    ("300d310b300906035504030c022378", r"CN=\#x"),
    ("300e310c300a06035504030c03613d62", r"CN=a\=b"),
    (
        "301c311a301806035504030c11612c622b633d643c653e663b6722685c69",
        r#"CN=a\,b\+c\=d\<e\>f\;g\"h\\i"#,
    ),
    ("3010310e300c06035504030c056e756c0078", r"CN=nul\00x"),
    ("30173115301306035504030c0cc3a974c3a9e29c93f09f9880", "CN=été✓😀"),
    ("30153113301106035504030c0a626164fffe2075746638", "CN=bad\u{FFFD}\u{FFFD} utf8"),
    ("301431123010060355040313097072696e7461626c65", "CN=printable"),
    ("3010310e300c060355040316056961354078", "CN=ia5@x"),
    ("300f310d300b06035504031404743631e9", "CN=t61\u{FFFD}"),
    ("3011310f300d06035504031e060062006d0070", r"CN=\00b\00m\00p"),
    (
        "301b3119301706035504031c10000000750000006e0000006900000076",
        "CN=#1c10000000750000006e0000006900000076",
    ),
    ("30123110300e06035504031b0767656e6572616c", "CN=general"),
    ("30123110300e06035504031a0776697369626c65", "CN=#1a0776697369626c65"),
    ("300e310c300a06035504031203313233", "CN=#1203313233"),
    ("300e310c300a060355040304036f6374", "CN=#04036f6374"),
    ("300e310c300a06035504038c03637478", "CN=#8c03637478"),
    ("300e310c300a060355040330030c0161", "CN=#30030c0161"),
    (
        "30163114301206092a864886f70d01090116056140622e63",
        "1.2.840.113549.1.9.1=#16056140622e63",
    ),
    ("300e310c300a06035504051303313233", "2.5.4.5=#1303313233"),
    (
        "3050310b3009060355040613025553310b300906035504080c024341310b300906035504070c025346310c300a060355040a0c034f7267310d300b060355040b0c04556e6974310a300806035504030c0178",
        "CN=x,OU=Unit,O=Org,L=SF,ST=CA,C=US",
    ),
    ("30223114300806035504030c01783008060355040b0c0179310a3008060355040a0c017a", "O=z,CN=x+OU=y"),
    ("301631143008060355040b0c0179300806035504030c0178", "OU=y+CN=x"),
    (
        "303b31133011060a0992268993f22c6401191603636f6d31133011060a0992268993f22c6401010c03756964310f300d06035504090c06737472656574",
        "STREET=street,UID=uid,DC=com",
    ),
    (
        "3062310e300c060355040c0c057469746c65310b300906035504040c02736e310b3009060355042a0c02676e310a3008060355042b0c0169310a3008060355042c0c0167310a3008060355042e0c017131123010060a2b060104012a020b02010c026970",
        "1.3.6.1.4.1.42.2.11.2.1=#0c026970,2.5.4.46=#0c0171,2.5.4.44=#0c0167,2.5.4.43=#0c0169,2.5.4.42=#0c02676e,2.5.4.4=#0c02736e,2.5.4.12=#0c057469746c65",
    ),
    ("300b3109300706035504030c00", "CN="),
    ("3000", ""),
    ("300d310b300906035504030c025c20", r"CN=\\\ "),
    ("300d310b300906035504030c02615c", r"CN=a\\"),
    ("3011310f300d06035504030c06092074616209", "CN=\t tab\t"),
    ("3010310e300c06035504030c050163746c7f", "CN=\u{1}ctl\u{7f}"),
    ("3011310f300d06035504030c06c2a06e62c2a0", "CN=\u{a0}nb\u{a0}"),
    ("30143112301006035504031309626164ff7072696e74", "CN=bad\u{FFFD}print"),
    ("3010310e300c06035504031605696135c3a9", "CN=ia5é"),
    ("300c310a300806035504031e0100", r"CN=\00"),
    ("300f310d300b06035504030c0461e29c41", "CN=a\u{FFFD}A"),
    ("3010310e300c06035504030c0561f09f9841", "CN=a\u{FFFD}A"),
    ("3010310e300c06035504030c0561eda08041", "CN=a\u{FFFD}A"),
    ("300f310d300b06035504030c0461c08041", "CN=a\u{FFFD}\u{FFFD}A"),
    ("3011310f300d06035504030c0661f490808041", "CN=a\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}A"),
    ("300e310c300a06035504030c0361e29c", "CN=a\u{FFFD}"),
    ("300e310c300a06032a03040c03612c62", "1.2.3.4=#0c03612c62"),
    ("3018310a300806035504030c0178310a300806035504030c0179", "CN=y,CN=x"),
    // A non-minimal length is re-encoded minimally, as Java does.
    ("300c310a300806022a030c810161", "1.2.3=#0c0161"),
];

#[test]
fn names_render_as_java_prints_them() {
    for (der, expected) in JAVA_NAMES {
        assert_eq!(name_rfc2253(&hex(der)).expect(der), *expected, "{der}");
    }
    // Java refuses a multi-byte tag ("improperly specified input name").
    assert!(name_rfc2253(&hex("300d310b300906035504031f210161")).is_err());
}

fn certificate(subject: &[(rcgen::DnType, rcgen::DnValue)]) -> Vec<u8> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    let mut dn = rcgen::DistinguishedName::new();
    for (ty, value) in subject {
        dn.push(ty.clone(), value.clone());
    }
    params.distinguished_name = dn;
    let key = rcgen::KeyPair::generate().expect("key");
    params.self_signed(&key).expect("sign").der().to_vec()
}

fn email() -> rcgen::DnType {
    rcgen::DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1])
}

fn ia5(s: &str) -> rcgen::DnValue {
    rcgen::DnValue::Ia5String(s.try_into().expect("ia5"))
}

/// The subjects of [`rcgen_certificates_render_as_java_prints_them`], with the
/// string Java 17 printed for `CertificateFactory.getInstance("X.509")
/// .generateCertificate(pem).getSubjectX500Principal().getName()`.
fn rcgen_subjects() -> Vec<(Vec<(rcgen::DnType, rcgen::DnValue)>, &'static str)> {
    use rcgen::DnType::*;
    let utf8 = |s: &str| rcgen::DnValue::Utf8String(s.to_string());
    vec![
        (vec![(CommonName, utf8("alice"))], "CN=alice"),
        (
            vec![
                (CountryName, utf8("US")),
                (StateOrProvinceName, utf8("CA")),
                (LocalityName, utf8("San Francisco")),
                (OrganizationName, utf8("Example Corp")),
                (OrganizationalUnitName, utf8("Service Users")),
                (CommonName, utf8("bob")),
            ],
            "CN=bob,OU=Service Users,O=Example Corp,L=San Francisco,ST=CA,C=US",
        ),
        (
            vec![
                (OrganizationName, utf8("Acme, Inc.")),
                (CommonName, utf8("carol")),
            ],
            r"CN=carol,O=Acme\, Inc.",
        ),
        (
            vec![
                (CommonName, utf8("dave")),
                (email(), ia5("dave@example.com")),
            ],
            "1.2.840.113549.1.9.1=#161064617665406578616d706c652e636f6d,CN=dave",
        ),
        (
            vec![(CommonName, utf8(" #lead+trail; "))],
            r"CN=\ \#lead\+trail\;\ ",
        ),
    ]
}

#[test]
fn rcgen_certificates_render_as_java_prints_them() {
    for (subject, expected) in rcgen_subjects() {
        let der = certificate(&subject);
        assert_eq!(subject_dn(&der).expect("dn"), expected);
    }
    let der = certificate(&rcgen_subjects()[1].0);
    let mapper = rules("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT");
    assert_eq!(
        principal_from_certificate(&der, &mapper).expect("principal"),
        Principal::user("bob@service users")
    );
    assert_eq!(
        principal_from_certificate(&der, &MappingRules::default()).expect("principal"),
        Principal::user("CN=bob,OU=Service Users,O=Example Corp,L=San Francisco,ST=CA,C=US")
    );
}

/// Writes the test certificates as PEM to $ES_AUTH_PEM_DIR so Java can print their
/// subjects: `cargo test -p es-auth -- --ignored dump_rcgen_certificates`.
#[test]
#[ignore]
fn dump_rcgen_certificates() {
    use std::io::Write;
    let dir = std::env::var("ES_AUTH_PEM_DIR").expect("ES_AUTH_PEM_DIR");
    for (i, (subject, _)) in rcgen_subjects().iter().enumerate() {
        let der = certificate(subject);
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &der);
        let mut f = std::fs::File::create(format!("{dir}/{i}.pem")).expect("create");
        writeln!(f, "-----BEGIN CERTIFICATE-----").expect("write");
        for line in b64.as_bytes().chunks(64) {
            writeln!(f, "{}", String::from_utf8_lossy(line)).expect("write");
        }
        writeln!(f, "-----END CERTIFICATE-----").expect("write");
    }
}

#[test]
fn java_utf8_decoding_edge_cases() {
    let d = java::utf8_lossy;
    assert_eq!(d(b"plain"), "plain");
    assert_eq!(d("é✓😀".as_bytes()), "é✓😀");
    assert_eq!(d(b"\xed\xa0\x80"), "\u{FFFD}");
    assert_eq!(d(b"\xed\xa0A"), "\u{FFFD}A");
    assert_eq!(d(b"\xe0\x80\x80"), "\u{FFFD}\u{FFFD}\u{FFFD}");
    assert_eq!(d(b"\xf0\x9f\x98"), "\u{FFFD}");
    assert_eq!(d(b"\xf8\x80"), "\u{FFFD}\u{FFFD}");
    assert_eq!(d(b"\xc2"), "\u{FFFD}");
}

proptest! {
    #[test]
    fn names_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = name_rfc2253(&bytes);
        let _ = subject_dn(&bytes);
        let _ = java::utf8_lossy(&bytes);
    }

    #[test]
    fn rules_never_panic(text in "[RULEDFAT:/\\\\$0-9LU,() .*?\\[\\]^a-c{}&|+-]{0,40}", dn in ".{0,20}") {
        if let Ok(mapper) = MappingRules::parse(&text) {
            let _ = mapper.apply(&dn);
        }
    }

    #[test]
    fn patterns_never_panic(pattern in "\\PC{0,24}", dn in "\\PC{0,16}") {
        if let Ok(mapper) = MappingRules::parse(&format!("RULE:{pattern}/$1$2\\$/")) {
            let _ = mapper.apply(&dn);
        }
    }

    #[test]
    fn utf8_matches_std_on_valid_input(s in "\\PC{0,40}") {
        prop_assert_eq!(java::utf8_lossy(s.as_bytes()), s);
    }
}

/// Differential check against Kafka's SslPrincipalMapper: reads JSON lines
/// `[rules, dn]` from $ES_AUTH_DIFF_IN and writes `[rules, dn, result-or-null]`
/// lines (null when es refuses the rules or fails the mapping) to $ES_AUTH_DIFF_OUT.
#[test]
#[ignore]
fn differential_mapping_dump() {
    let input =
        std::fs::read_to_string(std::env::var("ES_AUTH_DIFF_IN").expect("in")).expect("read");
    let mut out = String::new();
    for line in input.lines() {
        let (rules, dn): (String, String) = serde_json::from_str(line).expect("line");
        let result = MappingRules::parse(&rules)
            .map_err(|e| format!("PARSE {e}"))
            .and_then(|m| m.apply(&dn).map_err(|e| format!("APPLY {e}")));
        let value = match result {
            Ok(name) => serde_json::json!([rules, dn, name]),
            Err(e) => serde_json::json!([rules, dn, null, e]),
        };
        out.push_str(&value.to_string());
        out.push('\n');
    }
    std::fs::write(std::env::var("ES_AUTH_DIFF_OUT").expect("out"), out).expect("write");
}
