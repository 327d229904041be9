//! Confluent's own diff examples (json-schema-provider and protobuf-provider
//! test resources of confluentinc/schema-registry, not vendored here) run
//! through es's diffs, when `ES_CONFLUENT_EXAMPLES` names a directory that
//! holds them as strict JSON (`json-*.strict`, `proto-diff.strict`). Ignored
//! by default: an oracle for development, not part of the suite.

use std::collections::BTreeSet;

use es_registry::format::json_compat::{self, Json};

fn load(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("read");
    serde_json::from_str(&text).expect("json")
}

#[test]
#[ignore]
fn json_examples_agree_with_confluent() {
    let Ok(dir) = std::env::var("ES_CONFLUENT_EXAMPLES") else {
        return;
    };
    let mut wrong = 0;
    let mut total = 0;
    let mut verdicts_wrong = 0;
    for entry in std::fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if !name.starts_with("json-diff") || !name.ends_with(".strict") {
            continue;
        }
        for case in load(&path) {
            total += 1;
            let doc = |k: &str| Json {
                root: case[k].clone(),
                referenced: Default::default(),
            };
            let (o, u) = (doc("original_schema"), doc("update_schema"));
            let got: BTreeSet<String> = json_compat::differences(&o, &u)
                .iter()
                .map(|d| format!("{} #/{}", d.kind, d.path))
                .collect();
            let want: BTreeSet<String> = case["changes"]
                .as_array()
                .expect("changes")
                .iter()
                .map(|c| c.as_str().unwrap_or("").to_string())
                .collect();
            let verdict = json_compat::incompatible(&o, &u).is_empty();
            let want_verdict = case["compatible"].as_bool().unwrap_or(false);
            if verdict != want_verdict || got != want {
                wrong += 1;
                println!(
                    "{name}: {} | verdict {verdict} want {want_verdict}\n  got  {got:?}\n  want {want:?}",
                    case["description"]
                );
                if verdict != want_verdict {
                    verdicts_wrong += 1;
                    println!("  VERDICT WRONG");
                }
            }
        }
    }
    println!("{wrong} of {total} differ");
    assert_eq!(verdicts_wrong, 0, "verdicts that differ from Confluent's");
}

#[test]
#[ignore]
fn protobuf_examples_agree_with_confluent() {
    use es_registry::format::{proto, proto_compat};
    let Ok(dir) = std::env::var("ES_CONFLUENT_EXAMPLES") else {
        return;
    };
    let (mut wrong, mut total, mut verdicts_wrong) = (0, 0, 0);
    for case in load(&std::path::Path::new(&dir).join("proto-diff.strict")) {
        total += 1;
        let text = |k: &str| case[k].as_str().unwrap_or("").to_string();
        let deps = |k: &str| -> Vec<(String, String)> {
            case[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|d| {
                            let s = |f: &str| d[f].as_str().unwrap_or("").to_string();
                            (s("name"), s("dependency"))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let (od, ud) = (deps("original_dependencies"), deps("update_dependencies"));
        let borrow = |d: &[(String, String)]| -> Vec<(String, String)> { d.to_vec() };
        let (od, ud) = (borrow(&od), borrow(&ud));
        let od: Vec<(&str, &str)> = od.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let ud: Vec<(&str, &str)> = ud.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let (o, u) = match (
            proto::parse(&text("original_schema"), &od),
            proto::parse(&text("update_schema"), &ud),
        ) {
            (Ok(o), Ok(u)) => (o, u),
            (a, b) => {
                wrong += 1;
                println!(
                    "{}: does not parse: {:?} {:?}",
                    case["description"],
                    a.err(),
                    b.err()
                );
                continue;
            }
        };
        let got: BTreeSet<String> = proto_compat::differences(&o, &u)
            .iter()
            .map(|d| format!("{} #/{}", d.kind, d.path))
            .collect();
        let want: BTreeSet<String> = case["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| c.as_str().unwrap_or("").to_string())
            .collect();
        let verdict = proto_compat::incompatible(&o, &u).is_empty();
        let want_verdict = case["compatible"].as_bool().unwrap_or(false);
        if verdict != want_verdict {
            verdicts_wrong += 1;
        }
        if verdict != want_verdict || got != want {
            wrong += 1;
            println!(
                "{}: verdict {verdict} want {want_verdict}{}\n  got  {got:?}\n  want {want:?}",
                case["description"],
                if verdict != want_verdict {
                    " VERDICT WRONG"
                } else {
                    ""
                }
            );
        }
    }
    println!("{wrong} of {total} differ");
    assert_eq!(verdicts_wrong, 0, "verdicts that differ from Confluent's");
}
