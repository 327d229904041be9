//! Schema texts without insignificant differences: [`minify`] drops white
//! space outside JSON strings (keeping everything else as the client wrote
//! it); [`sorted_json`] also sorts object keys (serde_json's map is
//! ordered by key), the normal form of a JSON document.

/// `text` without the white space between JSON tokens. Text that is not
/// JSON comes back with only that white space removed, which is harmless:
/// it is refused by the parser anyway.
pub fn minify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// The JSON document in `text` with sorted keys and no white space; None
/// if `text` is not JSON.
pub fn sorted_json(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    serde_json::to_string(&v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minify_keeps_strings_and_order() {
        assert_eq!(
            minify("{ \"type\" : \"record\",\n \"doc\": \"a b \\\" c\" }"),
            "{\"type\":\"record\",\"doc\":\"a b \\\" c\"}"
        );
    }

    #[test]
    fn sorted_json_sorts_keys() {
        assert_eq!(
            sorted_json("{\"type\": \"string\", \"a\": 1}").as_deref(),
            Some("{\"a\":1,\"type\":\"string\"}")
        );
        assert_eq!(sorted_json("not json"), None);
    }
}
